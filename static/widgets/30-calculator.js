// The calculator: builder.model.estimator and builder.model.questions evaluated in the browser.
// The model's parameter-tensor table, the pipeline stages, what a GPU holds, the rule sets (model states,
// sharding, saved activations and the instants inside a layer, autocast copies, serving, communication, host,
// overheads) and the configuration checks come as rules that 01-rules.js evaluates; the architectures, dtype
// sizes, precision policies, sources, GPUs and every word (texts, the figure's markup templates) come as data
// from builder/widgets/calculator.py and the partial; the peak of a step is builder.model.step's rules. What is
// still arithmetic here (the searches) follows questions.py step by step, so that tests/browser/test_widget_calculator.py
// finds the same bytes. Python sums exact Fractions; here doubles, with products of integers before divisions
// so that most quantities are exact, and whole() rounds up to a whole byte as whole_bytes does.
{
const flo = Math.floor, ceil = Math.ceil, max = Math.max, min = Math.min, whole = wholeBytes, fill = fillText;
const commas = (n) => n.toLocaleString("en-US");

WIDGETS.calculator = (root, D) => {
  const form = $(root, "form"), out = (k) => $(root, `[data-out=${k}]`), bytes = (t) => D.dtypes[t], T = D.t;
  const put = (k, ...v) => fill(D.tpl[k], ...v);
  const sum = (ps) => ps.reduce((s, p) => s + p[1], 0);

  // builder.model.tensors and placement, as rules: the architecture's shape with its parameter-tensor table and
  // count (once per architecture), the pipeline stages worth evaluating, and what one GPU of a stage holds.
  const [shapes, held] = [D.ruleSets.shapes, D.ruleSets.holding].map(ruleSymbols), stagesOf = compileRule(D.stages);
  const known = new WeakMap(), shapeOf = (A) => known.get(A) || known.set(A, shapes(A)).get(A);

  // The state the model reads (calculator.effective_state): a control of the other mode counts at its plain value.
  const effective = (st) => Object.fromEntries(Object.entries(st).map(([k, v]) => [k, (D.modeOnly[k] || st.mode) == st.mode ? v : D.plain[k]]));
  // The form state -> a config (calculator.config_from_state), checked as Architecture and validate_config do.
  const cfg = (form) => {
    const st = effective(form), n = (k) => (/^-?\d+$/.test(st[k]) ? +st[k] : 0), train = st.mode == "train", sh = st.shard, fsdp = D.fsdp[sh] != null;
    let A = D.models[st.model];
    if (!A) {
      // The custom architecture the controls describe (calculator.custom_arch), checked as Architecture does.
      A = { ...D.custom };
      for (const [k, [names, text]] of Object.entries(D.arch)) for (const name of names) A[name] = text ? st[k] : n(k);
      refuse(shapeChecks, A);
    }
    const pol = [...D.policies[train ? st.precision : "bf16"]];
    if (!train) pol[0] = st.weights;
    const c = { A, train, pol, opt: st.optimizer, impl: st.optimizer_impl == "default" ? "" : st.optimizer_impl, rec: st.recompute, attention: st.attention, loss: st.loss,
      formula: st.formula, drop: st.dropout == "1", fsdp: fsdp && sh, stage: fsdp ? D.fsdp[sh] : n("shard"),
      sp: st.sp == "1", offload: st.offload,
      r: n("lora_rank"), ql: st.qlora == "1", kv: st.kv_dtype == "auto" ? "" : st.kv_dtype, ovh: n("overhead") };
    for (const k in D.ints) c[k] = n(D.ints[k]);
    return c;
  };
  // builder.model.checks: the shapes and configurations the model refuses, each with its one-line reason.
  const [checks, shapeChecks] = [D.checks, D.shapeChecks].map((list) => list.map((check) => check.map(compileRule)));
  const refuse = (list, inputs) => {
    for (const [refused, message] of list) if (refused(inputs)) throw { msg: message(inputs) };
  };

  // builder.model.inputs.run_inputs and rule_inputs: the names every rule set reads, for the form's config and, with
  // a stage, what one GPU of it holds.
  const runInputs = (c) => {
    const { A, pol } = c;
    return { ...D.fixedInputs, ...shapeOf(A), mode: c.train ? "train" : "serve", params: shapeOf(A).parameters,
      dp: c.dp, tp: c.tp, pp: c.pp, cp: c.cp, ep: c.ep, shard_stage: c.stage, fsdp: c.fsdp || "",
      offload: c.offload, optimizer: c.opt, optimizer_impl: c.impl, param_dtype: pol[0], master_dtype: pol[1] || "", grad_dtype: pol[2],
      optimizer_state_dtype: pol[3], activation_dtype: pol[4], autocast: pol[5], recompute: c.rec, kv_dtype: c.kv,
      attention: c.attention, loss: c.loss, dropout: +c.drop, sequence_parallel: +c.sp, implementation: c.formula == "megatron" ? "megatron" : "hf",
      activation_formula: c.formula == "korthikanti" ? "korthikanti" : "ops",
      lora_rank: c.r, qlora: +c.ql, batch: c.batch, context: c.context, overhead_fraction: c.ovh / 100, micro_batch: c.micro_batch,
      seq_len: c.seq_len, grad_accum: c.grad_accum, pp_virtual_stages: c.pp_virtual_stages,
      pp_schedule: c.pp_virtual_stages > 1 ? "interleaved" : "1f1b", dtype_bytes: D.dtypes };
  };
  const inputsOf = (run, stage) => held({ ...run, stage_layers: stage.layers, stage_has_embedding: stage.has_embedding,
    stage_has_head: stage.has_head, stage_in_flight: stage.in_flight });
  // The rule sets of builder.model (states, serving, overheads), compiled once.
  const [states, activations, autocast, serving, comm, hostParts, overheads] = ["states", "activations", "autocast", "serving", "comm", "host", "overheads"].map((k) => ruleSet(D.ruleSets[k]));
  const [opConditions, activationSymbols, momentSymbols] = ["conditions", "activations", "moments"].map((k) => ruleSymbols(D.ruleSets[k]));
  // step.STEP: the moments of a training step on a GPU holding these parts (rows of name, bucket: the name's first
  // path segment, bytes), what is live at each with the reserved parts on top; [bytes, phase] of the highest.
  const stepOf = deriver(D.ruleSets.step.symbols);
  const peakOf = (inputs, parts) => {
    const env = momentSymbols(activationSymbols(opConditions(inputs)));
    env.parts = parts.map(([name, bytes]) => ({ name, bucket: name.split("/")[0], bytes }));
    const step = stepOf(env);
    return [step.step_need, step.peak_phase];
  };
  // estimator.overhead_parts: the reserved parts of what is allocated.
  const reserved = (inputs, allocated, words) => {
    const env = Object.create(inputs);
    env.allocated = allocated;
    return overheads(env, words);
  };
  // estimator.estimate: every pipeline stage worth evaluating, the fuller one reported; peak.need: what the run
  // needs, the highest moment of a step over the stages (training) or the sum of parts (serving).
  const estimate = (c, words) => {
    const run = runInputs(c);
    refuse(checks, run);
    let best, need;
    const stages = stagesOf(run);
    for (const st of stages) {
      const inputs = inputsOf(run, st), host = hostParts(inputs, words);
      let gpu = [...states(inputs, words), ...(c.train ? [...activations(opConditions(inputs), words), ...autocast(inputs, words)] : serving(inputs, words)), ...comm(inputs, words)];
      // placement.HOLDING's `offloaded`: the buckets that live in host memory instead.
      const moved = inputs.offloaded.map((r) => r.bucket);
      gpu = gpu.filter((p) => !(moved.includes(p[0].split("/")[0]) && host.push(p)));
      gpu.push(...reserved(inputs, sum(gpu), words));
      const top = c.train ? peakOf(inputs, gpu.filter((p) => p[1])) : [sum(gpu)];
      if (!best || sum(gpu) > sum(best[0])) best = [gpu, host, inputs.host_copies];
      if (!need || top[0] > need[0]) need = top;
    }
    return { parts: best[0].filter((p) => p[1]), host: sum(best[1]) * best[2], need: need[0], phase: need[1] };
  };
  // questions._largest: limit if it fits, else the largest multiple of step above low (low included) below limit
  // that fits, 0 if none. Memory is monotone and close to affine in batch and sequence: each guess lies on the
  // straight line between what the bracket's ends need (regula falsi, Illinois rule: an end kept twice counts half
  // as far from capacity); every third guess halves the bracket, so the worst case stays logarithmic.
  const largest = (size, cap, low, limit, step) => {
    let good = low, bad = limit, fg = size(low), fb, side = 0, most;
    if (fg > cap) return 0;
    if ((fb = size(limit)) <= cap) return limit;
    for (let guess = 0; (most = ceil((bad - good) / step) - 1) >= 1; guess++) {
      const k = guess % 3 == 2 ? flo(most / 2) + 1 : flo((cap - fg) * (most + 1) / (fb - fg));
      const x = good + step * min(max(k, 1), most), fx = size(x);
      if (fx <= cap) {
        if (side > 0) fb = cap + (fb - cap) / 2;
        [good, fg, side] = [x, fx, 1];
      } else {
        if (side < 0) fg = cap - (cap - fg) / 2;
        [bad, fb, side] = [x, fx, -1];
      }
    }
    return good;
  };

  // Texts and figure, as calculator.results and the partial's macros make them.
  const verdict = (total, g) => fill(T.verdict, g[1], fmtBytes(g[2]), fill(T[total <= g[2] ? "fits" : "exceeds"], fmtBytes(Math.abs(g[2] - total))));
  const css = (name) => name.split("/")[0].replace("_", "-");
  // calculator.chart_geometry: the parts stacked, the need marked where it differs, overflow from the chosen GPU's capacity.
  const chart = (parts, total, need, gpu) => {
    const lines = D.gpus.filter((g) => D.shown.includes(g[0]) || g == gpu), end = max(total, need), scale = max(end, ...lines.map((g) => g[2])) * 1.15;
    const pc = (x) => (100 * x / scale).toFixed(2) + "%", y = 18 * lines.length + 6, side = (x) => (x / scale > 0.5 ? ["end", -4] : ["start", 4]);
    const shade = {};
    let x = 0;
    return put("svg", y + 50, lines.map((g, i) => put("capacity", pc(g[2]), 18 * i + 4, y + 32, 18 * i + 14, ...side(g[2]), g[3] + ": " + fmtBytes(g[2]))).join("")
      + parts.map(([name, n]) => {
        const b = css(name);
        shade[b] = (shade[b] ?? -1) + 1;
        x += n;
        return put("segment", b, shade[b] % 3, pc(x - n), y, pc(n), name + ": " + fmtBytes(n));
      }).join("") + (need > gpu[2] ? put("overflow", pc(gpu[2]), y, pc(end - gpu[2])) : "") + (need != total ? put("peak", pc(need), y - 4, y + 32) : "")
      + put("label", pc(need), y + 44, ...side(need), need == total ? fmtBytes(total) : fill(T.bar_label, fmtBytes(need))));
  };
  const render = (st) => {
    const gpu = D.gpus.find((g) => g[0] == st.gpu), name = st.model == "custom" ? T.custom : D.models[st.model].n;
    let text, error = "";
    try {
      const c = cfg(st), { parts, host, need, phase } = estimate(c, true), total = sum(parts), { A, train } = c, ok = need <= gpu[2];
      const size = (k) => (n) => estimate({ ...c, [k]: n }, false).need;
      const mb = largest(size(train ? "micro_batch" : "batch"), gpu[2], 1, D.limits.micro_batch, 1), ms = largest(size(train ? "seq_len" : "context"), gpu[2], train ? c.cp : 1, D.limits.seq_len, train ? c.cp : 1);
      const items = ["dp", "tp", "pp", "cp", "ep"].filter((k) => c[k] > 1).map((k) => k + " " + c[k]), gpus = c.dp * c.tp * c.pp * c.cp;
      if (train && st.shard != "0") items.push(form.elements.shard.selectedOptions[0].text);
      const run = train ? fill(T.train, st.precision, c.opt, c.r ? fill(T.lora, c.r, c.ql ? T.qlora : "") : "", c.micro_batch, commas(c.seq_len)) : fill(T.serve, st.weights, c.batch, commas(c.context));
      const answers = T[st.mode + "_answers"], basis = train ? fill(T.basis_train, D.phases[phase]) : T.basis_serve;
      text = fill(T.summary, name, commas(shapeOf(A).parameters), run, `${gpus} GPU${gpus > 1 ? "s" : ""}${items.length ? ` (${items.join(", ")})` : ""}`, fmtBytes(need), fmtBytes(need, "GB"), basis, fmtBytes(total), verdict(need, gpu));
      out("result").innerHTML = put("result", chart(parts, total, need, gpu), ok, ok ? "" : D.tpl.badge, verdict(need, gpu), need, fill(T.total, fmtBytes(need), fmtBytes(need, "GB")), basis,
        total, fill(T.total, fmtBytes(total), fmtBytes(total, "GB")), host ? put("host", fill(T.host, fmtBytes(host))) : "",
        parts.map((p) => put("row", p[0], p[1], css(p[0]), fmtBytes(p[1]), p[2], p[3])).join(""),
        D.gpus.map((g) => put("fit", g[0], need <= g[2], need <= g[2] ? "✓" : "✗", verdict(need, g))).join(""),
        fill(answers[0], gpu[1], mb ? commas(mb) : T.none[0]), fill(answers[1], gpu[1], ms ? fill(T.tokens, commas(ms)) : T.none[1]));
    } catch (e) {
      if (!e.msg) throw e;
      error = e.msg;
      text = fill(T.invalid, name, error);
    }
    out("result").hidden = !!error;
    out("error").hidden = !error;
    out("error").textContent = error;
    out("summary").textContent = out("live").textContent = text;
  };

  // The form: read, keep the URL in step, redraw (CSS shows what applies). Run and Recompute are native radio buttons.
  const read = () => Object.fromEntries([...form.elements].filter((e) => e.name && (e.type != "radio" || e.checked)).map((e) => [e.name, e.type == "checkbox" ? (e.checked ? "1" : "0") : e.value]));
  const save = stateWriter(root.id);
  const set = (k, v) => { const e = form.elements[k]; if (e.type == "checkbox") e.checked = v == "1"; else e.value = v; };
  const update = (event) => {
    // Picking a catalog model fills the custom fields with its shape (calculator.arch_state): a custom model starts from it.
    const A = event && event.target.name == "model" && D.models[event.target.value];
    if (A) for (const k in A.form) set(k, A.form[k]);
    const st = read();
    save(Object.fromEntries(Object.entries(st).filter(([k, v]) => v != D.defaults[k] && (st.model == "custom" || !(k in D.arch)))));
    render(st);
  };
  for (const [k, v] of Object.entries(readState(root.id))) {
    if (!(k in D.defaults)) continue;
    set(k, v);
    if (form.elements[k].selectedIndex < 0) set(k, D.defaults[k]);
  }
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  form.addEventListener("submit", (event) => event.preventDefault());
  $(root, "fieldset").disabled = false;
  $(root, "[data-nojs]").hidden = true;
  copyLink($(root, "[data-copy]"), out("copied"), save.url);
  update();
};
}
