// Shared: the model's rules, evaluated in the browser. Python writes every rule once, as an expression
// (builder.model.expr), evaluates it exactly with fractions and sends its JSON here: a number is a constant,
// a string a symbol, [op, ...operands] an operation, ["str", text] a text. This file knows the operators
// and nothing of memory: no formula, no constant, no part name.
// Numbers are exact, as Python's Fractions: a whole number is a number (a BigInt-backed Ratio beyond 2 ** 53), any
// other value a Ratio (a reduced BigInt fraction), so a part rounds up to a whole byte exactly where whole_bytes does.
// A number with a fraction that comes in (an input such as a 0.57 share, an entry of a table) means the decimal it
// is written as, as Python's expr._number reads a float (Fraction(str(x))).
class Ratio {
  constructor(n, d) { this.n = n; this.d = d; }
}
const BIG = (x) => BigInt(x), ZERO = BIG(0), ONE = BIG(1), TEN = BIG(10);
const gcd = (a, b) => { while (b) [a, b] = [b, a % b]; return a; };
// n / d (BigInts, d != 0), reduced: a number where it is whole and safe.
const ratio = (n, d) => {
  if (d < ZERO) [n, d] = [-n, -d];
  const g = gcd(n < ZERO ? -n : n, d);
  if (g > ONE) [n, d] = [n / g, d / g];
  return d == ONE && Number.isSafeInteger(Number(n)) ? Number(n) : new Ratio(n, d);
};
const decimals = new Map();
// A value as the rules read it: a number with a fraction as its decimal (kept: few distinct ones come in).
const exact = (v) => {
  if (typeof v != "number" || Number.isInteger(v)) return v;
  let r = decimals.get(v);
  if (r === undefined) {
    const [, sign, whole, part = "", power = "0"] = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(v));
    const shift = +power - part.length, n = BIG(sign + whole + part);
    decimals.set(v, r = shift >= 0 ? ratio(n * TEN ** BIG(shift), ONE) : ratio(n, TEN ** BIG(-shift)));
  }
  return r;
};
// [numerator, denominator] as BigInts.
const fraction = (x) => (x instanceof Ratio ? [x.n, x.d] : Number.isInteger(x) ? [BIG(x), ONE] : fraction(exact(x)));
// Arithmetic: whole safe numbers as numbers (the common case), anything else through BigInt fractions.
const whole = (a, b, r) => typeof a == "number" && typeof b == "number" && Number.isInteger(a) && Number.isInteger(b) && Number.isSafeInteger(r);
const plus = (a, b) => { const r = a + b; if (whole(a, b, r)) return r; const [p, q] = fraction(a), [u, v] = fraction(b); return ratio(p * v + u * q, q * v); };
const minus = (a, b) => { const r = a - b; if (whole(a, b, r)) return r; const [p, q] = fraction(a), [u, v] = fraction(b); return ratio(p * v - u * q, q * v); };
const times = (a, b) => { const r = a * b; if (whole(a, b, r)) return r; const [p, q] = fraction(a), [u, v] = fraction(b); return ratio(p * u, q * v); };
const over = (a, b) => {
  if (whole(a, b, a) && b && a % b === 0) return a / b;
  const [p, q] = fraction(a), [u, v] = fraction(b);
  if (u == ZERO) throw Error("division by zero");
  return ratio(p * v, q * u);
};
// -1, 0 or 1 as a < b, a == b, a > b.
const order = (a, b) => {
  if (typeof a == "number" && typeof b == "number") return a < b ? -1 : a > b ? 1 : 0;
  const [p, q] = fraction(a), [u, v] = fraction(b), l = p * v, r = u * q;
  return l < r ? -1 : l > r ? 1 : 0;
};
const same = (a, b) => (a instanceof Ratio || b instanceof Ratio ? typeof a != "string" && typeof b != "string" && order(a, b) == 0 : a === b);
const floorOf = (x) => {
  if (typeof x == "number" && Number.isInteger(x)) return x;
  const [n, d] = fraction(x), q = n / d;
  return ratio(q * d > n ? q - ONE : q, ONE);
};
const wholeBytes = (x) => { const f = floorOf(x); return order(f, x) ? plus(f, 1) : f; };
// The nearest double (for text and for the scripts' own arithmetic), as Python's float(Fraction).
const toNumber = (x) => (x instanceof Ratio ? Number(x.n) / Number(x.d) : x);
// f"{x:.{k}f}" as Python prints it (exact ties to even), by way of fmtBytes.
const fixedText = (x, k) => fmtBytes(toNumber(x) * GiB, "GiB", k).replace(/ GiB$/, "");
// str.format's "{0} of {1}" filled with the values. A template is split once into its texts and the places of its
// values (a page fills a few dozen templates again and again): [text, index, text, index, ..., text].
const splitTemplates = new Map();
const fillText = (t, ...v) => {
  let pieces = splitTemplates.get(t);
  if (pieces === undefined) splitTemplates.set(t, pieces = t.split(/\{(\d+)\}/));
  let out = pieces[0];
  for (let i = 1; i < pieces.length; i += 2) out += v[pieces[i]] + pieces[i + 1];
  return out;
};
// expr.bytes_text: whole numbers as they are, others to 3 significant digits without trailing zeros.
const perUnitText = (x) => {
  if (x instanceof Ratio ? x.d == ONE : Number.isInteger(x)) return String(x instanceof Ratio ? x.n : x);
  const text = fixedText(x, Math.max(0, 2 - Math.floor(Math.log10(Math.abs(toNumber(x))))));
  return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
};
// fmt's operands: text as it is, whole numbers without a fraction (Python's expr._text).
const ruleText = (v) => {
  if (typeof v == "string") return v;
  if (v instanceof Ratio ? v.d != ONE : !Number.isInteger(v)) throw Error(`fmt: ${toNumber(v)} is not whole`);
  return String(v instanceof Ratio ? v.n : v);
};
// The symbols a rule reads: a scope (the names an evaluation binds, then the scope around it), innermost first. A
// row's fields shadow the symbols around it, a derived symbol the inputs. Links, not prototype chains: no object
// becomes a prototype (which costs the engine a change of the object's layout on every evaluation) and a lookup
// walks only the few scopes an evaluation opened.
class Scope {
  constructor(o, up) { this.o = o; this.up = up; }
}
const scopeOf = (x) => (x instanceof Scope ? x : new Scope(x, null));
// A symbol's value (undefined where no scope binds it).
const look = (s, name) => {
  for (let t = s; t !== null; t = t.up) {
    const v = t.o[name];
    if (v !== undefined) return v;
  }
  return undefined;
};
// A scope's symbols as one object (outer first, inner ones shadowing).
const flat = (s) => (s.up === null ? { ...s.o } : Object.assign(flat(s.up), s.o));
// A body evaluated in the scope of each row of a table in turn (one scope, its row replaced: nothing kept).
const eachRow = (rows, s, visit) => {
  const scope = new Scope(null, s);
  for (const row of rows) { scope.o = row; visit(row, scope); }
};
const RULE_OPS = {
  "+": (f) => (e) => { let s = 0; for (const g of f) s = plus(s, g(e)); return s; },
  "-": ([a, b]) => (e) => minus(a(e), b(e)),
  "*": (f) => (e) => { let s = 1; for (const g of f) s = times(s, g(e)); return s; },
  "/": ([a, b]) => (e) => over(a(e), b(e)),
  // Python's %: the sign of the divisor.
  "%": ([a, b]) => (e) => { const x = a(e), y = b(e); return minus(x, times(y, floorOf(over(x, y)))); },
  neg: ([a]) => (e) => minus(0, a(e)),
  floor: ([a]) => (e) => floorOf(a(e)),
  ceil: ([a]) => (e) => wholeBytes(a(e)),
  // Every operand evaluated in order, the first smallest (largest) kept.
  min: (f) => (e) => { let m = f[0](e); for (let i = 1; i < f.length; i++) { const v = f[i](e); if (order(v, m) < 0) m = v; } return m; },
  max: (f) => (e) => { let m = f[0](e); for (let i = 1; i < f.length; i++) { const v = f[i](e); if (order(v, m) > 0) m = v; } return m; },
  "==": ([a, b]) => (e) => +same(a(e), b(e)),
  "!=": ([a, b]) => (e) => +!same(a(e), b(e)),
  "<": ([a, b]) => (e) => +(order(a(e), b(e)) < 0),
  "<=": ([a, b]) => (e) => +(order(a(e), b(e)) <= 0),
  ">": ([a, b]) => (e) => +(order(a(e), b(e)) > 0),
  ">=": ([a, b]) => (e) => +(order(a(e), b(e)) >= 0),
  // Operands in order, stopping at the first false (true) one.
  and: (f) => (e) => { for (const g of f) if (!g(e)) return 0; return 1; },
  or: (f) => (e) => { for (const g of f) if (g(e)) return 1; return 0; },
  not: ([a]) => (e) => +!a(e),
  if: ([c, a, b]) => (e) => (c(e) ? a(e) : b(e)),
  in: ([x, ...f]) => (e) => { const v = x(e); for (const g of f) if (same(g(e), v)) return 1; return 0; },
  has: ([t, x]) => (e) => +t(e).includes(x(e)),
  at: ([t, k]) => (e) => {
    const v = t(e)[k(e)];
    if (v === undefined) throw Error(`no entry ${k(e)}`);
    return exact(v);
  },
  get: ([t, k, d]) => (e) => {
    const v = t(e)[k(e)];
    return v === undefined ? d(e) : exact(v);
  },
  // A row's fields shadow the symbols around it (a table's rows all have the same fields).
  sum: ([rows, body]) => (e) => {
    let s = 0;
    eachRow(rows(e), e, (row, scope) => { s = plus(s, body(scope)); });
    return s;
  },
  // The same sums kept apart by a field's value (first-seen order, as an object keeps string keys).
  by: ([rows, field, body]) => (e) => {
    const out = {}, key = field(e);
    eachRow(rows(e), e, (row, scope) => { out[row[key]] = plus(out[row[key]] || 0, body(scope)); });
    return out;
  },
  // A row's fields where its condition holds (a table leaves the others out), and a table of rows.
  row: ([c, ...f]) => (e) => {
    if (!c(e)) return null;
    const out = {};
    for (let i = 0; i < f.length; i += 2) out[f[i]] = f[i + 1](e);
    return out;
  },
  table: (f) => (e) => { const out = []; for (const g of f) { const r = g(e); if (r !== null) out.push(r); } return out; },
  // A row made in the scope of every row of a table (where the made row's condition holds), tables one after
  // another, the first row whose body is largest (null for none), a body in one row's scope, and the first key
  // of a mapping whose value is largest.
  each: ([rows, made]) => (e) => {
    const out = [];
    eachRow(rows(e), e, (row, scope) => {
      const r = made(scope);
      if (r !== null) out.push(r);
    });
    return out;
  },
  concat: (f) => (e) => {
    const out = [];
    for (const g of f) { const t = g(e); if (Array.isArray(t)) for (const r of t) out.push(r); else out.push(t); }
    return out;
  },
  best: ([rows, body]) => (e) => {
    let chosen = null, most = -Infinity;
    eachRow(rows(e), e, (row, scope) => {
      const v = body(scope);
      if (chosen === null || order(v, most) > 0) [chosen, most] = [row, v];
    });
    return chosen;
  },
  within: ([r, body]) => (e) => body(new Scope(r(e), e)),
  top: ([m]) => (e) => {
    let chosen = null, most = -Infinity;
    for (const [k, v] of Object.entries(m(e))) if (chosen === null || order(v, most) > 0) [chosen, most] = [k, v];
    if (chosen === null) throw Error("top: empty");
    return chosen;
  },
  fmt: ([t, ...f]) => (e) => fillText(t(e), ...f.map((g) => ruleText(g(e)))),
  bytes: ([a]) => (e) => perUnitText(a(e)),
  real: ([a]) => (e) => { const v = toNumber(a(e)); return Number.isInteger(v) ? v.toFixed(1) : String(v); },
  fixed: ([a, k]) => (e) => fixedText(a(e), k(e)),
};
// A rule's JSON -> a function of a scope (compiled once, then called on every estimate).
const compileScoped = (rule) => {
  if (typeof rule == "number") return () => rule;
  if (typeof rule == "string") return (e) => {
    const v = look(e, rule);
    if (v === undefined) throw Error(`unknown symbol ${rule}`);
    return exact(v);
  };
  const [op, ...args] = rule;
  if (op == "str") return () => args[0];
  // A row's field names are plain strings (not symbols): only its condition and values are rules.
  if (op == "row") return RULE_OPS.row(args.map((a, i) => (i % 2 ? a : compileScoped(a))));
  if (op == "/" && args.every((a) => typeof a == "number")) { const v = over(args[0], args[1]); return () => v; }
  return RULE_OPS[op](args.map(compileScoped));
};
// A rule's JSON -> a function of the symbols (an object, or a scope a deriver made).
const compileRule = (rule) => {
  const f = compileScoped(rule);
  return (e) => f(scopeOf(e));
};
// A function of the inputs that reuses its result while the inputs a rule set reads are the same (a search for
// the largest batch changes only the batch, which most sets do not read); a table input counts as the same
// while it is the same object, a fraction while it has the same value. The last hundred results are kept, newest
// first (pipeline stages alternate, a reader moves a slider back and forth, a search probes many values); each is
// first compared on the input that told the last two apart, so a miss costs one comparison per result kept.
const memoised = (reads, compute) => {
  const kept = [];
  const n = reads.length, alike = (v, w) => v === w || (v instanceof Ratio && same(v, w));
  let probe = 0;
  return (inputs) => {
    const s = scopeOf(inputs), values = new Array(n);
    for (let i = 0; i < n; i++) values[i] = look(s, reads[i]);
    for (const entry of kept) {
      const held = entry[0];
      if (!alike(held[probe], values[probe])) continue;
      let i = 0;
      while (i < n && alike(held[i], values[i])) i++;
      if (i == n) return entry[1];
      probe = i;
    }
    const hit = [values, compute(inputs)];
    if (kept.unshift(hit) > 100) kept.pop();
    return hit[1];
  };
};
// Each derived symbol in order, on top of the inputs (an object or a scope): a scope whose own object (`o`) holds
// the derived symbols.
const deriver = (symbols) => {
  const derived = symbols.map(([name, rule]) => [name, compileScoped(rule)]);
  return (inputs) => {
    const o = {}, env = new Scope(o, scopeOf(inputs));
    for (const [name, rule] of derived) o[name] = rule(env);
    return env;
  };
};
// partrules.RuleSet.environment: the inputs with each derived symbol added (a set of symbols only), as a scope over
// the inputs (nothing copied; its own object is shared by every call that reads the same inputs: never written).
const ruleScope = ({ reads, symbols }) => {
  const derive = deriver(symbols), values = memoised(reads, (inputs) => derive(inputs).o);
  return (inputs) => new Scope(values(inputs), scopeOf(inputs));
};
// The same as one object, for a script that reads its values.
const ruleSymbols = (set) => {
  const scoped = ruleScope(set);
  return (inputs) => flat(scoped(inputs));
};
// partrules.RuleSet: derived symbols in order, then the parts whose condition holds, as
// [name, whole bytes, per-unit words, source, note, transient], reused while the inputs it reads are the same.
// Without `words` (a search wants bytes only), [name, whole bytes]: the words are worked out when first asked for.
const ruleSet = ({ reads, symbols, parts }) => {
  const derive = deriver(symbols);
  const priced = parts.map(([name, when, bytes, unit, note, source, transient]) =>
    [name, compileRule(when), compileRule(bytes), compileRule(unit), compileRule(note), compileRule(source), transient]);
  const evaluate = memoised(reads, (inputs) => {
    const env = derive(inputs), held = priced.filter((p) => p[1](env));
    return { env, held, bytes: held.map(([name, , bytes]) => [name, toNumber(wholeBytes(bytes(env)))]) };
  });
  return (inputs, words = true) => {
    const result = evaluate(inputs);
    if (!words) return result.bytes.slice();
    result.words ||= result.held.map(([name, , , unit, note, source, transient], i) =>
      [name, result.bytes[i][1], unit(result.env), source(result.env), note(result.env), transient]);
    return result.words.slice();
  };
};
// The model data as it travels (builder/widgets/packed.py): the rules as one string, JSON without quotes around
// names and each name written as a code of one or two characters of CODE_ALPHABET (the `i`-th of `names`: packed.code),
// and each distinct text once, in `texts`, where a rule has ["$", i] for the i-th. Here, once per data (a page's
// widgets share one), before any rule is compiled: each code replaced by its name in quotes (a whole token between
// JSON's punctuation that is not a number), each ["$", i] written as ["str", text], then one JSON.parse: the rules as
// Python's encode wrote them, with the data's other values as they came (two native passes, no walk over the rules).
const CODE_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$";
const codeOf = (i) => {
  const n = CODE_ALPHABET.length;
  if (i < n) return CODE_ALPHABET[i];
  i -= n;
  return CODE_ALPHABET[Math.floor(i / n)] + CODE_ALPHABET[i % n];
};
const unpackedData = new WeakMap();
const unpacked = (data) => {
  let out = unpackedData.get(data);
  if (out === undefined) {
    const { rules, texts, names, ...plain } = data, quoted = texts.map((text) => JSON.stringify(["str", text]));
    const named = new Map(names.map((name, i) => [codeOf(i), JSON.stringify(name)]));
    const json = rules.replace(/(?<![^[{,:])(?!-?\d)[^[\]{},:]+/g, (code) => named.get(code));
    unpackedData.set(data, out = { ...JSON.parse(json.replace(/\["\$",(\d+)\]/g, (_, i) => quoted[i])), ...plain });
  }
  return out;
};
