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

// builder.widgets.full_model.compare: the full model (02-model.js) for the catalog model nearest `params` (the NEAREST
// rule), run with `base`'s settings and `changes`; `line(words)` is TEXTS['line'] for it.
// A model and run already priced on this page are not priced again (a slider passes the same nearest model many times).
function nearestModel(F, base) {
  const model = browserModel(F.model), nearest = compileRule(F.nearest), priced = new Map();
  return (params, changes) => {
    const pick = nearest({ catalog: F.catalog, asked: params }), key = JSON.stringify([pick.id, changes]);
    if (!priced.has(key)) priced.set(key, model.estimate({ ...base, ...model.shapeOf(F.shapes[pick.id]), params: pick.parameters, ...changes }, false));
    const full = priced.get(key);
    const line = (words) => fillText(F.t.line, pick.name, commas(pick.parameters), words, fmtBytes(full.need),
      F.model.phases[full.phase], fmtBytes(full.total));
    return { pick, need: full.need, line };
  };
}

// Every [data-t] element gets texts[key] (summary, live region and table share keys); the URL
// follows the state 300 ms after the last change (browsers throttle history updates).
function painter(root, st) {
  // The elements, their keys and their texts, read once: the painter is the only writer of their texts.
  const els = $$(root, "[data-t]"), keys = els.map((e) => e.dataset.t), shown = els.map((e) => e.textContent), save = stateWriter(root.id);
  const paint = (T, quiet) => {
    for (let i = 0; i < els.length; i++) {
      const text = T[keys[i]];
      if (shown[i] !== text) els[i].textContent = shown[i] = text;
    }
    if (!quiet) save(st);
  };
  paint.url = save.url;  // the link to what is on screen, for Copy link
  return paint;
}
