// Shared by the two teaching widgets (bytes per parameter, memory budget): small helpers and the painter that
// writes a state's texts into the figure.
const addUp = (list) => list.reduce((a, b) => a + b, 0);
// Attributes written only where they change (what this script last wrote to the element is kept beside it): a
// slider step moves a few bars, and every write of an SVG attribute costs its element's style and layout.
const attrsWritten = new WeakMap();
const setAttrs = (el, attrs) => {
  let had = attrsWritten.get(el);
  if (!had) attrsWritten.set(el, had = {});
  for (const k in attrs) {
    const v = String(attrs[k]);
    if (had[k] !== v) el.setAttribute(k, had[k] = v);
  }
};
const isInt = (v, lo, hi) => Number.isSafeInteger(+v) && +v >= lo && +v <= hi;

// builder.widgets.full_model.compare: the full model (02-model.js) for the catalog model nearest `params` that can take
// the run's sequence (the NEAREST rule), run with `base`'s settings and `changes`; `line(words)` is TEXTS['line'] for it.
// Kept, the last hundred of each: the catalog model nearest a count, and each model and run priced on this page (a
// slider passes the same counts and the same nearest model many times). compare.priced(params, changes): whether
// that run is priced already (a widget draws a first pricing a frame later).
function nearestModel(F, base) {
  const model = browserModel(F.model), nearest = compileRule(F.nearest), picks = keepLast(100), priced = keepLast(100);
  const keyOf = (params, changes) => {
    const tokens = changes.seq_len ?? base.seq_len;
    const pick = picks(params + "/" + tokens, () => nearest({ catalog: F.catalog, asked: params, tokens }));
    return [pick, JSON.stringify([pick.id, changes])];
  };
  const compare = (params, changes) => {
    const [pick, key] = keyOf(params, changes);
    const full = priced(key, () => model.estimate({ ...base, ...model.shapeOf(F.shapes[pick.id]), params: pick.parameters, ...changes }, false));
    const line = (words) => fillText(F.t.line, pick.name, commas(pick.parameters), words, fmtBytes(full.need),
      F.model.phases[full.phase], fmtBytes(full.total));
    return { pick, need: full.need, line };
  };
  compare.priced = (params, changes) => priced.has(keyOf(params, changes)[1]);
  return compare;
}

// Every [data-t] element gets texts[key] (summary, live region and table share keys); the URL
// follows the state 300 ms after the last change (browsers throttle history updates).
function painter(root, st) {
  // The elements, their keys and their texts, read once: the painter is the only writer of their texts.
  const els = $$(root, "[data-t]"), keys = els.map((e) => e.dataset.t), shown = els.map((e) => e.textContent), save = stateWriter(root.id);
  const paint = (T, quiet) => {
    for (let i = 0; i < els.length; i++) {
      const text = T[keys[i]];
      if (text !== undefined && shown[i] !== text) els[i].textContent = shown[i] = text;
    }
    if (!quiet) save(st);
  };
  paint.url = save.url;  // the link to what is on screen, for Copy link
  return paint;
}

// A teaching widget's redraw (`draw(...args)`, the whole figure) when its state asks for a model not priced yet
// (`ready()` false): at once only what is cheap (`cheap(...args)`: the controls' values), the summary and the live
// region aria-busy, and the whole figure a frame later (afterFrame: the next redraw cancels it), which clears
// aria-busy. A priced state is drawn whole at once (the first draw calls `draw` itself).
function drawWhenPriced(root, ready, cheap, draw) {
  const later = afterFrame(), summary = $$(root, "[data-t=sum]");
  const whole = (...args) => {
    later();
    draw(...args);
    for (const e of summary) e.removeAttribute("aria-busy");
  };
  return (...args) => {
    if (ready()) return whole(...args);
    cheap(...args);
    for (const e of summary) e.setAttribute("aria-busy", "true");
    later(() => whole(...args));
  };
}
