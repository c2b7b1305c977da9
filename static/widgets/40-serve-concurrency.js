// How many concurrent requests of N tokens fit under an inference engine's own start-up accounting. The numbers are
// the engines' rules (builder.model.engines, engine_sglang), sent by builder/widgets/serve_concurrency.py and
// evaluated by 02-model.js's engineModel; the texts are that module's templates, the controls' words each engine's
// own flags (d.controls). This script holds controls, texts and drawing only.
WIDGETS["serve-concurrency"] = (root, d) => {
  const T = d.t, model = engineModel(d.model, d.engines), fill = fillText;
  const st = { ...d.start }, paint = painter(root, st), fields = {}, field = (k) => (fields[k] ||= $(root, `[data-k=${k}]`));
  const words = () => d.controls[st.engine];
  const svg = $(root, ".wdg-svg"), legend = $(root, ".serve-parts");
  let shownParts = null;
  const make = (tag, attrs, text) => {
    const el = document.createElementNS(tag === "rect" ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml", tag);
    for (const k in attrs) el.setAttribute(k, attrs[k]);
    if (text !== undefined) el.textContent = text;
    return el;
  };
  // A run is the same object while its engine, model, TP degree and KV dtype stay (engineModel keeps what its stages
  // hold per run; its context is the engine's request length for the model, d.lengths); a state is evaluated once (the last hundred kept), as a reader going back to a length meets it.
  const runs = keepLast(100), shown = keepLast(100);
  const runOf = () => runs([st.engine, st.model, st.tp, st.kv_dtype].join(" "), () => ({ ...d.base, ...model.shapeOf(d.shapes[st.model]),
    params: d.parameters[st.model], param_dtype: d.weights[st.model], tp: +st.tp, kv_dtype: st.kv_dtype === "auto" ? "" : st.kv_dtype, context: d.lengths[st.engine][st.model] }));
  // serve_concurrency.evaluate: every text and the parts for the state on screen.
  function evaluate() {
    const w = words(), title = d.engines[st.engine].title, gpu = d.gpus[st.gpu], length = +st[w.length], share = st[w.share];
    const run = runOf();
    const settings = { ...gpu.engine[st.engine], [w.length_input]: length };
    if (share !== "") settings[w.share_input] = +share;
    const out = { answer: "", pool: "", requests: 0, parts: [], share: "" };
    try {
      const { value: v, parts } = model.report(run, st.engine, settings);
      if (!v("fits")) throw { msg: v("error") };
      const total = gpu.engine[st.engine].gpu_total, kv = parts.find((p) => p[0] === d.kvPart)[1];
      out.requests = v("concurrent_requests");
      out.answer = fill(T.answer, commas(length), commas(out.requests));
      out.share = String(v(w.share_value));
      out.pool = fill(T.pool, fmtBytes(kv, "GiB", 2), commas(v(w.tokens)), out.share);
      out.parts = parts.filter((p) => p[1] > 0).map(([name, bytes]) => ({ ...d.parts[name], bytes, amount: fmtBytes(bytes, "GiB", 2), width: fixedText(100 * bytes / total, 3) }));
    } catch (error) {
      if (!error || error.msg === undefined) throw error;
      out.answer = fill(T.refused, title, error.msg);
    }
    out.summary = fill(T.summary, d.names[st.model], title, gpu.name, st.tp, st.kv_dtype, out.answer);
    return out;
  }
  function draw(quiet) {
    const out = shown(JSON.stringify(st), evaluate), w = words();
    paint({ summary: out.summary, answer: out.answer, pool: out.pool, lengthflag: "--" + w.length.replace(/_/g, "-"), shareflag: "--" + w.share.replace(/_/g, "-") }, quiet);
    root.dataset.requests = out.requests;
    // The bar and its legend are made again only when the parts changed (a request length changes the answer, not
    // the pool).
    const drawn = out.parts.map((p) => [p.css, p.width, p.name, p.amount].join(" ")).join("\n");
    if (drawn !== shownParts) {
      shownParts = drawn;
      let x = 0;
      svg.replaceChildren(...out.parts.map((p) => { const r = make("rect", { class: "tm-segment " + p.css, x: fixedText(x, 3) + "%", y: d.bar.y, width: p.width + "%", height: d.bar.height }); x += +p.width; return r; }));
      legend.replaceChildren(...out.parts.map((p) => {
        const li = make("li", {});
        li.append(make("span", { class: "wdg-swatch " + p.css }), p.name + " ", make("strong", {}, p.amount));
        return li;
      }));
    }
    for (const [k, v] of [["length", st[w.length]], ["share", st[w.share]]]) if (document.activeElement !== field(k)) field(k).value = v;
    field("share").max = w.share_max;
    field("share").placeholder = out.share;
  }
  // The state from a link: what checkLink takes (the controls' own choices, each engine's bounds); a length or share
  // in the other engine's words is refused too. Every refused setting is named in the notice.
  const { taken: saved, refused } = checkLink(readState(root.id), d.link.keys);
  if (saved.engine) {
    const from = words(), to = d.controls[saved.engine];
    st[to.length] = st[from.length];
    delete st[from.length], delete st[from.share];
    st.engine = saved.engine;
    st[to.share] = "";
  }
  for (const k of ["model", "gpu", "tp", "kv_dtype"]) if (k in saved) st[k] = saved[k];
  for (const [engine, w] of Object.entries(d.controls)) {
    for (const k of [w.length, w.share]) {
      if (!(k in saved)) continue;
      if (engine === st.engine) st[k] = k === w.length ? String(+saved[k]) : saved[k];
      else if (saved[k] !== "") refused.push([k, saved[k], "other_engine"]);
    }
  }
  linkNotice(root, d.link.words, refused);
  // The selects' other options (serve_concurrency.context's choices): engines, models and GPUs named as the data names them.
  const names = { engine: (v) => d.engines[v]?.title, model: (v) => d.names[v], gpu: (v) => d.gpus[v]?.name };
  for (const k of ["engine", "model", "gpu", "tp", "kv_dtype"]) {
    fillChoices(field(k), d.link.keys[k].slice(1), names[k]);
    field(k).value = st[k];
    field(k).addEventListener("change", () => {
      const value = field(k).value;
      if (k === "engine") {
        const from = words(), to = d.controls[value];
        const length = st[from.length];
        delete st[from.length], delete st[from.share];
        Object.assign(st, { engine: value, [to.length]: length, [to.share]: "" });
      } else st[k] = value;
      draw();
    });
  }
  // A number is applied when valid; otherwise the field says so and the figure keeps the last valid state.
  // Valid is what a link may hold for that key (checkLink, the link's own bounds: one check for both).
  const number = (k, key) => field(k).addEventListener("input", () => {
    const text = field(k).value.trim(), valid = !checkLink({ [key()]: text }, d.link.keys).refused.length;
    field(k).setAttribute("aria-invalid", String(!valid));
    if (!valid) return;
    st[key()] = text === "" ? "" : String(k === "length" ? +text : text);
    draw();
  });
  number("length", () => words().length);
  number("share", () => words().share);
  copyLink($(root, ".wdg-copy"), $(root, ".wdg-status"), paint.url, root.id);
  $(root, ".wdg-controls").hidden = false;
  draw(true);
};
