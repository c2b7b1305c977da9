// Bytes-per-parameter viz (seed 000). The server renders the default figure; this recomputes
// the same texts as builder/widgets/bytes_per_param.py (texts, format_params, fit_text) with
// exact integer bytes: ceil(params x num / (den x GPUs sharing it)), as teaching.bytes_per_param.
const UNITS = [[1e9, "B", "billion"], [1e6, "M", "million"], [1e3, "K", "thousand"], [1, "", ""]];
const sum = (list) => list.reduce((a, b) => a + b, 0);
const setAttrs = (el, attrs) => { for (const k in attrs) el.setAttribute(k, attrs[k]); };
const fit = (t, c) => (t <= c ? [`${fmtBytes(c - t)} headroom`, `yes, ${fmtBytes(c - t)} left`]
  : [`exceeds by ${fmtBytes(t - c)}`, `no, ${fmtBytes(t - c)} over`]);

// '124M', '3.7B', '6.74B', '70.0B': three significant digits, half up, integer arithmetic.
function fmtParams(p) {
  const [u, s] = UNITS.find((x) => p >= x[0]);
  const d = Math.max(0, 3 - String(Math.floor(p / u)).length);
  const t = String((2n * BigInt(p) * 10n ** BigInt(d) + BigInt(u)) / (2n * BigInt(u))).padStart(d + 1, "0");
  return (d ? t.slice(0, -d) + "." + (t.slice(-d).replace(/0+$/, "") || "0") : t) + s;
}

// Every [data-t] element gets texts[key]; live regions and tables share the keys.
const paint = (root) => { const els = $$(root, "[data-t]"); return (t) => els.forEach((e) => { e.textContent = t[e.dataset.t]; }); };

WIDGETS["bytes-per-param"] = (root, d) => {
  const { segments: segs, gpus, steps } = d, st = { ...d.start }, id = root.id;
  const lo = Math.log10(d.min), span = Math.log10(d.max) - lo;
  const slider = $(root, "[type=range]"), count = $(root, "[type=number]"), bars = $$(root, ".wdg-bar");
  const chips = $$(root, "[aria-pressed]"), write = paint(root);
  let timer;
  const bytes = (z, n) => segs.map((s) => ceilDiv(BigInt(st.p) * BigInt(s.num), s.den * (z >= s.shard ? n : 1)));
  const toStep = (p) => Math.round(steps * (Math.log10(p) - lo) / span);
  const fromStep = (v) => {
    const x = 10 ** (lo + span * v / steps), e = 10 ** Math.max(0, Math.floor(Math.log10(x)) - 2);
    return Math.round(x / e) * e;
  };
  // from: "slider" (keep its position), "start" (no URL change), undefined (any other control).
  function draw(from) {
    const { p, z, n } = st, full = bytes(0, 1), per = bytes(z, n), tot = sum(full), gpu = sum(per);
    const P = fmtParams(p), stage = z ? "stage " + z : "none", T = { p: P, tot: fmtBytes(tot), per: fmtBytes(gpu) };
    const u = UNITS.find((x) => x[1] && P.endsWith(x[1]));
    const shown = z ? gpu : tot;
    const verdict = gpus.map((g) => (shown <= g.bytes ? `fits on ${g.name} (${fit(shown, g.bytes)[0]})`
      : `exceeds ${g.name} by ${fmtBytes(shown - g.bytes)}`)).join("; ");
    T.verdict = verdict && verdict[0].toUpperCase() + verdict.slice(1) + ".";
    T.ftot = `Total = ${P} × ${d.sum} B = ${T.tot}`;
    T.fper = `Per GPU with ZeRO ${stage} on ${n} GPUs = ${T.per}`;
    T.hper = `Per GPU (ZeRO ${stage}, ${n} GPUs)`;
    segs.forEach((s, i) => {
      const k = z >= s.shard ? n : 1;
      T["s" + i] = fmtBytes(full[i]);
      T["g" + i] = fmtBytes(per[i]);
      T["f" + i] = `${s.label} = ${P} × ${s.text} B${k > 1 ? " / " + k : ""} = ${T["g" + i]}`;
      T["c" + i] = s.label + (k > 1 ? ` / ${n} (sharded)` : " (full)");
    });
    gpus.forEach((g, i) => { T["v" + i] = fit(tot, g.bytes)[1]; T["w" + i] = fit(gpu, g.bytes)[1]; });
    T.sum = `Bytes per parameter: ${P} parameters, ZeRO ${stage}, ${n} GPUs. Total ${T.tot}` +
      (z ? `, ${T.per} per GPU` : "") + ". " + T.verdict;
    write(T);
    // Bars: both on one scale, max(total, largest GPU) x 1.15 (seed 000).
    const scale = Math.max(tot, ...gpus.map((g) => g.bytes)) * 1.15, pc = (v) => (100 * v / scale).toFixed(3) + "%";
    [full, per].forEach((parts, b) => {
      const total = sum(parts), over = Math.min(total, ...gpus.map((g) => g.bytes).filter((c) => c < total));
      let x = 0;
      $$(bars[b], ".tm-segment").forEach((r, i) => { setAttrs(r, { x: pc(x), width: pc(parts[i]) }); x += parts[i]; });
      setAttrs($(bars[b], ".wdg-over"), { x: pc(over), width: pc(total - over) });
      $(bars[b], ".wdg-badge").hidden = over === total;
    });
    $$(root, ".tm-capacity").forEach((l, i) => setAttrs(l, { x1: pc(gpus[i % gpus.length].bytes), x2: pc(gpus[i % gpus.length].bytes) }));
    $$(root, "text").forEach((t, i) => {
      const end = gpus[i].bytes / scale > 0.5;
      setAttrs(t, { x: pc(gpus[i].bytes), dx: end ? -4 : 4, "text-anchor": end ? "end" : "start" });
    });
    bars[1].hidden = !z;
    $(root, "[data-t=fper]").hidden = !z;
    root.dataset.params = p;
    root.dataset.bytes = full + ";" + per;
    setAttrs(slider, { "aria-valuetext": (u ? P.slice(0, -1) + " " + u[2] : P) + " parameters" });
    if (from !== "slider") slider.value = toStep(p);
    chips.forEach((c, i) => c.setAttribute("aria-pressed", d.presets[i].params === p));
    clearTimeout(timer);
    if (from !== "start") timer = setTimeout(() => writeState(id, st), 300);
  }
  const setZero = radioGroup($(root, "[role=radiogroup]"), (v) => { st.z = +v; draw(); });
  const saved = readState(id);
  if (+saved.p > 0 && Number.isSafeInteger(+saved.p)) st.p = +saved.p;
  if (/^[0-3]$/.test(saved.z)) st.z = +saved.z;
  if (+saved.n >= 1 && +saved.n <= 4096 && Number.isInteger(+saved.n)) st.n = count.value = +saved.n;
  setZero(st.z);
  slider.addEventListener("input", () => { st.p = fromStep(+slider.value); draw("slider"); });
  count.addEventListener("input", () => {
    const n = +count.value;
    if (Number.isInteger(n) && n >= 1 && n <= 4096) { st.n = n; draw(); }
  });
  chips.forEach((c, i) => c.addEventListener("click", () => { st.p = d.presets[i].params; draw(); }));
  root.addEventListener("keydown", (e) => {
    if (e.target === count || e.ctrlKey || e.metaKey || e.altKey) return;
    const i = +e.key - 1;
    if (e.key === "z" || e.key === "Z") { st.z = (st.z + 1) % 4; setZero(st.z); draw(); } else if (i >= 0 && i < chips.length) chips[i].click();
    else return;
    e.preventDefault();
  });
  copyLink($(root, ".wdg-copy"), $(root, ".wdg-status"));
  $(root, ".wdg-controls").hidden = false;
  draw("start");
};
