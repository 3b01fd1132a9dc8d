'use strict';

// Numbers as people read them: an f32 value as the shortest decimal that reads back to the
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

module.exports = { shortestF32, shortestF32s };
