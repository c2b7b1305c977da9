// Shared helper: exact integer arithmetic for the widgets that work in bytes per parameter.
// ceil(a / b) exactly for non-negative integers (BigInt), as a Number: the Python model rounds
// each part up to a whole byte (builder.model.breakdown.whole_bytes).
const ceilDiv = (a, b) => Number((BigInt(a) + BigInt(b) - 1n) / BigInt(b));
