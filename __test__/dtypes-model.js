'use strict';

// What dtypes.c computes, written again in JavaScript from its comments: o0 = x*wt + wp - wn
// + k[col] in f32 steps, o1 = f16(h + hb[i % 3]), o2 = sat(q + qb[i % 4]), o3 = m ^ mb[i % 3],
// o4 = (s += sum(x)) and o5 = g * 2.

const { f16Round, rng, randomF32, randomInts } = require('./helpers');

const K = [0.5, -1, 2];
const f = Math.fround;

function expectDtypes(values, state) {
  const { x, wt, wp, wn, h, hb, q, qb, m, mb, g } = values;
  const o0 = Array.from({ length: 6 }, (_, k) => f(f(f(f(x[k] * wt[k]) + wp[k]) - wn[k]) + K[k % 3]));
  const o1 = Array.from({ length: 4 }, (_, k) => f16Round(f16Round(h[k]) + f16Round(hb[k % 3])));
  const o2 = Array.from({ length: 5 }, (_, k) => Math.max(-128, Math.min(127, q[k] + qb[k % 4])));
  const o3 = Array.from({ length: 5 }, (_, k) => Number(m[k]) ^ Number(mb[k % 3]));
  let s = state;
  for (let k = 0; k < 6; k++) s = f(s + x[k]);
  return { outputs: [o0, o1, o2, o3, [s], [f(g * 2)]], state: s };
}

function randomDtypeValues(seed) {
  const next = rng(seed);
  // Multiples of 2^-10 within +-8 keep f16 sums exact in f32 (so C rounds once, as we do).
  const halfs = (n) => randomInts(next, n, -8192, 8192).map((v) => v / 1024);
  return {
    x: randomF32(next, 6),
    wt: randomF32(next, 6),
    wp: randomF32(next, 6),
    wn: randomF32(next, 6),
    h: halfs(4),
    hb: halfs(3),
    q: randomInts(next, 5, -128, 127),
    qb: randomInts(next, 4, -128, 127),
    m: randomInts(next, 5, 0, 1).map(Boolean),
    mb: randomInts(next, 3, 0, 1).map(Boolean),
    g: Math.fround(next() * 100),
  };
}

module.exports = { expectDtypes, randomDtypeValues };
