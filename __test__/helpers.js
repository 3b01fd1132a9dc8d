'use strict';

// Independent reference arithmetic for the tests: nothing here calls the runtime.

const path = require('node:path');
const { fixture } = require('./fixtures/manifest');

/** A small deterministic generator (mulberry32), so failures reproduce. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function roundHalfEven(v) {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** IEEE 754 binary16 bits of `x`, rounded to nearest even straight from the double. */
function f16Bits(x) {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | 0x7c00;
  if (a < 2 ** -14) return sign | roundHalfEven(a / 2 ** -24); // 1024 carries into the exponent
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  if (2 ** (e + 1) <= a) e += 1;
  let m = roundHalfEven((a / 2 ** e - 1) * 1024);
  if (m === 1024) {
    m = 0;
    e += 1;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | m;
}

/** The value of binary16 `bits`. */
function f16Value(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const e = (bits >> 10) & 0x1f;
  const m = bits & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

const f16Round = (x) => f16Value(f16Bits(x));

/** Physical index of logical element `linear` (C order) by the ABI's formula. */
function physicalIndex(shape, strides, offset, linear) {
  let at = offset;
  for (let a = shape.length - 1; a >= 0; a--) {
    at += (linear % shape[a]) * strides[a];
    linear = Math.floor(linear / shape[a]);
  }
  return at;
}

/** Physical storage (`elementCount` long) holding `logical` in the source's layout. */
function toPhysical(source, logical, ArrayType) {
  const out = new ArrayType(source.elementCount);
  for (let k = 0; k < logical.length; k++) out[physicalIndex(source.shape, source.strides, source.offset, k)] = logical[k];
  return out;
}

function randomF32(next, n, scale = 8) {
  return Float32Array.from({ length: n }, () => Math.fround((next() * 2 - 1) * scale));
}

function randomInts(next, n, lo, hi) {
  return Array.from({ length: n }, () => lo + Math.floor(next() * (hi - lo + 1)));
}

/** The Python of .venv-ref (scripts/prepare-reference.js): the PyPI peers the tests compare with. */
const PYTHON = path.join(__dirname, '..', '.venv-ref', 'bin', 'python');

module.exports = { PYTHON, fixture, rng, f16Bits, f16Value, f16Round, physicalIndex, toPhysical, randomF32, randomInts };
