// Bytes-per-parameter viz (seed 000). The server renders the default figure; this fills the same texts as
// builder/widgets/bytes_per_param.py (texts, format_params, fit_text): the segments' bytes are the teaching
// model's SEGMENTS rule, the verdicts the full model's need (02-model.js, for the catalog model nearest in size).
// '124M', '3.7B', '6.74B', '70.0B': three significant digits, half up, integer arithmetic (units: bytes_per_param.UNITS).
function fmtParams(p, units, digits) {
  const [u, s] = units.find((x) => p >= x[0]), d = Math.max(0, digits - String(Math.floor(p / u)).length);
  const t = String((2n * BigInt(p) * 10n ** BigInt(d) + BigInt(u)) / (2n * BigInt(u))).padStart(d + 1, "0");
  return (d ? t.slice(0, -d) + "." + (t.slice(-d).replace(/0+$/, "") || "0") : t) + s;
}

WIDGETS["bytes-per-param"] = (root, d) => {
  const { segments: segs, gpus, presets, ticks } = d, st = { ...d.start }, caps = gpus.map((g) => g.bytes);
  const paint = painter(root, st), nearestTick = compileRule(d.nearestTick);
  const slider = $(root, "[type=range]"), count = $(root, "[type=number]"), bars = $$(root, ".wdg-bar");
  const chips = $$(root, "[aria-pressed]"), group = $(root, "[role=radiogroup]"), fper = $(root, "[data-t=fper]");
  const rects = bars.map((b) => $$(b, ".tm-segment")), lines = $$(root, ".tm-capacity"), halos = $$(root, ".wdg-halo"), labels = $$(root, "text");
  const [overs, peaks, badges] = [".wdg-over", ".wdg-peak", ".wdg-badge"].map((k) => bars.map((b) => $(b, k)));
  const T0 = d.t, fill = fillText, segmentBytes = ruleSymbols(d.rules), compare = nearestModel(d.full, d.base);
  const bytes = (z, n) => segmentBytes({ params: st.params, zero_stage: z, gpus: n, segments: segs }).segment_bytes.map((r) => r.bytes);
  const left = (t, c) => (t <= c ? fill(T0.yes, fmtBytes(c - t)) : fill(T0.no, fmtBytes(t - c)));
  // full_model.compare: the nearest catalog model, run with the widget's precision and optimizer, ZeRO stage z on n GPUs.
  const run = (z, n) => ({ shard_stage: z, dp: n });
  const priced = (z, n) => {
    const { need, line } = compare(st.params, run(z, n)), where = z ? fill(T0.sharded, z, n) : n > 1 ? fill(T0.replicated, n) : T0.one;
    return [need, line(fill(T0.run, d.precision, d.optimizer, d.base.micro_batch, commas(d.base.seq_len), where))];
  };
  // The controls' own state: the slider's words (and its position, unless the slider moved), the preset pressed.
  const controls = (P, from) => {
    const u = d.units.find((x) => x[1] && P.endsWith(x[1]));
    setAttrs(slider, { "aria-valuetext": fill(T0.valuetext, u ? P.slice(0, -1) + " " + u[2] : P) });
    if (from !== "slider") slider.value = nearestTick({ ticks, asked: st.params }).index;
    chips.forEach((c, i) => setAttrs(c, { "aria-pressed": presets[i].params === st.params }));
  };
  function drawWhole(from) {
    const { params: p, zero: z, dp: n } = st, full = bytes(0, 1), per = bytes(z, n), tot = addUp(full), gpu = addUp(per);
    const P = fmtParams(p, d.units, d.digits), zs = fill(T0.zero, d.stages[z]), needs = [priced(0, 1), priced(z, n)], shown = needs[1][0];
    const T = { p: P, tot: fmtBytes(tot), per: fmtBytes(gpu), hper: fill(T0.hper, zs, n), model: needs[1][1],
      need1: fmtBytes(needs[0][0]), needn: fmtBytes(needs[1][0]) };
    T.verdict = fill(T0.verdict, fmtBytes(shown), gpus.map((g) => (shown <= g.bytes ? fill(T0.fits, g.name, fmtBytes(g.bytes - shown))
      : fill(T0.exceeds, g.name, fmtBytes(shown - g.bytes)))).join("; "));
    T.ftot = fill(T0.ftot, P, d.sum, T.tot);
    T.fper = fill(T0.fper, zs, n, T.per);
    segs.forEach((s, i) => {
      const k = z >= s.shard ? n : 1;
      T["s" + i] = fmtBytes(full[i]);
      T["g" + i] = fmtBytes(per[i]);
      T["f" + i] = fill(T0.segment, s.label, P, s.text, k > 1 ? fill(T0.divided, k) : "", T["g" + i]);
      T["c" + i] = k > 1 ? fill(T0.segment_sharded, s.label, n) : fill(T0.segment_full, s.label);
    });
    caps.forEach((c, i) => { T["v" + i] = left(needs[0][0], c); T["w" + i] = left(needs[1][0], c); });
    T.sum = fill(T0.summary, P, zs, n, T.tot, z ? fill(T0.summary_per_gpu, T.per) : "", T.verdict);
    paint(T, from === "start");
    // bytes_per_param.bars: one scale, max(total, both needs, largest GPU) x 1.15 (seed 000); each bar's need
    // marked, hatching from the smallest GPU the need exceeds to the bar's end or the need, whichever is further.
    const L = d.layout, scale = Math.max(tot, needs[0][0], needs[1][0], ...caps) * L.margin, pc = (v) => (100 * v / scale).toFixed(3) + "%";
    [full, per].forEach((parts, b) => {
      const need = needs[b][0], end = Math.max(addUp(parts), need), exceeded = caps.filter((c) => c < need);
      const over = exceeded.length ? Math.min(...exceeded) : end;
      let x = 0;
      rects[b].forEach((r, i) => { setAttrs(r, { x: pc(x), width: pc(parts[i]) }); x += parts[i]; });
      setAttrs(overs[b], { x: pc(over), width: pc(end - over) });
      setAttrs(peaks[b], { x1: pc(need), x2: pc(need) });
      badges[b].hidden = !exceeded.length;
    });
    lines.forEach((l, i) => { const x = pc(caps[i % caps.length]); setAttrs(l, { x1: x, x2: x }); setAttrs(halos[i], { x1: x, x2: x }); });
    labels.forEach((t, i) => {
      const end = caps[i] / scale > L.end_at;
      setAttrs(t, { x: pc(caps[i]), dx: end ? -L.dx : L.dx, "text-anchor": end ? "end" : "start" });
    });
    bars[1].hidden = fper.hidden = !z;
    setAttrs(root, { "data-needs": needs.map((x) => x[0]), "data-params": p, "data-bytes": full + ";" + per });
    controls(P, from);
  }
  // A move to a model or run not priced yet: the parameter count and the controls at once, the figure a frame later.
  const draw = drawWhenPriced(root, () => compare.priced(st.params, run(0, 1)) && compare.priced(st.params, run(st.zero, st.dp)),
    (from) => {
      const P = fmtParams(st.params, d.units, d.digits);
      paint({ p: P }, true);
      controls(P, from);
    }, drawWhole);
  const setZero = radioGroup(group, (v) => { st.zero = +v; draw(); });
  const { taken, refused } = checkLink(readState(root.id), d.link.keys);
  for (const k in taken) st[k] = +taken[k];
  count.value = st.dp;
  linkNotice(root, d.link.words, refused);
  setZero(st.zero);
  // The slider's positions are round counts (bytes_per_param.slider_ticks).
  slider.addEventListener("input", () => {
    st.params = ticks[slider.value].value;
    draw("slider");
  });
  count.addEventListener("input", () => { if (isInt(count.value, ...d.bounds.dp)) { st.dp = +count.value; draw(); } });
  chips.forEach((c, i) => c.addEventListener("click", () => { st.params = presets[i].params; draw(); }));
  root.addEventListener("keydown", (e) => {
    const chip = chips[e.key - 1];
    if (e.target === count || e.ctrlKey || e.metaKey || e.altKey || !(chip || /^z$/i.test(e.key))) return;
    e.preventDefault();
    if (chip) chip.click();
    else { st.zero = (st.zero + 1) % d.stages.length; setZero(st.zero); draw(); }
  });
  copyLink($(root, ".wdg-copy"), $(root, ".wdg-status"), paint.url, root.id);
  $(root, ".wdg-controls").hidden = false;
  drawWhole("start");
};
