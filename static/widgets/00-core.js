// Shared helpers for every widget. For each page the build wraps, in name order, the shared
// files (this one and 99-boot.js) and the NN-<widget>.js files of the widgets the page embeds
// in one strict-mode function scope, served as static/widgets-<widgets>.js.
// Widgets register themselves in WIDGETS; 99-boot.js starts them.
const WIDGETS = {};
const GiB = 2 ** 30;
const $ = (root, selector) => root.querySelector(selector);
const $$ = (root, selector) => Array.from(root.querySelectorAll(selector));

// ceil(a / b) exactly for non-negative integers (BigInt), as a Number: the Python model rounds
// each part up to a whole byte (builder.model.breakdown.whole_bytes).
const ceilDiv = (a, b) => Number((BigInt(a) + BigInt(b) - 1n) / BigInt(b));

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

// Deep links: a widget's state lives in the query string as <widget id>.<key>=<value>.
function readState(id) {
  const state = {};
  for (const [key, value] of new URLSearchParams(location.search)) {
    if (key.startsWith(id + ".")) state[key.slice(id.length + 1)] = value;
  }
  return state;
}

function writeState(id, state) {
  const params = new URLSearchParams(location.search);
  for (const key of Array.from(params.keys())) if (key.startsWith(id + ".")) params.delete(key);
  for (const [key, value] of Object.entries(state)) params.set(id + "." + key, value);
  try {
    history.replaceState(null, "", "?" + params + location.hash);
  } catch (error) {
    // Some file:// documents refuse URL changes; the widget still works, only the link is stale.
  }
}

// writeState 300 ms after the last change: browsers throttle history updates, and the URL need
// not follow every slider step.
function stateWriter(id) {
  let timer;
  return (state) => {
    clearTimeout(timer);
    timer = setTimeout(() => writeState(id, state), 300);
  };
}

// A "copy link" button: clipboard when allowed, else show the link to copy by hand.
function copyLink(button, status) {
  button.addEventListener("click", () => {
    const url = location.href;
    const shown = () => { status.textContent = "Copy this link: " + url; };
    if (navigator.clipboard) {
      navigator.clipboard.writeText(url).then(() => { status.textContent = "Link copied."; }, shown);
    } else shown();
  });
}

// role=radiogroup of role=radio buttons: click, arrow keys, Home/End; roving tabindex and
// aria-checked. Returns a setter that selects a value without calling onPick.
function radioGroup(group, onPick) {
  const radios = $$(group, "[role=radio]");
  const select = (radio) => radios.forEach((r) => {
    r.setAttribute("aria-checked", String(r === radio));
    r.tabIndex = r === radio ? 0 : -1;
  });
  const pick = (radio, focus) => {
    select(radio);
    if (focus) radio.focus();
    onPick(radio.dataset.value);
  };
  radios.forEach((radio, index) => {
    radio.addEventListener("click", () => pick(radio));
    radio.addEventListener("keydown", (event) => {
      const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[event.key];
      let next = null;
      if (step) next = radios[(index + step + radios.length) % radios.length];
      if (event.key === "Home") next = radios[0];
      if (event.key === "End") next = radios[radios.length - 1];
      if (next) { event.preventDefault(); pick(next, true); }
    });
  });
  return (value) => {
    const radio = radios.find((r) => r.dataset.value === String(value));
    if (radio) select(radio);
  };
}
