'use strict';

// shortestF32 (the CLI's and the matchers' f32 text): the shortest decimal that reads back to
// the same f32, checked against its definition digit by digit.
const { shortestF32, shortestF32s } = require('../../lib/numbers');
const { rng } = require('../helpers');

/** Significant digits of a decimal number's shortest JS text (1.25e-7 has 3). */
const digitsOf = (v) => v.toExponential().split('e')[0].replace(/^-/, '').replace('.', '').length;

test('every f32 prints as a decimal that reads back to it, and no shorter decimal does', () => {
  const next = rng(42);
  const bits = new Uint32Array(20000);
  for (let i = 0; i < bits.length; i++) bits[i] = Math.floor(next() * 2 ** 32);
  // Edge values too: the smallest subnormal, the largest finite, 0.1, one ulp past 1, 2^24 + 2.
  const edges = [1, 0x7f7fffff, 0x3dcccccd, 0x3f800001, 0x4b800001, 0x00800000, 0x007fffff];
  const values = Float32Array.from([...new Float32Array(bits.buffer), ...new Float32Array(Uint32Array.from(edges).buffer)].filter(Number.isFinite));
  expect(values.length).toBeGreaterThan(19000);
  const shown = shortestF32s(values);
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    const v = shown[i];
    const n = digitsOf(v);
    // It reads back, and with one digit fewer nothing does (toPrecision rounds to the nearest).
    const ok = Math.fround(v) === x && (n === 1 || Math.fround(Number(x.toPrecision(n - 1))) !== x) && n <= 9;
    if (!ok) throw new Error(`f32 ${x}: printed ${v} (${n} digits)`);
  }
});

test('a tie between two shortest decimals goes to the even digit, as serve writes it', () => {
  // 361759.125 lies midway between 361759.12 and 361759.13, both of which read back.
  expect(Math.fround(361759.125)).toBe(361759.125);
  expect(shortestF32(361759.125)).toBe(361759.12);
});

test('non-finite values and zeros pass through', () => {
  expect(shortestF32s([NaN, Infinity, -Infinity, 0, -0])).toEqual([NaN, Infinity, -Infinity, 0, -0]);
});
