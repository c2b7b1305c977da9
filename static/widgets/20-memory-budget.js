// Memory budget allocator (seed 001). The four buckets are builder.model.teaching.BUDGET's rules, the full
// model's need is 02-model.js for the catalog model nearest in size (builder.widgets.full_model's NEAREST rule),
// and every text is a template from builder/widgets/memory_budget.py: this script holds controls and drawing.
WIDGETS["memory-budget"] = (root, d) => {
  const st = { ...d.start }, K = d.keys, cap = d.capacity, T = d.t, F = d.full, paint = painter(root, st), fill = fillText;
  const sliders = $$(root, "[type=range]"), keys = sliders.map((r) => r.dataset.k), rects = $$(root, ".tm-segment"), texts = $$(root, "text");
  const [over, peak, badge] = [".wdg-over", ".wdg-peak", ".wdg-badge"].map((k) => $(root, k)), capacity = $$(root, ".tm-capacity, .wdg-halo");
  const buckets = ruleSet(d.rules), compare = nearestModel(F, d.base);
  const verdict = (need) => (need <= cap ? fill(F.t.fits, d.capacityText, fmtBytes(cap - need)) : fill(F.t.exceeds, d.capacityText, fmtBytes(need - cap)));
  // The controls' values (the model size, batch, sequence and precision as the figure names them), and the run the
  // full model prices: the nearest catalog model, run with the precision's policy at this batch and sequence.
  const values = () => {
    const h = st[K.size], b = st[K.batch], q = st[K.precision], s = 2 ** st[K.seq], P = (h / 2).toFixed(1) + "B";
    const S = s < 1024 ? s : s / 1024 + "K", Q = q.toUpperCase();
    return { h, b, q, s, P, S, Q, head: fill(T.head, P, b, S, Q), params: h * d.unit, run: { micro_batch: b, seq_len: s, ...d.policies[q] } };
  };
  // The controls' own state: each slider's position and words.
  const controls = ({ b, s, P }) => {
    const words = { [K.size]: fill(T.valuetext_h, P.slice(0, -1)), [K.batch]: fill(T.valuetext_b, b), [K.seq]: fill(T.valuetext_s, s) };
    sliders.forEach((r, i) => { r.value = st[keys[i]]; setAttrs(r, { "aria-valuetext": words[keys[i]] }); });
  };
  function drawWhole(quiet) {
    const v = values(), { b, q, s, S, P, Q, params } = v;
    const parts = buckets({ params, micro_batch: b, seq_len: s, precision: q, hidden: d.hidden, layers: d.layers, dtype_bytes: F.model.dtypes }, false).map((p) => p[1]);
    const tot = addUp(parts);
    const { pick, need, line } = compare(params, v.run), fits = need <= cap;
    const T2 = { p: P, b, s: S, q: Q, tot: fmtBytes(tot), head: v.head, need: fmtBytes(need), mname: pick.name };
    T2.verdict = tot <= cap ? fill(T.headroom, fmtBytes(cap - tot)) : fill(T.over, fmtBytes(tot - cap));
    T2.mverdict = verdict(need);
    T2.model = line(fill(T.run, T.words[q], b, commas(s)));
    parts.forEach((v, i) => { T2["k" + i] = fmtBytes(v); });
    T2.sum = fill(T.summary, P, b, S, Q, T2.tot, fmtBytes(cap), T2.verdict, pick.name, T2.need, T2.mverdict);
    paint(T2, quiet);
    // memory_budget.bar: one scale for the buckets, the capacity and the need; hatching from the capacity to the
    // need when the need does not fit. The capacity line stays at the right edge until a bar passes it (seed 001).
    const scale = Math.max(cap, tot, need), pc = (v) => (100 * v / scale).toFixed(3) + "%", end = Math.max(tot, need);
    let x = 0;
    (rects[1] ? parts : [tot]).forEach((v, i) => { setAttrs(rects[i], { x: pc(x), width: pc(v) }); x += v; });
    setAttrs(over, { x: pc(cap), width: pc(need > cap ? end - cap : 0) });
    for (const line of capacity) setAttrs(line, { x1: pc(cap), x2: pc(cap) });
    setAttrs(peak, { x1: pc(need), x2: pc(need) });
    [cap, need].forEach((v, i) => { const right = 2 * v > scale; setAttrs(texts[i], { x: pc(v), dx: right ? -2 : 2, "text-anchor": right ? "end" : "start" }); });
    badge.hidden = fits;
    setAttrs(root, { "data-bytes": parts, "data-need": need });
    controls(v);
  }
  // A move to a model or run not priced yet: the controls' values at once, the figure a frame later.
  const draw = drawWhenPriced(root, () => { const { params, run } = values(); return compare.priced(params, run); }, () => {
    const v = values();
    paint({ p: v.P, b: v.b, s: v.S, head: v.head }, true);
    controls(v);
  }, drawWhole);
  const setQ = radioGroup($(root, "[role=radiogroup]"), (v) => { st[K.precision] = v; draw(); });
  const { taken, refused } = checkLink(readState(root.id), d.link.keys);
  sliders.forEach((r) => {
    const k = r.dataset.k;
    if (k in taken) st[k] = +taken[k];
    r.addEventListener("input", () => { st[k] = +r.value; draw(); });
  });
  if (taken[K.precision]) setQ(st[K.precision] = taken[K.precision]);
  linkNotice(root, d.link.words, refused);
  copyLink($(root, ".wdg-copy"), $(root, ".wdg-status"), paint.url, root.id);
  $(root, ".wdg-controls").hidden = false;
  drawWhole(true);
};
