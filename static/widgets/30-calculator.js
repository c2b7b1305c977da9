// The calculator: every knob of the memory model in one form. The model itself (its estimate, checks and the
// searches for the largest batch and sequence) is 02-model.js, evaluating the rules Python emits; the architectures,
// precision policies, GPUs and every word (texts, the figure's markup templates) come as data from
// builder/widgets/calculator.py and the partial, and the form state becomes the run's inputs by the rules of
// builder/widgets/calculator_state.py (D.form). What is here: the controls, the texts and the figure.
// tests/browser/test_widget_calculator.py compares its bytes and words with Python's.
{
const max = Math.max, min = Math.min, fill = fillText;

WIDGETS.calculator = (root, D) => {
  // An output element by its data-out name, found once while it stays in the page (the figure's own ones are
  // replaced when it is redrawn).
  const outs = {}, out = (k) => { const e = outs[k]; return e && e.isConnected ? e : (outs[k] = $(root, `[data-out=${k}]`)); };
  const form = $(root, "form"), T = D.t;
  // The figure's markup: the partial's templates, drawn in place (07-live-templates.js); put(k, ...v) is a view.
  const live = liveTemplates(D.tpl), put = live.view;
  // Each control as the form's markup describes it, read once (calculator.control_table; D.controls adds a select's
  // values, a plain value that is not the default and a custom field's inputs): its type by its input
  // (calculator.CONTROL_TYPES), its default by its served value, what a link may give it (calculator.link_keys), the
  // mode it counts in by the part of the form that shows it, when that is a Run choice (calculator.MODE_ONLY), with
  // its plain value in the other, and the custom architecture's fields with the inputs each sets and whether its
  // value is a name (else a whole number).
  const types = {}, defaults = {}, keys = {}, modeOnly = {}, plain = {}, arch = {}, modes = [...form.elements.mode].map((e) => e.value);
  for (const e of form.elements) {
    const k = e.name, row = D.controls[k] || {}, show = e.closest("[data-show]")?.dataset.show, whole = e.step == "1";
    if (!k) continue;
    if (e.type == "radio") {
      (keys[k] ||= ["choice"]).push(e.value);
      if (e.defaultChecked) defaults[k] = e.value;
    } else if (e.type == "checkbox") [keys[k], defaults[k]] = [["choice", "0", "1"], e.defaultChecked ? "1" : "0"];
    else if (e.type == "number") [keys[k], defaults[k]] = [whole ? ["whole", +e.min, +e.max] : ["fraction", e.min, e.max], e.defaultValue];
    else [keys[k], defaults[k]] = [["choice", ...row.values], [...e.options].find((o) => o.defaultSelected).value];
    types[k] = e.type == "number" ? (whole ? "count" : "number") : e.type == "checkbox" ? "box" : "choice";
    if (modes.includes(show)) modeOnly[k] = show;
    if (show == "custom") arch[k] = [row.inputs || [k], +(e.type != "number" && e.type != "checkbox")];
  }
  for (const k in modeOnly) plain[k] = D.controls[k]?.plain ?? defaults[k];
  const sum = (ps) => ps.reduce((s, p) => s + p[1], 0);
  // The catalog models' shape inputs (calculator.script_data), each with the inputs it has at the custom
  // architecture's values (D.custom) put back: one object per model, kept.
  const models = Object.fromEntries(Object.entries(D.models).map(([key, A]) => [key, { ...D.custom, ...A }]));

  // The full model (02-model.js): its estimate, checks and searches, from the rules in D.model; compiled in steps
  // after the page is painted (render), or at once where a state needs it first.
  const model = madeInSteps(browserModelSteps(D.model)), shapeOf = (A) => model().shapeOf(A);

  // The state the model reads (calculator.effective_state): a control of the other mode counts at its plain value.
  const effective = (st) => Object.fromEntries(Object.entries(st).map(([k, v]) => [k, (modeOnly[k] || st.mode) == st.mode ? v : plain[k]]));
  // A control's text as its value, by its type (types; calculator_state.typed): a whole number, a number, a box
  // or a choice.
  const typed = (kind, text) => (kind == "count" ? (/^-?\d+$/.test(text) ? +text : 0) : kind == "number" ? +text || 0 : kind == "box" ? +(text == "1") : text);
  // The form state -> the run's inputs (calculator.config_from_state): the controls' values, then the rules that
  // Python's config_from_state evaluates too (D.form.rules: the options the form sets, then what the model reads).
  const formRules = D.form.rules.map(ruleScope);
  const cfg = (form) => {
    const st = effective(form);
    let A = models[st.model];
    if (!A) {
      // The custom architecture the controls describe (calculator.custom_arch), checked as Architecture does.
      A = { ...D.custom };
      for (const [k, [names, text]] of Object.entries(arch)) for (const name of names) A[name] = text ? st[k] : typed("count", st[k]);
      model().refuse(model().shapeChecks, A);
    }
    const env = { [D.form.policies]: D.policies, ...shapeOf(A) };
    for (const [k, kind] of Object.entries(types)) env[D.form.prefix + k] = typed(kind, st[k]);
    const all = formRules.reduce((e, rules) => rules(e), env), run = {};
    for (const k of D.form.inputs) run[k] = look(all, k);
    return { A, train: st.mode == "train", gpus: look(all, D.form.gpus), run };
  };
  // builder.model.inputs.run_inputs: the names every rule set reads, for the form's config.
  const runInputs = (c) => ({ ...D.fixedInputs, ...shapeOf(c.A), ...c.run });
  const estimate = (c, words) => model().estimate(runInputs(c), words);
  // A run's need, kept by its architecture and inputs (the last thousand): the answers' searches and the fixes probe
  // many runs, and the same ones again when a reader comes back to a state or moves one control (the largest batch
  // does not change with the batch; a fix that lowers the batch probes what that search probed).
  const needs = keepLast(1000), fractions = (k, v) => (v instanceof Ratio ? v.n + "/" + v.d : v);
  const needAt = (c) => needs(JSON.stringify([c.A, c.run], fractions), () => estimate(c, false).need);

  // Texts and figure, as calculator.results and the partial's macros make them.
  const verdict = (total, g, U) => fill(T.verdict, g[1], fmtBytes(g[2], U), fill(T[total <= g[2] ? "fits" : "exceeds"], fmtBytes(Math.abs(g[2] - total), U)));
  // calculator.both_units: the chosen unit, the other beside it.
  const both = (n, U) => fill(T.total, fmtBytes(n, U), fmtBytes(n, D.otherUnit[U]));
  // calculator.arch_text and shards_text: the architecture as the model counts it (builder.model.tensors' shape
  // rules) and the GPUs each model state is split over (builder.model.states.SHARDING, sent as D.sharding).
  const shardsOf = ruleScope(D.sharding);
  const archText = (A) => {
    const s = shapeOf(A);
    return fill(T.arch, commas(s.parameters), s.active_parameters != s.parameters ? fill(T.active, commas(s.active_parameters)) : "",
      A.layers, A.hidden, A.heads, A.kv_heads || A.heads);
  };
  const shardsText = (run) => {
    const s = shardsOf(run), e = (k) => look(s, k), r = [e("param_ranks"), e("grad_ranks"), e("optimizer_ranks")];
    const text = fill(T.shards, e("shard_label"), ...r, r[0] > 1 ? "s" : "");
    if (!e("experts")) return text;
    const x = [e("expert_param_ranks"), e("expert_grad_ranks"), e("expert_optimizer_ranks")].map((k) => e("ep") * k), g = e("expert_shard_group");
    return text + fill(T.shards_experts, ...x, g, e("ep"), x[0] > 1 ? "s" : "", g > 1 ? "s" : "");
  };
  const css = (name) => name.split("/")[0].replace("_", "-");
  // calculator.tag_layout and bucket_runs: direct labels in rows under the bar, laid out for each page layout (D.tags).
  const tagLayout = (groups, scale, width) => {
    const gap = 100 * D.tags.gap_px / width, clear = 100 * D.tags.clear_px / width, inset = 100 * D.tags.inset_px / width, wide = (text) => 100 * text.length * D.tags.char_px / width, placed = [];
    const free = (left, w, mid, row) => placed.every(([leader, x, r, text]) => {
      const right = x + wide(text);
      return !(r == row && !(right + gap <= left || left + w + gap <= x)) && !(r < row && x - clear <= mid && mid <= right + clear)
        && !(r > row && left - clear <= leader && leader <= left + w + clear);
    });
    const middles = groups.filter((g) => g[2] > 0).map(([text, start, size]) => [100 * start / scale + min(100 * size / 2 / scale, inset), text]);
    for (const [mid, text] of middles.sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : 0))) {
      const w = wide(text), left = min(mid, 100 - w);
      let row = 0;
      while (row < D.tags.rows && !free(left, w, mid, row)) row++;
      if (row < D.tags.rows && !placed.some(([, , , placedText]) => placedText == text)) placed.push([mid, left, row, text]);
    }
    return placed;
  };
  const bucketRuns = (parts) => {
    const runs = [];
    let at = 0;
    for (const [name, n] of parts) {
      const b = name.split("/")[0], last = runs[runs.length - 1];
      if (last && last[0] == b) last[2] += n;
      else runs.push([b, at, n]);
      at += n;
    }
    return runs;
  };
  // calculator.chart_geometry: the parts stacked, the need marked where it differs, overflow from the chosen GPU's capacity.
  const chart = (parts, total, need, gpu, U) => {
    const C = D.chart, lines = D.gpus.filter((g) => D.shown.includes(g[0]) || g == gpu), end = max(total, need), scale = max(end, ...lines.map((g) => g[2])) * C.margin;
    const pc = (x) => (100 * x / scale).toFixed(2) + "%", y = C.line_step * lines.length + C.bar_gap, side = (x) => (x / scale > C.end_at ? ["end", -C.dx] : ["start", C.dx]);
    const shade = {}, runs = bucketRuns(parts).map(([b, at, n]) => [D.names[b], at, n]);
    let x = 0, depth = 0;
    const tags = [];
    for (const [layout, width] of D.tags.layouts) {
      for (const [mid, left, row, text] of tagLayout(runs, scale, width)) {
        const ty = y + C.tag_drop + D.tags.row_px * row;
        depth = max(depth, row + 1);
        tags.push(put("tag", layout, mid.toFixed(2) + "%", y + C.tag_top, ty - C.tag_rise, left.toFixed(2) + "%", ty, text));
      }
    }
    const below = D.tags.row_px * depth, row = (i) => C.line_text + C.line_step * i;
    return put("svg", y + C.height_extra + below, [...lines.map(([, , size, short], i) => put("capacity", pc(size), row(i) - C.line_rise, y + C.line_drop, row(i), ...side(size), short + ": " + fmtBytes(size, U))),
      ...parts.map(([name, n]) => {
        const b = css(name);
        shade[b] = (shade[b] ?? -1) + 1;
        x += n;
        return put("segment", b, shade[b] % C.shades, pc(x - n), y, pc(n), D.names[name] + ": " + fmtBytes(n, U));
      }), ...(need > gpu[2] ? [put("overflow", pc(gpu[2]), y, pc(end - gpu[2]))] : []), ...(need != total ? [put("peak", pc(need), y - C.peak_rise, y + C.line_drop)] : []),
      ...tags, put("label", pc(need), y + C.label_drop + below, ...side(need), need == total ? fmtBytes(total, U) : fill(T.bar_label, fmtBytes(need, U)))]);
  };
  // calculator.fixes: the nearest changes that make a run fit (D.fixes.candidates, defined once in Python, tried by
  // its program, builder.widgets.calculator_fixes, run here by 02-model.js's searchRunner), each as its text and the
  // state it leads to. A form state's need, or null when the model refuses the run.
  const needOf = (st) => {
    try {
      return needAt(cfg(st));
    } catch (e) {
      if (!e.msg) throw e;
      return null;
    }
  };
  // calculator.trial_state: a candidate's settings, then its key (if it has one) at the value.
  const trialState = (st, fix, value) => {
    const trial = { ...st };
    for (const { control, value: v } of fix.settings) trial[control] = v;
    if (fix.key) trial[fix.key] = String(value);
    return trial;
  };
  const suggest = searchRunner(D.fixes.program);
  // A generator (a probe a step, for afterFrame's slices) whose value is the fixes.
  function* fixes(st, capacity) {
    const candidates = D.fixes.candidates[st.mode], form = {};
    // calculator_state.typed_values: each control's value, by its type.
    for (const [k, kind] of Object.entries(types)) if (k in st) form[k] = typed(kind, st[k]);
    const measure = ({ entry, value }) => needOf(trialState(st, candidates[entry], value)) ?? D.fixes.refused;
    const found = yield* suggest.steps(measure, { candidates, form, capacity });
    return found.map(({ entry, value }) => {
      const fix = candidates[entry], to = trialState(st, fix, value);
      return [fill(fix.text, fix.key ? commas(value) : "", cfg(to).gpus), to];
    });
  }
  // The answers that take many estimates (the largest batch and sequence, the suggested fixes), written into the
  // figure: they are worked out after the next frame is painted, a probe at a time in tasks short enough for the
  // page to stay responsive (afterFrame), cancelled by the next input; meanwhile the figure keeps the previous
  // answers and the summary and figure are aria-busy, and the live region announces the summary once the answers
  // are final. They are kept with the state's figure (figureOf): a state shown before is drawn whole at once.
  let shownFixes = [], fixesShown = "";
  const later = afterFrame();
  // The answers' texts (max_batch, max_seq), the fixes and their view, worked out once per figure: the largest batch
  // and sequence (D.searches: the input searched, its limit, the input its step is and the shape input that caps the
  // limit, a learned position table's rows) and the suggested fixes. A generator (a probe a step) whose value is the
  // answers.
  function* answersOf(st, { c, gpu, ok }) {
    const sizes = [];
    for (const [k, limit, step, cap] of D.searches[st.mode]) {
      const by = step ? c.run[step] : 1, most = cap && c.A[cap] ? Math.min(limit, c.A[cap]) : limit;
      sizes.push(yield* model().largest.steps((n) => needAt({ ...c, run: { ...c.run, [k]: n } }), gpu[2], by, most - (most % by), by));
    }
    const answers = T[st.mode + "_answers"], found = ok ? [] : yield* fixes(st, gpu[2]);
    return [fill(answers[0], gpu[1], sizes[0] ? commas(sizes[0]) : T.none[0]), fill(answers[1], gpu[1], sizes[1] ? fill(T.tokens, commas(sizes[1])) : T.none[1]), found,
      ok ? "" : found.length ? put("fixes", fill(T.fixes, gpu[1]), found.map(([text, to]) => put("fix", href(to), text))) : put("nofix", fill(T.fixes_none, gpu[1]))];
  }
  // The texts on screen of the outputs this script alone writes (error, summary, live; the answers max_batch and
  // max_seq, in the figure, kept there while the next ones are worked out), as written, read from the page at first
  // ('' for none).
  const texts = {}, onScreen = (k) => {
    if (!(k in texts)) texts[k] = out(k)?.textContent ?? "";
    return texts[k];
  };
  // A form state's figure but its answers: its run (c), the GPU chosen, whether the run fits there, the summary and
  // the views of the figure (the result template's values up to its answers), and its readouts.
  const figure = (st) => {
    const gpu = D.gpus.find((g) => g[0] == st.gpu), U = st.unit;
    const c = cfg(st), inputs = runInputs(c), { parts, host, need, phase } = model().estimate(inputs, true), total = sum(parts), { A, train } = c, ok = need <= gpu[2];
    const items = D.layout.filter((k) => c.run[k] > 1).map((k) => k + " " + c.run[k]), gpus = c.gpus;
    if (train && st[D.shardKey] != "0") items.push(control(D.shardKey).selectedOptions[0].text);
    const [opt, r, ql, b, s, rc] = D.runText[st.mode].map((k) => c.run[k]);
    const run = train ? fill(T.train, st.precision, opt, r ? fill(T.lora, r, ql ? T.qlora : "") : "", b, commas(s), T.recompute[rc]) : fill(T.serve, c.run.param_dtype, b, commas(s));
    const basis = train ? fill(T.basis_train, D.model.phases[phase]) : T.basis_serve;
    const text = fill(T.summary, nameOf(st), commas(shapeOf(A).parameters), run, `${gpus} GPU${gpus > 1 ? "s" : ""}${items.length ? ` (${items.join(", ")})` : ""}`, fmtBytes(need, U), fmtBytes(need, D.otherUnit[U]), basis, fmtBytes(total, U), verdict(need, gpu, U));
    const views = [chart(parts, total, need, gpu, U), ok, ok ? "" : put("badge"), verdict(need, gpu, U), need, both(need, U), basis,
      total, both(total, U), host ? put("host", fill(T.host, fmtBytes(host, U))) : "",
      parts.map(([name, n, rule, source]) => put("row", name, n, css(name), fmtBytes(n, U), rule, source, D.names[name])),
      D.gpus.map((g) => put("fit", g[0], need <= g[2], need <= g[2] ? "✓" : "✗", verdict(need, g, U)))];
    return { c, gpu, ok, text, views, readouts: [U, archText(A), shardsText(inputs)] };
  };
  // The last hundred figures, by form state (a state the model refuses as its message, {error}): the answers'
  // searches and fixes price many runs, which push a shown run out of the rule sets' memos, and a reader comes back
  // to the states just shown (a slider moved back and forth).
  const figures = keepLast(100), figureOf = (st, key) => figures(key, () => {
    try {
      return figure(st);
    } catch (e) {
      if (!e.msg) throw e;
      return { error: e.msg };
    }
  });
  const nameOf = (st) => (st.model == "custom" ? T.custom : models[st.model].n);
  // An output's text, written when it changes; the summary and the figure marked aria-busy or not.
  const write = (k, text) => { if (onScreen(k) !== text) out(k).textContent = texts[k] = text; };
  const busy = (on) => {
    for (const k of ["summary", "result"]) if (on) out(k).setAttribute("aria-busy", "true"); else out(k).removeAttribute("aria-busy");
  };
  // A figure on screen with its answers, once they are in, else the answers shown so far (no fixes for a run that
  // fits); or the model's message. Its summary (the live region's text once it is final).
  const show = (st, made) => {
    const { error = "" } = made, result = out("result"), text = error ? fill(T.invalid, nameOf(st), error) : made.text;
    if (made.answers) [texts.max_batch, texts.max_seq, shownFixes, fixesShown] = made.answers;
    else if (made.ok) fixesShown = "";
    if (!error) live.draw(result, put("result", ...made.views, onScreen("max_batch"), onScreen("max_seq"), fixesShown, ...made.readouts));
    if (result.hidden != !!error) result.hidden = !!error;
    if (out("error").hidden != !error) out("error").hidden = !error;
    write("error", error);
    write("summary", text);
    return text;
  };
  const settle = (st, made) => {
    write("live", show(st, made));
    busy(false);
  };
  // What a state not yet shown whole needs, a step at a time (afterFrame): the model compiled (the first time), the
  // state's figure (one estimate), drawn with the answers on screen, then its answers (a probe a step; a search the
  // model refuses shows its message as the estimate's would), then all of it.
  function* land(st, key) {
    yield* model.steps();
    const made = figureOf(st, key);
    if (!made.error && !made.answers) {
      yield;
      show(st, made);
      yield;
      try {
        made.answers = yield* answersOf(st, made);
      } catch (e) {
        if (!e.msg) throw e;
        made.error = e.msg;
      }
    }
    settle(st, made);
  }
  // A form state on screen: a state shown whole before at once; else the figure (when kept) at once, and the rest
  // later, aria-busy until it is in. At load (`first`), the state the server rendered is left as it is, and only the
  // model is compiled, after the page is painted.
  const render = (st, first) => {
    const key = JSON.stringify(st), made = figures.has(key) && figureOf(st, key);
    if (first && !Object.keys(linked(st)).length) return later(model.steps);
    later();  // what is still waiting is for an earlier state
    if (made && (made.error || made.answers)) return settle(st, made);
    if (made) show(st, made);
    busy(true);
    later(() => land(st, key));
  };

  // The form: read, keep the URL in step, redraw (CSS shows what applies). Run and Recompute are native radio buttons.
  // The form's named controls, found once (the form keeps its controls), with their types.
  const controls = [...form.elements].filter((e) => e.name).map((e) => [e, e.name, e.type]), named = {};
  const control = (k) => (named[k] ||= form.elements[k]);
  const valueOf = (e) => (e.type == "checkbox" ? (e.checked ? "1" : "0") : e.value);
  const read = () => {
    const st = {};
    for (const [e, name, type] of controls) if (type != "radio" || e.checked) st[name] = valueOf(e);
    return st;
  };
  // calculator.link_state: what a link carries (the values that differ from the defaults; the custom architecture's
  // fields only for a custom model, by key in sorted order), and a suggestion's link (00-core.js readState reads it).
  const linked = (st) => Object.fromEntries(Object.entries(st).sort(([a], [b]) => (a < b ? -1 : a > b)).filter(([k, v]) => v != defaults[k] && (st.model == "custom" || !(k in arch))));
  const href = (st) => "?" + new URLSearchParams(Object.entries(linked(st)).map(([k, v]) => [root.id + "." + k, v]));
  const save = stateWriter(root.id, linked);
  const set = (k, v) => {
    const e = control(k);
    if (e.type == "checkbox") e.checked = v == "1"; else if (e.value !== v) e.value = v;
  };
  let state = null;  // the form state last read
  const update = (event, first = false) => {
    // Picking a catalog model fills the custom fields with its shape (calculator.arch_state: each field's first
    // input, or the model's own form where that differs, calculator.arch_fields): a custom model starts from it.
    const A = event && event.target.name == "model" && models[event.target.value];
    if (A) for (const [k, [names]] of Object.entries(arch)) set(k, A.form?.[k] ?? String(A[names[0]]));
    // A named starting point (calculator.STARTS) sets the form; changing any other setting leaves it.
    const start = event && event.target.name == "start" && D.starts[event.target.value];
    if (start) {
      for (const [k, v] of Object.entries({ ...defaults, ...start })) if (k != "gpu") set(k, v);
    } else if (event && event.target.name && event.target.name != "start") set("start", "");
    // The form read whole, but after a change of one control alone (a slider step): the last state with its value.
    const one = !A && !start && state && event?.target.name;
    const st = state = one ? { ...state, start: control("start").value, [one]: valueOf(event.target) } : read();
    save(st);
    render(st, first);
  };
  // The selects' other options (calculator.page_choices): a catalog model or GPU named as the data names it.
  const names = { model: (v) => models[v]?.n, gpu: (v) => D.gpus.find((g) => g[0] == v)?.[1] };
  for (const select of $$(form, "select")) fillChoices(select, keys[select.name].slice(1), names[select.name]);
  const { taken, refused } = checkLink(readState(root.id), keys);
  for (const [k, v] of Object.entries(taken)) set(k, v);
  linkNotice(root, D.link.words, refused);
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  form.addEventListener("submit", (event) => event.preventDefault());
  // A suggestion applies its change here (its link still opens it in a new tab or without this script).
  out("result").addEventListener("click", (event) => {
    const link = event.target.closest("[data-fix]");
    const fix = link && shownFixes[$$(out("result"), "[data-fix]").indexOf(link)];
    if (!fix) return;  // a suggestion the server wrote, before the script has worked it out: its link opens it
    event.preventDefault();
    const to = fix[1];
    for (const [k, v] of Object.entries(to)) set(k, v);
    update();
    $(root, ".calc-verdict").focus();
  });
  $(root, "fieldset").disabled = false;
  $(root, "[data-nojs]").hidden = true;
  copyLink($(root, "[data-copy]"), out("copied"), save.url, root.id);
  update(undefined, true);
};
}
