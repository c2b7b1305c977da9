// Shared helpers for every widget. For each page the build wraps, in name order, the
// NN-<widget>.js files of the widgets the page embeds and the shared files they need (this one,
// 99-boot.js, and a helper file such as 05-radio-group.js only when a name it defines is used)
// in one strict-mode function scope, minified, served as static/widgets-<widgets>.js.
// Widgets register themselves in WIDGETS; 99-boot.js starts them.
const WIDGETS = {};
const GiB = 2 ** 30;
const $ = (root, selector) => root.querySelector(selector);
const $$ = (root, selector) => Array.from(root.querySelectorAll(selector));

// A store of the last `limit` values made, by key: kept(key, make) gives the value kept for the key, else make()'s,
// kept as the newest (a value used again becomes the newest; the oldest goes first when the store is full).
// kept.has(key): whether a value is kept for the key. For what a reader comes back to: the states just shown, a
// model just priced, a search's probes.
function keepLast(limit) {
  const store = new Map();
  const kept = (key, make) => {
    let value = store.get(key);
    if (value === undefined) {
      value = make();
      if (store.size >= limit) store.delete(store.keys().next().value);
    } else store.delete(key);
    store.set(key, value);
    return value;
  };
  kept.has = (key) => store.has(key);
  return kept;
}

// Work that takes many estimates, after the input's cheap part is on screen: later(work) runs work in a task
// queued once the next frame is painted; any later call, with work or without, cancels work still waiting. Work
// that is a generator function (each step one estimate: a search's probe) runs in slices, each its own task of at
// most SLICE_MS (a step is not begun when one as long as the last would overrun it), so that the browser paints and
// handles input between them (Lighthouse counts a task over 50 ms, on a phone 4x slower, as blocking); a later call
// cancels its steps not yet run.
const SLICE_MS = 10;
function afterFrame() {
  let turn = 0;
  const slices = (steps, mine) => {
    const begun = performance.now();
    for (let at = begun; mine == turn; ) {
      if (steps.next().done) return;
      const now = performance.now(), last = now - at;
      at = now;
      if (now - begun + last > SLICE_MS) return nextTask(() => slices(steps, mine));
    }
  };
  return (work) => {
    const mine = ++turn;
    if (work) requestAnimationFrame(() => setTimeout(() => {
      const steps = mine == turn && work();
      if (steps?.next) slices(steps, mine);
    }));
  };
}
// A value made in steps (the value of a generator that pauses between them): made() is the value, its steps not
// yet run run at once; made.steps() is a generator that runs them one at a time (for afterFrame's slices).
function madeInSteps(steps) {
  let done = false, value;
  const step = () => {
    const next = steps.next();
    if (next.done) [done, value] = [true, next.value];
    return done;
  };
  const made = () => {
    while (!done) step();
    return value;
  };
  made.steps = function* () {
    while (!done && !step()) yield;
  };
  return made;
}
// A task soon after this one, with no timer's delay (nested timeouts wait at least 4 ms): scheduler.yield where the
// browser has it, else a message to itself.
const nextTask = globalThis.scheduler && scheduler.yield ? (run) => scheduler.yield().then(run) : (() => {
  const channel = new MessageChannel(), queue = [];
  channel.port1.onmessage = () => queue.shift()();
  return (run) => { queue.push(run); channel.port2.postMessage(""); };
})();

// Same text as Python's builder.model.units.format_bytes: '13.0 GiB' / '161.4 GB'. toFixed rounds
// the double correctly but sends exact ties up; Python sends them to even. A tie is exact only
// when x * 2^(digits+1) is an odd integer.
function fmtBytes(bytes, unit = "GiB", digits = 1) {
  const x = bytes / (unit === "GB" ? 1e9 : GiB);
  const t = x * 2 ** (digits + 1);
  let text = x.toFixed(digits);
  if (Number.isInteger(t) && t % 2 === 1) {
    const k = Math.floor(x * 10 ** digits);
    text = ((k % 2 ? k + 1 : k) / 10 ** digits).toFixed(digits);
  }
  return text + " " + unit;
}

// A number with thousands separators, as Python's f"{n:,}": '8,030,261,248' (its whole part grouped, the rest as
// written). Written here, not by Intl.NumberFormat: a page's first formatter costs it some 20 ms, in the task that
// starts its widgets.
const commas = (n) => String(+n).replace(/^-?\d+/, (whole) => whole.replace(/\B(?=(\d{3})+$)/g, ","));

// Deep links: a widget's state lives in the query string as <widget id>.<key>=<value>. A link written before a
// rename keeps working: a widget whose author named it (id=calc) carries its old positional id (calculator-1) in
// data-legacy-id, read when the new prefix is absent; a widget whose keys were renamed since a release carries its
// renames table in data-renamed (old key -> [new key, release]: builder/widgets/renames.py), an old key read as its
// new key when the new key is absent. Either way the URL is rewritten to the new prefix and keys.
function readState(id) {
  const pick = (params, prefix) => {
    const state = {};
    for (const [key, value] of params) if (key.startsWith(prefix + ".")) state[key.slice(prefix.length + 1)] = value;
    return state;
  };
  const params = new URLSearchParams(location.search), { dataset } = document.getElementById(id) || { dataset: {} };
  const legacy = dataset.legacyId, renamed = JSON.parse(dataset.renamed || "{}");
  let state = pick(params, id), from = id;
  const old = legacy && !Object.keys(state).length ? pick(params, legacy) : {};
  if (Object.keys(old).length) [state, from] = [old, legacy];
  let moved = from !== id;
  for (const [old, [key]] of Object.entries(renamed)) {
    if (!(old in state)) continue;
    if (!(key in state)) state[key] = state[old];
    delete state[old];
    moved = true;
  }
  if (!moved) return state;
  for (const key of [...params.keys()]) if (key.startsWith(from + ".")) params.delete(key);
  for (const [key, value] of Object.entries(state)) params.set(id + "." + key, value);
  try {
    history.replaceState(null, "", new URL("?" + params + location.hash, location.href).href);
  } catch (error) {
    // Some file:// documents refuse URL changes; the state is still read.
  }
  return state;
}

// A widget's writer of its state into the URL, 300 ms after the last change: browsers throttle
// history updates, and the URL need not follow every slider step. The writer's .url() is the link
// to the state it was last given, at once, whether or not the URL has been written yet. `shape` makes what a
// link carries of a state (the state itself by default), only when a link is made: a slider step costs no more
// than keeping the state and the time (one timer runs until 300 ms have passed since the last change).
function stateWriter(id, shape = (state) => state) {
  let timer = 0, due = 0, latest = null;
  const url = () => {
    if (latest === null) return location.href;
    const params = new URLSearchParams(location.search);
    for (const key of [...params.keys()]) if (key.startsWith(id + ".")) params.delete(key);
    for (const [key, value] of Object.entries(shape(latest))) params.set(id + "." + key, value);
    return new URL("?" + params + location.hash, location.href).href;
  };
  const flush = () => {
    const wait = due - performance.now();
    if (wait > 0) return (timer = setTimeout(flush, wait));
    timer = 0;
    const link = url();
    if (link == location.href) return;
    try {
      history.replaceState(null, "", link);
    } catch (error) {
      // Some file:// documents refuse URL changes; the widget still works, and Copy link still has the link.
    }
  };
  const write = (state) => {
    latest = state;
    due = performance.now() + 300;
    timer ||= setTimeout(flush, 300);
  };
  write.url = url;
  return write;
}

// A "copy link" button: clipboard when allowed, else show the link to copy by hand. `link` gives the URL of
// what is on screen when the button is pressed (a stateWriter's .url), else the page's own URL. With the
// widget's `id`, a second button beside it copies the embed view of the same state (?embed=<id>, 99-boot.js).
function copyLink(button, status, link = () => location.href, id = "") {
  const copy = (url) => {
    const shown = () => { status.textContent = "Copy this link: " + url; };
    if (navigator.clipboard) {
      navigator.clipboard.writeText(url).then(() => { status.textContent = "Link copied."; }, shown);
    } else shown();
  };
  button.addEventListener("click", () => copy(link()));
  if (!id) return;
  const embed = document.createElement("button");
  embed.type = "button";
  if (button.className) embed.className = button.className + "-embed";
  embed.dataset.copyEmbed = "";
  embed.textContent = "Copy embed link";
  button.after(" ", embed);
  embed.addEventListener("click", () => {
    const url = new URL(link());
    url.searchParams.set("embed", id);
    copy(url.href);
  });
}
