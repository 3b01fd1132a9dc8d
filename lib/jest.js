'use strict';

// Tensor matchers for Jest: expect.extend(require('zgc-runtime/jest')).
//   expect(tensor).toMatchTensor(expected, { atol, rtol, equalNaN })
// passes when shapes and dtypes agree (where both sides state them) and every element is
// within atol + rtol * |expected| (numpy.allclose's rule and defaults).
const { f16Value } = require('./numbers');
const { didYouMean } = require('./options');
const { shortestF32 } = require('./numbers');

const DEFAULTS = { atol: 1e-8, rtol: 1e-5, equalNaN: true };
const OPTIONS = Object.keys(DEFAULTS);

/** Flat values, shape and dtype of a Tensor, a TypedArray, a (nested) array or a number. */
function describe(value, side) {
  if (typeof value === 'number') return { values: [value], shape: [], dtype: undefined };
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) return { values: Array.from(value, Number), shape: [value.length], dtype: undefined, shapeImplied: true, f32: isFloat32Array(value) };
  if (Array.isArray(value)) {
    const shape = [];
    for (let level = value; Array.isArray(level); level = level[0]) shape.push(level.length);
    const values = value.flat(Infinity).map(Number);
    return { values, shape, dtype: undefined, shapeImplied: shape.length === 1 };
  }
  if (value !== null && typeof value === 'object' && 'data' in value) {
    const inner = describe(value.data, side);
    // f16 data held as bits (f16: 'bits') compares as the values the bits stand for.
    const bits = value.dtype === 'f16' && value.data instanceof Uint16Array;
    return {
      values: bits ? Array.from(value.data, f16Value) : inner.values,
      shape: Array.isArray(value.shape) ? value.shape : inner.shape,
      shapeImplied: !Array.isArray(value.shape) && inner.shapeImplied,
      dtype: value.dtype,
      f32: value.dtype === 'f32' || inner.f32,
    };
  }
  throw new TypeError(`toMatchTensor: the ${side} value must be a Tensor ({ dtype, shape, data }), a TypedArray, an array or a number; got ${value === null ? 'null' : typeof value}`);
}

/** By its tag, not instanceof: a Tensor from the addon may come from another realm than the test's. */
const isFloat32Array = (v) => Object.prototype.toString.call(v) === '[object Float32Array]';

/** A value as a message shows it: an f32 side's as f32 (3.8, not 3.799999952316284). */
const shown = (side, i) => (side.f32 ? shortestF32(side.values[i]) : side.values[i]);

/** Index `i` of a C-order array of `shape`, as [i0, i1, ...]. */
function coordinates(i, shape) {
  const at = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    at.unshift(i % shape[d]);
    i = Math.floor(i / shape[d]);
  }
  return at;
}

function toMatchTensor(received, expected, options = {}) {
  const { printReceived, printExpected, matcherHint } = this.utils;
  const hint = matcherHint('toMatchTensor', undefined, undefined, { isNot: this.isNot });
  if (options === null || typeof options !== 'object') throw new TypeError('toMatchTensor: options must be an object');
  for (const key of Object.keys(options)) if (!OPTIONS.includes(key)) throw new TypeError(`toMatchTensor: no option ${JSON.stringify(key)}${didYouMean(key, OPTIONS)}; it takes ${OPTIONS.join(', ')}`);
  const { atol, rtol, equalNaN } = { ...DEFAULTS, ...options };
  const got = describe(received, 'received');
  const want = describe(expected, 'expected');
  const fail = (text) => ({ pass: false, message: () => `${hint}\n\n${text}` });

  if (got.dtype !== undefined && want.dtype !== undefined && got.dtype !== want.dtype) {
    return fail(`dtype mismatch: received ${printReceived(got.dtype)}, expected ${printExpected(want.dtype)}`);
  }
  // A flat TypedArray or array states a length, not a shape: only the element count must agree.
  const shapesStated = !got.shapeImplied && !want.shapeImplied;
  if ((shapesStated && got.shape.join() !== want.shape.join()) || got.values.length !== want.values.length) {
    return fail(`shape mismatch: received [${got.shape.join(', ')}] (${got.values.length} elements), expected [${want.shape.join(', ')}] (${want.values.length} elements)`);
  }
  const shape = got.shapeImplied ? want.shape : got.shape;
  let first = -1;
  let differing = 0;
  let maxError = 0;
  let maxAt = -1;
  // Stryker disable next-line EqualityOperator: one step past the end compares undefined with undefined, which counts as close
  for (let i = 0; i < got.values.length; i++) {
    const a = got.values[i];
    const b = want.values[i];
    let close;
    // Stryker disable next-line LogicalOperator: with one NaN, the infinity branch below also finds them apart
    if (Number.isNaN(a) || Number.isNaN(b)) close = equalNaN && Number.isNaN(a) && Number.isNaN(b);
    else if (!Number.isFinite(a) || !Number.isFinite(b)) close = a === b;
    else close = Math.abs(a - b) <= atol + rtol * Math.abs(b);
    const error = Math.abs(a - b);
    if (!close) {
      differing++;
      if (first < 0) first = i;
    }
    if (error > maxError) [maxError, maxAt] = [error, i];
  }
  const tolerance = `atol ${atol}, rtol ${rtol}`;
  if (differing === 0) {
    return {
      pass: true,
      message: () => `${hint}\n\nexpected the tensors to differ, but all ${got.values.length} elements are within ${tolerance} (max absolute error ${maxError})`,
    };
  }
  const where = (i) => `index ${i}${shape.length > 1 ? ` ([${coordinates(i, shape).join(', ')}] in shape [${shape.join(', ')}])` : ''}`;
  return fail(
    `${differing} of ${got.values.length} elements differ beyond ${tolerance}\n` +
      `first at ${where(first)}: received ${printReceived(shown(got, first))}, expected ${printExpected(shown(want, first))}\n` +
      `max absolute error ${maxError}${maxAt >= 0 ? ` at ${where(maxAt)}` : ' (the differences are NaN)'}`,
  );
}

module.exports = { toMatchTensor };
