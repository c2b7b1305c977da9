// Memory budget allocator (seed 001), the same rules as builder/widgets/memory_budget.py (texts):
// teaching.budget_allocator's buckets in exact integer bytes, seed 001's words for the verdict.
WIDGETS["memory-budget"] = (root, d) => {
  const st = { ...d.start }, cap = d.capacity, paint = painter(root, st);
  const sliders = $$(root, "[type=range]"), rects = $$(root, ".tm-segment");
  function draw(quiet) {
    const { h, b, q } = st, pr = d.precisions.find((x) => x.id === q), s = 2 ** st.s, S = s < 1024 ? s : s / 1024 + "K";
    const w = ceilDiv(BigInt(h) * 500000000n * BigInt(pr.num), pr.den);
    const parts = [w, w, 2 * w, ceilDiv(BigInt(b * s * d.hidden * d.layers * pr.num), pr.den)];
    const tot = sum(parts), P = (h / 2).toFixed(1) + "B", Q = q.toUpperCase(), fits = tot <= cap;
    const T = { p: P, b, s: S, q: Q, tot: fmtBytes(tot), head: `${P} params · b=${b} · s=${S} · ${Q}` };
    T.verdict = fits ? fmtBytes(cap - tot) + " headroom" : "exceeds by " + fmtBytes(tot - cap);
    parts.forEach((v, i) => { T["k" + i] = fmtBytes(v); });
    T.sum = `Training memory budget. ${P} parameters, batch ${b}, sequence ${S}, ${Q}. Total ${T.tot} of ` +
      `${fmtBytes(cap)}: ${fits ? "fits" : "does not fit"}, ${T.verdict}.`;
    paint(T, quiet);
    // The capacity line stays at the right edge until the total passes it (seed 001).
    const scale = Math.max(cap, tot), pc = (v) => (100 * v / scale).toFixed(3) + "%", over = Math.min(cap, tot);
    let x = 0;
    (rects[1] ? parts : [tot]).forEach((v, i) => { setAttrs(rects[i], { x: pc(x), width: pc(v) }); x += v; });
    setAttrs($(root, ".wdg-over"), { x: pc(over), width: pc(tot - over) });
    setAttrs($(root, ".tm-capacity"), { x1: pc(cap), x2: pc(cap) });
    const end = 2 * cap > scale;
    setAttrs($(root, "text"), { x: pc(cap), dx: end ? -2 : 2, "text-anchor": end ? "end" : "start" });
    $(root, ".wdg-badge").hidden = fits;
    root.dataset.bytes = parts;
    const words = { h: `${P.slice(0, -1)} billion parameters`, b: `batch of ${b}`, s: `${s} tokens` };
    sliders.forEach((r) => { r.value = st[r.dataset.k]; r.setAttribute("aria-valuetext", words[r.dataset.k]); });
  }
  const setQ = radioGroup($(root, "[role=radiogroup]"), (v) => { st.q = v; draw(); });
  const saved = readState(root.id);
  sliders.forEach((r) => {
    const k = r.dataset.k;
    if (isInt(saved[k], +r.min, +r.max)) st[k] = +saved[k];
    r.addEventListener("input", () => { st[k] = +r.value; draw(); });
  });
  if (d.precisions.some((x) => x.id === saved.q)) setQ(st.q = saved.q);
  copyLink($(root, ".wdg-copy"), $(root, ".wdg-status"), paint.url);
  $(root, ".wdg-controls").hidden = false;
  draw(true);
};
