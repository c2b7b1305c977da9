// Memory budget allocator (seed 001), the same rules as builder/widgets/memory_budget.py (texts):
// teaching.budget_allocator's buckets in exact integer bytes, seed 001's words for the verdict.
WIDGETS["memory-budget"] = (root, d) => {
  const st = { ...d.start }, id = root.id, cap = d.capacity, write = paint(root);
  const sliders = $$(root, "[type=range]"), rects = $$(root, ".tm-segment");
  let timer;
  function draw(from) {
    const pr = d.precisions.find((q) => q.id === st.q), s = 2 ** st.s, S = s >= 1024 ? s / 1024 + "K" : String(s);
    const w = ceilDiv(BigInt(st.h) * 500000000n * BigInt(pr.num), pr.den);
    const parts = [w, w, 2 * w, ceilDiv(BigInt(st.b * s * d.hidden * d.layers * pr.num), pr.den)];
    const tot = sum(parts), P = (st.h / 2).toFixed(1) + "B", Q = st.q.toUpperCase(), fits = tot <= cap;
    const T = { p: P, b: String(st.b), s: S, q: Q, tot: fmtBytes(tot), head: `${P} params · b=${st.b} · s=${S} · ${Q}` };
    T.verdict = fits ? fmtBytes(cap - tot) + " headroom" : "exceeds by " + fmtBytes(tot - cap);
    parts.forEach((v, i) => { T["k" + i] = fmtBytes(v); });
    T.sum = `Training memory budget. ${P} parameters, batch ${st.b}, sequence ${S}, ${Q}. Total ${T.tot} of ` +
      `${fmtBytes(cap)}: ${fits ? "fits" : "does not fit"}, ${T.verdict}.`;
    write(T);
    // The capacity line stays at the right edge until the total passes it (seed 001).
    const scale = Math.max(cap, tot), pc = (v) => (100 * v / scale).toFixed(3) + "%";
    let x = 0;
    (rects.length > 1 ? parts : [tot]).forEach((v, i) => { setAttrs(rects[i], { x: pc(x), width: pc(v) }); x += v; });
    setAttrs($(root, ".wdg-over"), { x: pc(Math.min(cap, tot)), width: pc(tot - Math.min(cap, tot)) });
    $$(root, ".tm-capacity, text").forEach((e) => setAttrs(e, e.x1 ? { x1: pc(cap), x2: pc(cap) } : { x: pc(cap) }));
    $(root, ".wdg-badge").hidden = fits;
    root.dataset.bytes = parts;
    sliders.forEach((r) => {
      r.value = st[r.dataset.k];
      r.setAttribute("aria-valuetext", { h: `${P.slice(0, -1)} billion parameters`, b: `batch of ${st.b}`, s: `${s} tokens` }[r.dataset.k]);
    });
    clearTimeout(timer);
    if (from !== "start") timer = setTimeout(() => writeState(id, st), 300);
  }
  const setQ = radioGroup($(root, "[role=radiogroup]"), (v) => { st.q = v; draw(); });
  const saved = readState(id);
  sliders.forEach((r) => {
    const v = +saved[r.dataset.k];
    if (Number.isInteger(v) && v >= +r.min && v <= +r.max) st[r.dataset.k] = v;
    r.addEventListener("input", () => { st[r.dataset.k] = +r.value; draw(); });
  });
  if (d.precisions.some((q) => q.id === saved.q)) setQ(st.q = saved.q);
  copyLink($(root, ".wdg-copy"), $(root, ".wdg-status"));
  $(root, ".wdg-controls").hidden = false;
  draw("start");
};
