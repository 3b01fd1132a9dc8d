'use strict';

// Numbers as people read them: an f16 value from its bits (the one decoder of the package), and
// an f32 value as the shortest decimal that reads back to the
// same f32 (3.8, not the double 3.799999952316284). The digits are the Rust core's (ryu, ties
// to even), the ones serve writes its JSON with, so the CLI, the matchers and serve agree.

/** The shortest decimals of f32 `values` (any array of f32 values), as numbers. */
function shortestF32s(values) {
  // Loaded on first use: the matchers module is required before any runtime is.
  const { tensorJson } = require('./native');
  const f32 = values instanceof Float32Array ? values : Float32Array.from(values);
  // JSON of NaN and the infinities is Python's spelling: put the values themselves back.
  const text = tensorJson(f32).replace(/-?Infinity|NaN/g, '0');
  return JSON.parse(text).map((v, i) => (Number.isFinite(f32[i]) ? v : f32[i]));
}

/** One f32 value's shortest decimal, as a number. */
const shortestF32 = (x) => shortestF32s([x])[0];

/** The value of IEEE 754 binary16 `bits` (how .npy f16 data and f16 outputs are held). */
function f16Value(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/**
 * The bits of `v` as a binary float of `exponent` and `mantissa` bits, rounded to nearest,
 * ties to even, straight from the double (never through f32: that would round twice). NaN is
 * the quiet NaN.
 */
function floatBits(v, exponent, mantissa) {
  const top = (1 << exponent) - 1;
  if (Number.isNaN(v)) return (top << mantissa) | (1 << (mantissa - 1));
  const sign = v < 0 || Object.is(v, -0) ? 1 << (exponent + mantissa) : 0;
  const a = Math.abs(v);
  const bias = top >> 1;
  // Halfway between the largest finite value and the next power of two: from there, infinity.
  if (a >= (2 - 2 ** -(mantissa + 1)) * 2 ** bias) return sign | (top << mantissa);
  // Subnormal; the carry into 1 << mantissa is the smallest normal's bits.
  if (a < 2 ** (1 - bias)) return sign | evenRound(a * 2 ** (mantissa + bias - 1));
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  const frac = evenRound((a / 2 ** e - 1) * 2 ** mantissa);
  return sign | (((e + bias) << mantissa) + frac);
}

/** The binary16 bits of `v`, rounded to nearest, ties to even (NaN as the quiet NaN 0x7e00). */
const f16Bits = (v) => floatBits(v, 5, 10);

/** The bfloat16 bits of `v`, rounded to nearest, ties to even (NaN as 0x7fc0). */
const bf16Bits = (v) => floatBits(v, 8, 7);

/** `q` (exact, non-negative) rounded to the nearest integer, ties to even. */
function evenRound(q) {
  const f = Math.floor(q);
  const d = q - f;
  return d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f;
}

let f16Table = null;

/** f16 bits to values, a whole array at once, by a table of all 65,536 (made once). */
function f16Values(bits) {
  // Stryker disable next-line ConditionalExpression: making the table again on every call only costs time
  if (f16Table === null) {
    f16Table = new Float32Array(65536);
    // Stryker disable next-line EqualityOperator: a typed array drops a write past its end
    for (let b = 0; b < 65536; b++) f16Table[b] = f16Value(b);
  }
  const out = new Float32Array(bits.length);
  // Stryker disable next-line EqualityOperator: a typed array drops a write past its end
  for (let i = 0; i < bits.length; i++) out[i] = f16Table[bits[i]];
  return out;
}

module.exports = { shortestF32, shortestF32s, f16Value, f16Values, f16Bits, bf16Bits };
