// Bytes-per-parameter viz (seed 000). The server renders the default figure; this recomputes
// the same texts as builder/widgets/bytes_per_param.py (texts, format_params, fit_text) with
// exact integer bytes: ceil(params x num / (den x GPUs sharing it)), as teaching.bytes_per_param.
const UNITS = [[1e9, "B", "billion"], [1e6, "M", "million"], [1e3, "K", "thousand"], [1, "", ""]];
const sum = (list) => list.reduce((a, b) => a + b, 0);
const setAttrs = (el, attrs) => { for (const k in attrs) el.setAttribute(k, attrs[k]); };
const isInt = (v, lo, hi) => Number.isSafeInteger(+v) && +v >= lo && +v <= hi;
const left = (t, c) => (t <= c ? `yes, ${fmtBytes(c - t)} left` : `no, ${fmtBytes(t - c)} over`);

// '124M', '3.7B', '6.74B', '70.0B': three significant digits, half up, integer arithmetic.
function fmtParams(p) {
  const [u, s] = UNITS.find((x) => p >= x[0]), d = Math.max(0, 3 - String(Math.floor(p / u)).length);
  const t = String((2n * BigInt(p) * 10n ** BigInt(d) + BigInt(u)) / (2n * BigInt(u))).padStart(d + 1, "0");
  return (d ? t.slice(0, -d) + "." + (t.slice(-d).replace(/0+$/, "") || "0") : t) + s;
}

// Every [data-t] element gets texts[key] (summary, live region and table share keys); the URL
// follows the state 300 ms after the last change (browsers throttle history updates).
function painter(root, st) {
  const els = $$(root, "[data-t]"), save = stateWriter(root.id);
  const paint = (T, quiet) => {
    els.forEach((e) => { if (e.textContent !== T[e.dataset.t]) e.textContent = T[e.dataset.t]; });
    if (!quiet) save(st);
  };
  paint.url = save.url;  // the link to what is on screen, for Copy link
  return paint;
}

WIDGETS["bytes-per-param"] = (root, d) => {
  const { segments: segs, gpus, steps, presets } = d, st = { ...d.start }, caps = gpus.map((g) => g.bytes);
  const lo = Math.log10(d.min), span = Math.log10(d.max) - lo, paint = painter(root, st);
  const slider = $(root, "[type=range]"), count = $(root, "[type=number]"), bars = $$(root, ".wdg-bar");
  const chips = $$(root, "[aria-pressed]"), group = $(root, "[role=radiogroup]"), fper = $(root, "[data-t=fper]");
  const rects = bars.map((b) => $$(b, ".tm-segment")), lines = $$(root, ".tm-capacity"), labels = $$(root, "text");
  const bytes = (z, n) => segs.map((s) => ceilDiv(BigInt(st.p) * BigInt(s.num), s.den * (z >= s.shard ? n : 1)));
  function draw(from) {
    const { p, z, n } = st, full = bytes(0, 1), per = bytes(z, n), tot = sum(full), gpu = sum(per);
    const P = fmtParams(p), zs = `ZeRO ${z ? "stage " + z : "none"}`, shown = z ? gpu : tot;
    const T = { p: P, tot: fmtBytes(tot), per: fmtBytes(gpu), hper: `Per GPU (${zs}, ${n} GPUs)` };
    const verdict = gpus.map((g) => (shown <= g.bytes ? `fits on ${g.name} (${fmtBytes(g.bytes - shown)} headroom)`
      : `exceeds ${g.name} by ${fmtBytes(shown - g.bytes)}`)).join("; ");
    T.verdict = verdict && verdict[0].toUpperCase() + verdict.slice(1) + ".";
    T.ftot = `Total = ${P} × ${d.sum} B = ${T.tot}`;
    T.fper = `Per GPU with ${zs} on ${n} GPUs = ${T.per}`;
    segs.forEach((s, i) => {
      const k = z >= s.shard ? n : 1;
      T["s" + i] = fmtBytes(full[i]);
      T["g" + i] = fmtBytes(per[i]);
      T["f" + i] = `${s.label} = ${P} × ${s.text} B${k > 1 ? " / " + k : ""} = ${T["g" + i]}`;
      T["c" + i] = s.label + (k > 1 ? ` / ${n} (sharded)` : " (full)");
    });
    caps.forEach((c, i) => { T["v" + i] = left(tot, c); T["w" + i] = left(gpu, c); });
    T.sum = `Bytes per parameter: ${P} parameters, ${zs}, ${n} GPUs. Total ${T.tot}${z ? `, ${T.per} per GPU` : ""}. ${T.verdict}`;
    paint(T, from === "start");
    // Bars on one scale, max(total, largest GPU) x 1.15 (seed 000); hatching past the smallest GPU exceeded.
    const scale = Math.max(tot, ...caps) * 1.15, pc = (v) => (100 * v / scale).toFixed(3) + "%";
    [full, per].forEach((parts, b) => {
      const total = sum(parts), over = Math.min(total, ...caps.filter((c) => c < total));
      let x = 0;
      rects[b].forEach((r, i) => { setAttrs(r, { x: pc(x), width: pc(parts[i]) }); x += parts[i]; });
      setAttrs($(bars[b], ".wdg-over"), { x: pc(over), width: pc(total - over) });
      $(bars[b], ".wdg-badge").hidden = over === total;
    });
    lines.forEach((l, i) => { const x = pc(caps[i % caps.length]); setAttrs(l, { x1: x, x2: x }); });
    labels.forEach((t, i) => {
      const end = caps[i] / scale > 0.5;
      setAttrs(t, { x: pc(caps[i]), dx: end ? -4 : 4, "text-anchor": end ? "end" : "start" });
    });
    bars[1].hidden = fper.hidden = !z;
    root.dataset.params = p;
    root.dataset.bytes = full + ";" + per;
    const u = UNITS.find((x) => x[1] && P.endsWith(x[1]));
    slider.setAttribute("aria-valuetext", (u ? P.slice(0, -1) + " " + u[2] : P) + " parameters");
    if (from !== "slider") slider.value = Math.round(steps * (Math.log10(p) - lo) / span);
    chips.forEach((c, i) => c.setAttribute("aria-pressed", presets[i].params === p));
  }
  const setZero = radioGroup(group, (v) => { st.z = +v; draw(); });
  const saved = readState(root.id);
  if (isInt(saved.p, 1, 1e15)) st.p = +saved.p;
  if (isInt(saved.z, 0, 3)) st.z = +saved.z;
  if (isInt(saved.n, 1, 4096)) st.n = count.value = +saved.n;
  setZero(st.z);
  // The log-scale slider: a position maps to 10^x, rounded to three significant digits.
  slider.addEventListener("input", () => {
    const x = 10 ** (lo + span * slider.value / steps), e = 10 ** Math.max(0, Math.floor(Math.log10(x)) - 2);
    st.p = Math.round(x / e) * e;
    draw("slider");
  });
  count.addEventListener("input", () => { if (isInt(count.value, 1, 4096)) { st.n = +count.value; draw(); } });
  chips.forEach((c, i) => c.addEventListener("click", () => { st.p = presets[i].params; draw(); }));
  root.addEventListener("keydown", (e) => {
    const chip = chips[e.key - 1];
    if (e.target === count || e.ctrlKey || e.metaKey || e.altKey || !(chip || /^z$/i.test(e.key))) return;
    e.preventDefault();
    if (chip) chip.click();
    else { st.z = (st.z + 1) % 4; setZero(st.z); draw(); }
  });
  copyLink($(root, ".wdg-copy"), $(root, ".wdg-status"), paint.url);
  $(root, ".wdg-controls").hidden = false;
  draw("start");
};
