'use strict';

// What dtypes.c computes, written again in JavaScript from its comments: o0 = x*wt + wp - wn
// + k[col] in f32 steps, o1 = f16(h + hb[i % 3]), o2 = sat(q + qb[i % 4]), o3 = m ^ mb[i % 3],
// o4 = (s += sum(x)) and o5 = g * 2.

const { f16Round } = require('./helpers');

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

module.exports = { expectDtypes };
