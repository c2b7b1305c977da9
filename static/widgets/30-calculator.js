// The calculator (seeds 002 and 004): builder.model.estimator and builder.model.questions
// evaluated in the browser. Every model-specific fact (architectures, op lists, dtype sizes,
// precision policies, optimizer and quantisation rules, sources, GPUs) comes from the JSON
// builder/widgets/calculator.py emits; this file is only the arithmetic, in the same order
// as estimator.py, so that tests/browser/test_widget_calculator.py finds the same bytes.
// Bytes are exact: rationals are [numerator, denominator] pairs of BigInts (Python uses
// Fraction) and each part is rounded up to a whole byte at the end (whole_bytes).
{
const B = BigInt;
const Q = (x) => (x.map ? x.map(B) : [B(x), 1n]);
const mul = (...a) => a.map(Q).reduce((x, y) => [x[0] * y[0], x[1] * y[1]]);
const add = (...a) => a.map(Q).reduce((x, y) => (x[1] == y[1] ? [x[0] + y[0], x[1]] : [x[0] * y[1] + y[0] * x[1], x[1] * y[1]]), [0n, 1n]);
const over = (x, n) => mul(x, [1, n]);
const whole = ([n, d]) => Number(n / d + (n % d > 0n ? 1n : 0n));
// f"{x:.kf}" of a non-negative rational, exact, ties to even (Python formats the exact double).
const dec = (x, k) => {
  const [n, d] = Q(x), s = n * 10n ** B(k), q = s / d, r = 2n * (s % d);
  const t = String(q + (r > d || (r == d && q % 2n) ? 1n : 0n)).padStart(k + 1, "0");
  return k ? t.slice(0, -k) + "." + t.slice(-k) : t;
};
const num = (x) => Number(x[0]) / Number(x[1]);
const fb = (x) => String(num(x));
const flo = Math.floor;
const commas = (n) => n.toLocaleString("en-US");
const perTok = (x, T) => {
  const p = over(x, T > 1 ? T : 1);
  return p[0] >= 1024n * p[1] ? dec(over(p, 1024), 1) + " KiB/token" : dec(p, 0) + " B/token";
};
const fail = (msg) => { throw { msg }; };
const ARCH = { layers: "L", hidden: "h", heads: "a", kv_heads: "k", head_dim: "d", ffn: "f", vocab: "V", experts: "E", top_k: "K" };

WIDGETS.calculator = (root, D) => {
  const form = $(root, "form"), out = (k) => $(root, `[data-out=${k}]`), setters = {};
  const bytes = (t) => D.dtypes[t];
  const part = (name, x, rule, src) => [name, x.map ? whole(x) : x, rule, D.sources[src]];
  const sum = (ps) => ps.reduce((s, p) => s + p[1], 0);

  // One block's parameter groups (architecture.layer_param_groups): q, kv, o, norms, then router/experts/shared or mlp.
  const groups = (A) => {
    const { h, a, k, d } = A, M = A.sw ? 3 : 2, mlp = (i) => M * h * i + (A.mb ? (M - 1) * i + h : 0);
    const g = [["q", h * a * d + (A.qb ? a * d : 0)], ["kv", 2 * (h * k * d + (A.qb ? k * d : 0))], ["o", a * d * h + (A.ob ? h : 0)], ["n", 2 * h * (A.ln ? 2 : 1)]];
    return A.E ? [...g, ["r", h * A.E], ["x", A.E * mlp(A.F)], ["s", A.se * mlp(A.F)]] : [...g, ["m", mlp(A.f)]];
  };
  const params = (A) => (A.V * A.h) * (A.tie ? 1 : 2) + A.P * A.h + A.L * groups(A).reduce((s, g) => s + g[1], 0) + A.h * (A.ln ? 2 : 1);

  // The form state -> a config (calculator.config_from_state), validated as Architecture and validate_config do.
  const cfg = (st) => {
    const n = (k) => (/^-?\d+$/.test(st[k]) ? +st[k] : 0), train = st.mode == "train", sh = train ? st.shard : "0";
    let A = D.models[st.model];
    if (!A) {
      A = { name: "custom", F: n("ffn"), se: 0, P: 0, win: 0, sw: st.mlp == "swiglu", ln: st.norm == "layernorm", tie: st.tied == "1", gp: 1 };
      for (const k in ARCH) A[ARCH[k]] = n(k);
      for (const k of ["layers", "hidden", "heads", "vocab"]) if (n(k) <= 0) fail(`custom: ${k} must be positive, got ${n(k)}`);
      if (A.k <= 0 || A.a % A.k) fail(`custom: kv_heads (${A.k}) must divide heads (${A.a})`);
      if (A.E && !(A.K > 0 && A.K <= A.E)) fail(`custom: top_k must be in 1..experts (${A.E}), got ${A.K}`);
      A.d = A.d || flo(A.h / A.a);
    } else A.name = st.model;
    const pol = [...D.policies[train ? st.precision : "bf16"]];
    if (!train) pol[0] = st.weights;
    const c = { A, st, train, pol, opt: st.optimizer, b: n("micro_batch"), s: n("seq_len"), ga: n("grad_accum"), rec: st.recompute, att: st.attention,
      kor: st.formula == "korthikanti", meg: st.formula == "megatron", drop: st.dropout == "1", dp: n("dp"), fsdp: D.fsdp[sh] != null ? sh : "",
      zero: D.fsdp[sh] != null ? 0 : n("shard"), tp: n("tp"), sp: st.sp == "1", pp: n("pp"), v: n("vpp"), cp: n("cp"), ep: n("ep"),
      off: train ? st.offload : "none", r: train ? n("lora_rank") : 0, ql: train && st.qlora == "1", batch: n("batch"), ctx: n("context"),
      kv: st.kv_dtype == "auto" ? "" : st.kv_dtype, ovh: n("overhead") };
    c.stage = c.fsdp ? D.fsdp[c.fsdp] : c.zero;
    return c;
  };
  const validate = (c) => {
    const { A, dp, tp, pp, ep, cp } = c;
    for (const [k, v] of Object.entries({ micro_batch: c.b, seq_len: c.s, grad_accum: c.ga, dp, tp, pp, cp, ep, pp_virtual_stages: c.v, batch: c.batch, context: c.ctx }))
      if (v < 1) fail(`${k}: must be at least 1, got ${v}`);
    if (c.r < 0) fail(`lora_rank: must be 0 or more, got ${c.r}`);
    if (c.ql && !c.r) fail("qlora: QLoRA needs lora_rank > 0");
    const f = c.ovh / 100;
    if (f < 0 || f >= 10) fail(`overhead_fraction: must be a fraction between 0 and 10, got ${f}${Number.isInteger(f) ? ".0" : ""}`);
    if (tp > 1 && (A.a % tp || (A.k % tp && tp % A.k))) fail(`tp: ${tp} does not divide the ${A.a} attention heads / ${A.k} KV heads of ${A.name}`);
    if (pp > A.L) fail(`pp: ${pp} stages exceed the ${A.L} layers of ${A.name}`);
    if (c.v > 1 && A.L % (pp * c.v)) fail(`pp_virtual_stages: pp x virtual stages must divide ${A.L} layers`);
    if (ep > 1 && (!A.E || A.E % ep)) fail(`ep: ${ep} must divide the experts of an MoE model (${A.name} has ${A.E})`);
    if (ep > 1 && dp % ep) fail(`ep: expert parallelism is carved out of data parallelism: ${ep} must divide dp ${dp}`);
    if (c.train && cp > 1 && c.s % cp) fail(`cp: ${cp} must divide seq_len ${c.s}`);
    if (c.off != "none" && c.stage < 1) fail("offload: CPU offload needs ZeRO stage 1 or more, or an FSDP strategy that shards");
    if (c.off[0] != "n" && c.off[0] != "o" && c.stage < 3) fail("offload: offloading parameters needs ZeRO-3 or FSDP FULL_SHARD/HYBRID_SHARD");
    const g = Math.min(dp, 8);
    if (c.fsdp == "HYBRID_SHARD" && dp % g) fail(`fsdp_shard_group: the shard group (${g} ranks) must divide dp ${dp}`);
  };

  // placement.stages: [name, layers, has embedding, has head, micro-batches in flight].
  const stages = (c) => {
    const { A, pp: p, v } = c;
    if (p == 1) return [["only", A.L, 1, 1, 1]];
    const per = Math.ceil(A.L / p), f = mul(Math.min(p, c.ga), v > 1 ? [p * v + p - 1, p * v] : 1);
    return [["first", per, 1, 0, f], ["last", A.L - per * (p - 1), 0, 1, 1]];
  };
  // placement.holding: dense, expert, linear, one block (layer unit), root unit on one GPU.
  const holding = (c, [, L, emb, head]) => {
    const { A, tp: t } = c, H = { dn: 0, ex: 0, li: 0, un: 0 };
    for (const [g, n] of groups(A)) {
      const here = g == "n" || g == "r" ? n : [n, g == "kv" && A.k < t ? A.k : g == "x" ? t * c.ep : t], l = mul(here, L);
      H.un = add(H.un, here);
      H[g == "x" ? "ex" : "dn"] = add(H[g == "x" ? "ex" : "dn"], l);
      if (g != "n") H.li = add(H.li, l);
    }
    const rows = Math.ceil(A.V / t) * A.h, root = (emb ? rows + A.P * A.h : 0) + (head ? A.h * (A.ln ? 2 : 1) + (!A.tie || !emb ? rows : 0) : 0);
    H.ro = root;
    H.dn = add(H.dn, root);
    return H;
  };
  // estimator.sharding: ranks sharing weights, grads, optimizer states (dense, then expert).
  const sharding = (c) => {
    const g = c.fsdp == "HYBRID_SHARD" ? Math.min(c.dp * c.cp, 8) : c.dp * c.cp, e = Math.max(1, flo(g / c.ep));
    return [3, 2, 1, 3, 2, 1].map((k, i) => (c.stage >= k ? (i < 3 ? g : e) : 1));
  };
  const perGpu = (H, dd, ed) => add(over(H.dn, dd), over(H.ex, ed));
  // FSDP2 shards each tensor along dim 0 in chunks of ceil(dim0 / n) (architecture.parameter_tensors).
  const sharded = (c, H, dd, ed) => {
    const { A } = c, { h, a, k, d, f, L, V } = A, nm = [h, 1, A.ln ? 2 : 1];
    if (!c.fsdp || dd < 2 || A.E || c.tp * c.pp * c.ep > 1 || c.r) return perGpu(H, dd, ed);
    const layer = A.g2 ? [[h, 3 * h, 1], [3 * h, 1, 1], [h, h, 1], [h, 1, 1], [h, f, 1], [f, 1, 1], [f, h, 1], [h, 1, 1], nm, nm]
      : [[a * d, h, 1], [k * d, h, 2], [h, a * d, 1], ...(A.qb ? [[a * d, 1, 1], [k * d, 1, 2]] : []), ...(A.ob ? [[h, 1, 1]] : []), [f, h, A.sw ? 2 : 1], [h, f, 1], nm, nm];
    const all = [[V, h, 1], ...(A.P ? [[A.P, h, 1]] : []), ...layer.map(([x, y, n]) => [x, y, n * L]), nm, ...(A.tie ? [] : [[V, h, 1]])];
    return Q(all.reduce((s, [x, y, n]) => s + n * Math.ceil(x / dd) * y, 0));
  };

  const weightParts = (c, H, S) => {
    const [pr] = c.pol, cnt = sharded(c, H, S[0], S[3]), qz = D.quantised[c.ql ? "nf4" : c.train ? "" : pr];
    if (c.off[0] == "p" || c.off[0] == "b") return [];
    if (!qz) return [part("weights", mul(cnt, bytes(pr)), `${fb(bytes(pr))} B/param (${pr})`, c.pol[1] ? "mixed" : "tm101")];
    const [nb, k, what, src] = qz, tot = add(H.dn, H.ex), lin = mul(cnt, H.li, [tot[1], tot[0]]), kc = k[1] ? k : [k[0], c.A.h];
    return [part("weights/quantised_linear", mul(lin, nb), `${fb(nb)} B/param (${c.ql ? "nf4" : pr})`, src),
      part("weights/quantisation_constants", mul(lin, kc), `${dec(kc, 4)} B/param (${what})`, src),
      part("weights/unquantised", mul(add(cnt, mul(lin, -1)), 2), `2 B/param (${c.ql ? "bf16" : "fp16"})`, src)];
  };
  const stateParts = (c, H, S, L) => {
    const { A } = c, [pr, ms, gr, os] = c.pol, out = [];
    let T = H, state = os;
    if (c.r) {
      const { h, a, k, d } = A;
      T = { dn: [c.r * (2 * (h + a * d) + 2 * (h + k * d)) * L, c.tp], ex: 0 };
      state = "fp32";
      out.push(part("weights/lora_adapters", mul(perGpu(T, S[0], S[3]), 4), "4 B/adapter param (fp32)", "lora"),
        part("gradients", mul(perGpu(T, S[1], S[4]), 4), "4 B/adapter param (fp32); frozen base weights get none", "lora"));
    } else {
      if (ms && ms != pr) out.push(part("optimizer/master", mul(sharded(c, H, S[2], S[5]), bytes(ms)), `${fb(bytes(ms))} B/param (${ms} master copy)`, "mixed"));
      out.push(part("gradients", mul(sharded(c, H, S[1], S[4]), bytes(gr)), `${fb(bytes(gr))} B/param (${gr})`, "mixed"));
    }
    // Optimizer states: a row per state (calculator.OPTIMIZER_STATES); Adafactor's factors are (rows + columns) per matrix.
    const cnt = sharded(c, T, S[2], S[5]), per = bytes(state), M = A.sw ? 3 : 2;
    const ratio = [((A.h + A.a * A.d) * 2 + (A.h + A.k * A.d) * 2 + M * (A.h + (A.f || A.F)) * Math.max(1, A.E) + 2 * A.h * (A.ln ? 2 : 1)) * A.L + (A.V + A.h) * (A.tie ? 1 : 2), params(A)];
    for (const [name, spec, rule, src] of D.optimizers[c.opt]) {
      const each = spec == "s" ? per : spec == "af" ? mul(ratio, per) : spec;
      out.push(part("optimizer/" + name, mul(cnt, each), rule.replace("{b}", spec == "af" ? dec(each, 4) : fb(per)).replace("{s}", state), src));
    }
    return out;
  };
  const activationParts = (c, [, L, emb, head, fl]) => {
    const { A, tp: t } = c, ab = bytes(c.pol[4]), s = flo(c.s / c.cp), T = c.b * s, src = c.meg ? "kor" : "hf";
    if (c.kor) {
      const sbh = mul(s, c.b, A.h), full = c.rec == "full", sel = c.rec == "selective";
      const x = full ? mul(sbh, [2, c.sp ? t : 1]) : mul(sbh, add(t == 1 ? 34 : c.sp ? [34, t] : add(10, [24, t]), sel ? 0 : [5 * A.a * s, A.h * t]));
      const rule = full || t == 1 ? (full ? "2sbh" : sel ? "34sbh" : "sbh(34 + 5as/h)") : c.sp ? (sel ? "34sbh/t" : "sbh(34/t + 5as/(ht))") : sel ? "sbh(10 + 24/t)" : "sbh(10 + 24/t + 5as/(ht))";
      return [part("activations/layers", mul(x, L, fl), rule + " per layer", "kor")];
    }
    const sym = { T, Tr: [T, c.sp ? t : 1], b: c.b, s, S: c.s, h: A.h, a: flo(A.a / t), k: Math.max(1, flo(A.k / t)), d: A.d, f: flo((A.E ? A.F : A.f) / t), V: Math.ceil(A.V / t), E: A.E, K: A.K, r: c.r };
    const eager = c.att == "eager", held = [eager ? "eager" : "fused", eager && A.k != A.a && !c.meg ? "gqa_repeat" : "no_gqa_repeat", c.drop ? "dropout" : "no_dropout",
      c.pol[4] != "fp32" && "low_precision", A.sw ? "swiglu" : A.gp && !c.meg ? "gelu_python" : "gelu_fused", A.P ? "learned_positions" : "rotary", c.rec == "full" && "full_recompute",
      ...(c.r ? ["q", "k", "v", "o"].map((x) => "lora_" + x) : ["grad_qkv", "grad_o", "grad_mlp_in", "grad_mlp_out", "grad_norm"])];
    // activations.evaluate: rows whose conditions all hold, elements = coefficient x symbols, in bytes.
    const ev = (rows) => rows.filter((r) => !r[4] || r[4].split("&").every((x) => held.includes(x)))
      .map(([g, k, shape, dt, , core]) => [g, mul(k, ...shape.split(" ").filter(Boolean).map((x) => sym[x]), dt == "act" ? ab : dt == "int64" ? 8 : bytes(dt)), core]);
    const total = (rows) => add(...rows.map((r) => r[1]));
    const byGroup = (rows) => [...new Set(rows.map((r) => r[0]))].map((g) => [g, total(rows.filter((r) => r[0] == g))]);
    const layer = ev(D.blocks[c.meg ? "megatron" : A.ln ? "hf-gpt2" : A.E ? "hf-mixtral" : "hf-llama"]);
    const saved = c.rec == "selective" ? layer.filter((r) => !r[2]) : c.rec == "full" ? [["checkpoint", mul(sym.Tr, A.h, ab)]] : layer;
    const out = byGroup(saved).map(([g, x]) => part("activations/" + g, mul(x, L, fl), perTok(x, T), src));
    if (c.rec == "full") out.push(part("activations/recompute_working_layer", total(layer), perTok(total(layer), T), "chen"));
    const extra = [...(emb ? ev(D.first) : []), ...(head ? ev(D.last[A.ln || c.meg ? 0 : 1]) : [])];
    for (const [g, x] of byGroup(extra)) out.push(part("activations/" + g, mul(x, fl), perTok(mul(x, fl), T), src));
    if (head) out.push(part("activations/logits", mul(T, sym.V, ab), `${fb(ab)} B per token per vocabulary entry`, "hf"));
    return out;
  };
  const serveParts = (c, [, L]) => {
    const { A, tp: t } = c, pr = c.pol[0], kd = c.kv || (num(bytes(pr)) < 2 ? "bf16" : pr), f = flo((A.f || A.F) / t);
    const per = mul(2 * L * Math.max(1, flo(A.k / t)) * A.d, bytes(kd)), chunk = Math.min(c.batch * c.ctx, 8192);
    return [part("kv_cache", mul(per, c.batch, A.win ? Math.min(c.ctx, A.win) : c.ctx), `${fb(per)} B/token (${kd})`, "kv"),
      part("activations/working_set", add(mul(chunk * (2 * A.h + 3 * f), bytes(c.pol[4])), c.batch * A.V * 4), "per prefill chunk", "work")];
  };
  const commParts = (c, H, S) => !c.train || (S[0] < 2 && S[1] < 2) ? [] : [
    ...(S[0] > 1 ? [part("comm/gathered_params", mul(add(mul(H.un, 2), H.ro), bytes(c.pol[0])), "2 blocks + root unit", "fsdp")] : []),
    part("comm/unsharded_grads", mul(H.un, bytes(c.pol[2])), `1 block (${c.pol[2]})`, "fsdp")];

  // estimator.estimate: every pipeline stage worth evaluating, the fuller one reported.
  const estimate = (c) => {
    validate(c);
    let best;
    for (const st of stages(c)) {
      const H = holding(c, st), S = sharding(c), host = [];
      let gpu = [...weightParts(c, H, S), ...(c.train ? [...stateParts(c, H, S, st[1]), ...activationParts(c, st)] : serveParts(c, st)), ...commParts(c, H, S)];
      if (c.off[0] == "o" || c.off[0] == "b") gpu = gpu.filter((p) => !(/^(optimizer|gradients)/.test(p[0]) && host.push(p)));
      if (c.off[0] == "p" || c.off[0] == "b") host.push(part("weights", mul(perGpu(H, S[0], S[3]), bytes(c.pol[0])), "", "off"));
      if (c.ovh) gpu.push(part("overhead/framework", mul(sum(gpu), [c.ovh, 100]), c.ovh + "%", "over"));
      if (!best || sum(gpu) > sum(best[0])) best = [gpu, host];
    }
    const n = Math.min(8, c.dp * c.tp * c.pp * c.cp);
    return { parts: best[0].filter((p) => p[1]), host: sum(best[1]) * n };
  };
  // questions._largest: the largest multiple of step in [low, limit] that fits (memory is monotone).
  const largest = (fits, low, limit, step) => {
    if (!fits(low)) return 0;
    let good = low, bad = 0, probe = low;
    while (!bad) {
      probe *= 2;
      if (probe > limit) { if (fits(limit)) return limit; bad = limit; } else if (fits(probe)) good = probe; else bad = probe;
    }
    while (bad - good > step) {
      const mid = flo((good + bad) / 2 / step) * step;
      if (mid <= good) break;
      if (fits(mid)) good = mid; else bad = mid;
    }
    return good;
  };

  // Texts and figure, as calculator.results and the partial make them.
  const verdict = (total, g) => `${g[1]} (${fmtBytes(g[2])} usable): ` + (total <= g[2] ? `fits with ${fmtBytes(g[2] - total)} headroom` : `exceeds by ${fmtBytes(total - g[2])}`);
  const chart = (parts, total, gpu) => {
    const lines = D.gpus.filter((g) => D.shown.includes(g[0]) || g == gpu), scale = Math.max(total, ...lines.map((g) => g[2])) * 1.15;
    const pc = (x) => (100 * x / scale).toFixed(2) + "%", y = 18 * lines.length + 6, H = y + 50, end = (x) => (x / scale > 0.5 ? 'end" dx="-4' : 'start" dx="4');
    const shade = {};
    let x = 0, svg = `<svg width="100%" height="${H}" focusable="false"><defs><pattern id="${root.id}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line class="tm-overflow-hatch" x1="0" y1="0" x2="0" y2="6"/></pattern></defs>`;
    lines.forEach((g, i) => { svg += `<line class="tm-capacity" x1="${pc(g[2])}" x2="${pc(g[2])}" y1="${18 * i + 4}" y2="${y + 32}" stroke-dasharray="4 3"/><text class="tm-text-dim tm-capacity-label" x="${pc(g[2])}" y="${14 + 18 * i}" text-anchor="${end(g[2])}">${g[1]}: ${fmtBytes(g[2])}</text>`; });
    for (const [name, n] of parts) {
      const b = name.split("/")[0];
      shade[b] = (shade[b] ?? -1) + 1;
      svg += `<rect class="tm-segment tm-bucket-${b.replace("_", "-")} tm-shade-${shade[b] % 3}" x="${pc(x)}" y="${y}" width="${pc(n)}" height="28"><title>${name}: ${fmtBytes(n)}</title></rect>`;
      x += n;
    }
    if (total > gpu[2]) svg += `<rect class="tm-overflow-outline" x="${pc(gpu[2])}" y="${y}" width="${pc(total - gpu[2])}" height="28" fill="url(#${root.id}-hatch)"/>`;
    return svg + `<text class="tm-text" x="${pc(total)}" y="${y + 44}" text-anchor="${end(total)}">${fmtBytes(total)}</text></svg>`;
  };
  const render = (st) => {
    const gpu = D.gpus.find((g) => g[0] == st.gpu), name = st.model == "custom" ? "Custom model" : D.models[st.model].n;
    let text, error = "";
    try {
      const c = cfg(st), { parts, host } = estimate(c), total = sum(parts), { A, train } = c;
      const fits = (k) => (n) => sum(estimate({ ...c, [k]: n }).parts) <= gpu[2];
      const mb = largest(fits(train ? "b" : "batch"), 1, D.limits.micro_batch, 1), ms = largest(fits(train ? "s" : "ctx"), train ? c.cp : 1, D.limits.seq_len, train ? c.cp : 1);
      const items = ["dp", "tp", "pp", "cp", "ep"].filter((k) => c[k] > 1).map((k) => k + " " + c[k]), gpus = c.dp * c.tp * c.pp * c.cp;
      if (train && st.shard != "0") items.push(/\d/.test(st.shard) ? "ZeRO-" + st.shard : "FSDP " + st.shard);
      const run = train ? `training, ${st.precision}, ${c.opt}${c.r ? `, LoRA rank ${c.r}${c.ql ? " (QLoRA)" : ""}` : ""}, micro-batch ${c.b} x ${commas(c.s)} tokens` : `serving ${st.weights} weights, ${c.batch} x ${commas(c.ctx)} tokens`;
      text = `${name} (${commas(params(A))} parameters), ${run}, ${gpus} GPU${gpus > 1 ? "s" : ""}${items.length ? ` (${items.join(", ")})` : ""}: ${fmtBytes(total)} (${fmtBytes(total, "GB")}) per GPU; ${verdict(total, gpu)}.`;
      const ok = total <= gpu[2];
      out("result").innerHTML = `<div class="calc-chart tm-chart" aria-hidden="true">${chart(parts, total, gpu)}</div>
<p class="calc-verdict" data-fits="${ok}">${ok ? "" : '<strong class="calc-badge">DOESN\'T FIT</strong> '}${verdict(total, gpu)}</p>
<p class="calc-total">Total per GPU: <strong data-total="${total}">${fmtBytes(total)} = ${fmtBytes(total, "GB")}</strong></p>
${host ? `<p class="calc-host">Host memory per node for offloaded states: ${fmtBytes(host)}</p>` : ""}<div class="table-scroll" tabindex="0" role="region" aria-label="Parts of the per-GPU total"><table class="data-table calc-table"><caption>Per-GPU parts</caption><thead><tr><th scope="col">Part</th><th scope="col">GiB</th><th scope="col">Rule</th><th scope="col">Source</th></tr></thead><tbody>${parts.map((p) => `<tr data-part="${p[0]}" data-bytes="${p[1]}"><th scope="row"><span class="calc-swatch tm-bucket-${p[0].split("/")[0].replace("_", "-")}"></span>${p[0]}</th><td>${fmtBytes(p[1])}</td><td>${p[2]}</td><td class="calc-source">${p[3]}</td></tr>`).join("")}</tbody></table></div>
<h3 class="calc-h">Fits on</h3><ul class="calc-fits">${D.gpus.map((g) => `<li data-gpu="${g[0]}" data-fits="${total <= g[2]}"><span aria-hidden="true">${total <= g[2] ? "✓" : "✗"}</span> ${verdict(total, g)}</li>`).join("")}</ul>
<p data-out="max_batch">Largest ${train ? "micro-batch" : "batch"} that fits on ${gpu[1]}: ${mb ? commas(mb) : "none, even 1 does not fit"}</p><p data-out="max_seq">Longest ${train ? "sequence" : "context"} that fits on ${gpu[1]}: ${ms ? commas(ms) + " tokens" : "none fits"}</p>`;
    } catch (e) {
      if (!e.msg) throw e;
      error = e.msg;
      text = `${name}: not a valid configuration: ${error}`;
    }
    out("result").hidden = !!error;
    out("error").hidden = !error;
    out("error").textContent = error;
    out("summary").textContent = out("live").textContent = text;
  };

  // The form: read, show what applies, keep the URL in step, redraw.
  const read = () => Object.fromEntries([...form.elements].filter((e) => e.name).map((e) => [e.name, e.type == "checkbox" ? (e.checked ? "1" : "0") : e.value]));
  const show = (st) => $$(root, "[data-show]").forEach((e) => { e.hidden = e.dataset.show != st.mode && e.dataset.show != st.model; });
  const update = (event) => {
    // Picking a catalog model fills the custom fields with its shape: a custom model starts from it.
    const A = event && event.target.name == "model" && D.models[event.target.value], f = form.elements;
    if (A) {
      for (const k in ARCH) f[k].value = A[ARCH[k]] || (k == "ffn" ? A.F : 0);
      f.mlp.value = A.sw ? "swiglu" : "gelu";
      f.norm.value = A.ln ? "layernorm" : "rmsnorm";
      f.tied.checked = !!A.tie;
    }
    const st = read();
    writeState(root.id, Object.fromEntries(Object.entries(st).filter(([k, v]) => v != D.defaults[k] && (st.model == "custom" || !(k in ARCH || /^(mlp|norm|tied)$/.test(k))))));
    show(st);
    render(st);
  };
  for (const group of $$(root, "[role=radiogroup]")) {
    const input = $(group, "input");
    setters[input.name] = radioGroup(group, (value) => { input.value = value; update(); });
  }
  for (const [k, v] of Object.entries(readState(root.id))) {
    const e = form.elements[k];
    if (!e || !e.name) continue;
    if (e.type == "checkbox") e.checked = v == "1"; else e.value = v;
    if (e.selectedIndex < 0) e.value = D.defaults[k];
    if (setters[k]) setters[k](v);
  }
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  form.addEventListener("submit", (event) => event.preventDefault());
  $(root, "fieldset").disabled = false;
  $(root, "[data-nojs]").hidden = true;
  copyLink($(root, "[data-copy]"), out("copied"));
  update();
};
}
