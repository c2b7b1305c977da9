// The full memory model in the browser: builder.model.estimator.estimate, peak.need and questions' search,
// evaluated from the rules Python emits (builder/widgets/model_data.py, sent as a widget's `model` data).
// Every widget that shows the model's own number uses this one copy; it knows no formula, constant or part
// name: rule sets, stages, checks and dtype sizes all come as data, and 01-rules.js evaluates them.
const sumParts = (ps) => ps.reduce((s, p) => s + p[1], 0);
// builder.model.tensors, placement, checks and states, as rules: the architecture's shape with its parameter-tensor
// table and count (once per architecture), the pipeline stages worth evaluating, what one GPU of a stage holds, the
// shapes and configurations the model refuses (each with its one-line reason) and the model states.
function stageModel(M) {
  const shapes = ruleSymbols(M.ruleSets.shapes), held = ruleScope(M.ruleSets.holding), stagesOf = compileRule(M.stages);
  const known = new WeakMap(), shapeOf = (A) => known.get(A) || known.set(A, shapes(A)).get(A);
  const [checks, shapeChecks] = [M.checks, M.shapeChecks].map((list) => list.map((check) => check.map(compileRule)));
  const refuse = (list, inputs) => {
    for (const [refused, message] of list) if (refused(inputs)) throw { msg: message(inputs) };
  };
  const inputsOf = (run, stage) => held(new Scope({ stage_layers: stage.layers, stage_has_embedding: stage.has_embedding,
    stage_has_head: stage.has_head, stage_in_flight: stage.in_flight }, scopeOf(run)));
  return { shapeOf, stagesOf, checks, shapeChecks, refuse, inputsOf, states: ruleSet(M.ruleSets.states) };
}
// builder.model.engines.engine_report: each pipeline stage's inputs with the engine's settings and the weights the
// stage holds, evaluated by the engine's rules (`engines`: name -> its encoded rules and the symbol workers are
// compared by); the engine takes the worker with the fewest blocks or tokens. Its values (`value(name)`) and its
// parts ([name, whole bytes]).
function engineModel(M, engines) {
  M = unpacked(M);
  const { shapeOf, stagesOf, checks, refuse, inputsOf, states } = stageModel(M);
  const compiled = {};
  for (const [name, e] of Object.entries(engines)) compiled[name] = { symbols: ruleScope(e.rules), parts: ruleSet(e.rules), fewest: e.fewest };
  // What a run's stages hold does not depend on the engine's settings: worked out once per run (the same object),
  // so a reader changing only a request length or a memory share meets the engine's rules alone.
  const held = new WeakMap(), stagesHeld = (run) => held.get(run) || held.set(run, stagesOf(run).map((st) => {
    const inputs = inputsOf(run, st);
    return [inputs, sumParts(states(inputs, false))];
  })).get(run);
  const report = (run, engine, settings) => {
    refuse(checks, run);
    const e = compiled[engine];
    let worst = null;
    for (const [inputs, weights] of stagesHeld(run)) {
      const env = new Scope({ ...settings, weights_bytes: weights }, inputs);
      const values = e.symbols(env);
      if (!worst || order(look(values, e.fewest), look(worst[0], e.fewest)) < 0) worst = [values, env];
    }
    // A value by its name as the script reads it (a number, a fraction as its nearest double): only the few the
    // script shows are looked up, nothing copied.
    const value = (k) => toNumber(look(worst[0], k));
    return { value, parts: e.parts(worst[1], false) };
  };
  return { shapeOf, report };
}
// The full model: its estimate, checks and searches, from the rules `M`, made at once.
const browserModel = (M) => madeInSteps(browserModelSteps(M))();
// The same made in steps (a generator whose value is the model): the rules unpacked, the stages' rules compiled, the
// estimate's rule sets compiled, each its own step, each a few milliseconds (a page compiles them while it loads).
function* browserModelSteps(M) {
  M = unpacked(M);
  yield;
  const sum = sumParts, training = compileRule(M.training);
  const { shapeOf, stagesOf, checks, shapeChecks, refuse, inputsOf, states } = stageModel(M);
  yield;
  // The rule sets of builder.model (serving, overheads, ...), compiled once.
  const R = M.ruleSets;
  const [activations, autocast, checkpoint, serving, comm, hostParts, overheads] = [R.activations, R.autocast, R.checkpoint, R.serving, R.comm, R.host, R.overheads].map(ruleSet);
  const [opConditions, activationSymbols, momentSymbols] = [R.conditions, R.activations, R.moments].map(ruleScope);
  // step.STEP: the moments of a training step on a GPU holding these parts (rows of name, bucket: the name's first
  // path segment, bytes), what is live at each with the reserved parts on top; [bytes, phase] of the highest. The
  // same parts are the same table (kept by their names and bytes, the last hundred), so the step, memoised on what
  // it reads, is reused when a run comes back.
  const stepOf = ruleScope(M.ruleSets.step), tables = keepLast(100);
  const partTable = (onGpu) => tables(onGpu.map(([name, bytes]) => name + " " + bytes).join("\n"),
    () => onGpu.map(([name, bytes]) => ({ name, bucket: name.split("/")[0], bytes })));
  const peakOf = (inputs, onGpu) => {
    const step = stepOf(new Scope({ parts: partTable(onGpu) }, momentSymbols(activationSymbols(opConditions(inputs))))).o;
    return [toNumber(step.step_need), step.peak_phase];
  };
  // estimator.overhead_parts: the reserved parts of what is allocated.
  const reserved = (inputs, allocated, words) => overheads(new Scope({ allocated }, scopeOf(inputs)), words);
  // estimator.estimate for a run's inputs (inputs.run_inputs): every pipeline stage worth evaluating, the fuller
  // one reported; peak.need: what the run needs, the highest moment of a step over the stages (training) or the
  // sum of parts (serving). Parts are [name, bytes, per-unit words, source, note] (words: false gives [name, bytes]).
  const estimate = (run, words = true) => {
    refuse(checks, run);
    const train = training(run);
    let best, need;
    for (const st of stagesOf(run)) {
      const inputs = inputsOf(run, st), host = hostParts(inputs, words);
      let gpu = [...states(inputs, words), ...(train ? [...activations(opConditions(inputs), words), ...autocast(inputs, words), ...checkpoint(inputs, words)] : serving(inputs, words)), ...comm(inputs, words)];
      // placement.HOLDING's `offloaded`: the buckets (or parts, by full name) that live in host memory instead.
      const moved = look(inputs, "offloaded").map((r) => r.bucket);
      gpu = gpu.filter((p) => !((moved.includes(p[0].split("/")[0]) || moved.includes(p[0])) && host.push(p)));
      gpu.push(...reserved(inputs, sum(gpu), words));
      const top = train ? peakOf(inputs, gpu.filter((p) => p[1])) : [sum(gpu)];
      if (!best || sum(gpu) > sum(best[0])) best = [gpu, host, look(inputs, "host_copies")];
      if (!need || top[0] > need[0]) need = top;
    }
    return { parts: best[0].filter((p) => p[1]), total: sum(best[0]), host: sum(best[1]) * toNumber(best[2]), need: need[0], phase: need[1] };
  };
  // builder.model.search.LARGEST, the search --max runs: limit if it fits, else the largest multiple of step above
  // low (low included) below limit that fits, 0 if none. A teaching widget's data has no search (it never runs one).
  // largest.steps: the same search one probe at a time (a generator whose value is the answer, for afterFrame's
  // slices).
  const search = M.largest && searchRunner(M.largest);
  const bounds = (capacity, low, limit, step) => ({ capacity, low, limit, step });
  const largest = (size, ...at) => search(size, bounds(...at));
  largest.steps = (size, ...at) => search.steps(size, bounds(...at));
  return { shapeOf, refuse, shapeChecks, estimate, largest };
}
// builder.model.search.Search.run: a program Python sends as rules (`start`, `going`, `probe`, `after`, `answer`)
// -> a function of (measure, inputs) that runs it; here is only the loop, measuring where the rules ask (a step
// whose probe is none measures nothing). Its .steps(measure, inputs): a generator that runs the same loop, pausing
// after each step, whose value is the answer.
function searchRunner({ start, going, probe, after, answer, names: [probed, measured] }) {
  const [begin, next] = [start, after].map(deriver), [more, at, result] = [going, probe, answer].map(compileRule);
  const steps = function* (measure, inputs) {
    let env = flat(begin(inputs));
    while (more(env)) {
      const x = at(env);
      env = flat(next(new Scope({ [probed]: x, [measured]: x === null ? null : measure(x) }, scopeOf(env))));
      yield;
    }
    return result(env);
  };
  const run = (measure, inputs) => madeInSteps(steps(measure, inputs))();
  run.steps = steps;
  return run;
}
