'use strict';

// zgc-runtime/jest: toMatchTensor, used as docs/testing-with-jest.md says, and its failure
// messages (what a user reads when a model's output drifts).
const { load } = require('../..');
const { fixture, f16Bits } = require('../helpers');

expect.extend(require('zgc-runtime/jest'));

/** The message of a failed expectation. */
function failure(fn) {
  try {
    fn();
  } catch (err) {
    return err.message.replace(/\x1b\[[0-9;]*m/g, '');
  }
  throw new Error('the expectation passed');
}

describe('toMatchTensor', () => {
  const rt = load(fixture('add'));
  afterAll(() => rt.close());

  test('a run output against plain numbers, a TypedArray, a Tensor, within numpy.allclose tolerances', () => {
    const [y] = rt.run({ a: [0.1, 0.2, 0.3, 1e6], b: [0.2, 0.1, 0.3, 1] });
    // f32 sums: 0.1f + 0.2f is not 0.3 exactly, but within rtol 1e-5.
    expect(y).toMatchTensor([0.3, 0.3, 0.6, 1000001]);
    expect(y).toMatchTensor(new Float32Array([0.3, 0.3, 0.6, 1000001]));
    expect(y).toMatchTensor({ dtype: 'f32', shape: [4], data: [0.3, 0.3, 0.6, 1000001] });
    expect(y.data).toMatchTensor([0.3, 0.3, 0.6, 1000001]);
    expect(y).not.toMatchTensor([0.3, 0.3, 0.6, 1000002], { rtol: 0, atol: 0.5 });
    expect(y).toMatchTensor([0.3, 0.3, 0.6, 1000002], { atol: 1.5 });
  });

  test('f32 values in a failure print as f32 (3.8), not as the doubles they widen to (3.799999952316284)', () => {
    const [y] = rt.run({ a: [1.3, 2, 3, 4], b: [2.5, 0, 0, 0] });
    expect(String(y.data[0])).toBe('3.799999952316284');
    const message = failure(() => expect(y).toMatchTensor([3.9, 2, 3, 4]));
    expect(message).toContain('first at index 0: received 3.8, expected 3.9');
    // A Float32Array on the expected side prints the same way; a plain array's doubles as they are.
    expect(failure(() => expect([3.9, 2]).toMatchTensor(Float32Array.of(3.8, 2)))).toContain('received 3.9, expected 3.8');
    expect(failure(() => expect([0.30000000000000004]).toMatchTensor([0.5]))).toContain('received 0.30000000000000004, expected 0.5');
    // A Tensor says f32 by its dtype, whatever holds its data; without one, or with other
    // TypedArrays, values print as the doubles they are.
    expect(failure(() => expect({ dtype: 'f32', shape: [1], data: [Math.fround(3.8)] }).toMatchTensor([3.9]))).toContain('received 3.8, expected 3.9');
    expect(failure(() => expect({ shape: [1], data: [0.30000000000000004] }).toMatchTensor([0.5]))).toContain('received 0.30000000000000004, expected 0.5');
    expect(failure(() => expect(Float64Array.of(0.30000000000000004)).toMatchTensor([0.5]))).toContain('received 0.30000000000000004, expected 0.5');
  });

  test('the failure names the first differing index, its values and the max absolute error', () => {
    const [y] = rt.run({ a: [1, 2, 3, 4], b: [0, 0, 0, 0] });
    const message = failure(() => expect(y).toMatchTensor([1, 2.5, 3, 6]));
    expect(message).toContain('2 of 4 elements differ beyond atol 1e-8, rtol 0.00001');
    expect(message).toContain('first at index 1: received 2, expected 2.5');
    expect(message).toContain('max absolute error 2 at index 3');
  });

  test('multi-dimensional indices are given as coordinates too', () => {
    const a = { dtype: 'f32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) };
    const message = failure(() => expect(a).toMatchTensor([[1, 2, 3], [4, 5, 7]]));
    expect(message).toContain('first at index 5 ([1, 2] in shape [2, 3]): received 6, expected 7');
  });

  test('shape and dtype mismatches are named before any value', () => {
    const a = { dtype: 'f32', shape: [2, 3], data: new Float32Array(6) };
    expect(failure(() => expect(a).toMatchTensor({ dtype: 'f32', shape: [3, 2], data: new Float32Array(6) }))).toContain(
      'shape mismatch: received [2, 3] (6 elements), expected [3, 2] (6 elements)',
    );
    expect(failure(() => expect(a).toMatchTensor([1, 2]))).toContain('shape mismatch: received [2, 3] (6 elements), expected [2] (2 elements)');
    expect(failure(() => expect(a).toMatchTensor({ dtype: 'i8', shape: [2, 3], data: new Int8Array(6) }))).toContain('dtype mismatch: received "f32", expected "i8"');
    // A flat array states only a length: it matches any shape of as many elements.
    expect(a).toMatchTensor(new Float32Array(6));
  });

  test('NaN matches NaN unless equalNaN is false; infinities match only themselves', () => {
    expect([NaN, Infinity, -Infinity]).toMatchTensor([NaN, Infinity, -Infinity]);
    expect(failure(() => expect([NaN]).toMatchTensor([NaN], { equalNaN: false }))).toContain('(the differences are NaN)');
    expect([Infinity]).not.toMatchTensor([-Infinity]);
    expect([1e308]).not.toMatchTensor([Infinity]);
  });

  test("f16 outputs held as bits compare as the values they stand for", () => {
    const bits = { dtype: 'f16', shape: [3], data: Uint16Array.from([0.5, -2, 65504].map(f16Bits)) };
    expect(bits).toMatchTensor([0.5, -2, 65504]);
    expect(bits).toMatchTensor({ dtype: 'f16', shape: [3], data: new Float32Array([0.5, -2, 65504]) });
  });

  test('misuse is a TypeError naming the problem', () => {
    expect(() => expect([1]).toMatchTensor([1], { tol: 1 })).toThrow('toMatchTensor: no option "tol" (did you mean "atol"?); it takes atol, rtol, equalNaN');
    expect(() => expect([1]).toMatchTensor([1], { zzzz: 1 })).toThrow('toMatchTensor: no option "zzzz"; it takes atol, rtol, equalNaN');
    expect(() => expect('abc').toMatchTensor([1])).toThrow('toMatchTensor: the received value must be a Tensor ({ dtype, shape, data }), a TypedArray, an array or a number; got string');
  });
});

describe('toMatchTensor, rule by rule', () => {
  test('numbers, TypedArrays, nested arrays and Tensors state shapes as they can', () => {
    expect(3).toMatchTensor(3);
    expect(3).not.toMatchTensor(4);
    expect({ dtype: 'f32', shape: [], data: [3] }).toMatchTensor(3);
    // A flat array or TypedArray states a length: it matches any shape of as many elements.
    expect({ dtype: 'f32', shape: [2, 2], data: [1, 2, 3, 4] }).toMatchTensor([1, 2, 3, 4]);
    expect([1, 2, 3, 4]).toMatchTensor({ shape: [2, 2], data: [1, 2, 3, 4] });
    expect({ data: [1, 2, 3, 4] }).toMatchTensor({ shape: [4, 1], data: [1, 2, 3, 4] });
    // Nested arrays state their shape.
    expect(failure(() => expect({ shape: [4], data: [1, 2, 3, 4] }).toMatchTensor([[1, 2], [3, 4]]))).toContain('shape mismatch: received [4] (4 elements), expected [2, 2] (4 elements)');
    expect(failure(() => expect(new Float32Array(6)).toMatchTensor([1, 2]))).toContain('shape mismatch: received [6] (6 elements), expected [2] (2 elements)');
    // A dtype on one side only is not compared.
    expect([1]).toMatchTensor({ dtype: 'i8', data: [1] });
    expect({ dtype: 'i8', data: Int8Array.of(1) }).toMatchTensor([1]);
    // Bits are decoded only for f16.
    expect({ data: Uint16Array.of(15360) }).toMatchTensor([15360]);
    expect({ dtype: 'f16', data: Uint16Array.of(15360) }).toMatchTensor([1]);
  });

  test('tolerances: equality with zero tolerances, rtol scales with |expected|', () => {
    expect([1, 2]).toMatchTensor([1, 2], { atol: 0, rtol: 0 });
    expect([1000]).toMatchTensor([1000.5], { atol: 0, rtol: 1e-3 });
    expect([1000]).not.toMatchTensor([1000.5], { atol: 0, rtol: 1e-4 });
  });

  test('the failure counts, and names the first difference and the first largest one', () => {
    const message = failure(() => expect([1, 2, 3]).toMatchTensor([2, 2, 4]));
    expect(message).toMatch(/^2 of 3 elements differ beyond/m);
    expect(message).toContain('first at index 0: received 1, expected 2');
    expect(message).toContain('max absolute error 1 at index 0');
    // Coordinates in three dimensions: index 7 of [2, 2, 3] is [1, 0, 1].
    const cube = { shape: [2, 2, 3], data: new Float32Array(12) };
    const expected = new Float32Array(12);
    expected[7] = 1;
    expect(failure(() => expect(cube).toMatchTensor({ shape: [2, 2, 3], data: expected }))).toContain('first at index 7 ([1, 0, 1] in shape [2, 2, 3])');
  });

  test('a .not that fails says why, with the hint of .not', () => {
    const message = failure(() => expect([1, 2, 3, 4]).not.toMatchTensor([1, 2, 3, 4.5], { atol: 1 }));
    expect(message).toContain('expect(received).not.toMatchTensor(expected)');
    expect(message).toContain('expected the tensors to differ, but all 4 elements are within atol 1, rtol 0.00001 (max absolute error 0.5)');
  });

  test('options must be an object; null is no value', () => {
    expect(() => expect([1]).toMatchTensor([1], null)).toThrow('toMatchTensor: options must be an object');
    expect(() => expect([1]).toMatchTensor([1], 5)).toThrow('toMatchTensor: options must be an object');
    expect(() => expect([1]).toMatchTensor('abc')).toThrow('toMatchTensor: the expected value must be a Tensor');
    expect(() => expect(null).toMatchTensor([1])).toThrow(/got null$/);
  });
});

describe('lib/options.js', () => {
  const { nearest, refuseUnknownKeys, parseSize } = require('../../lib/options');

  test('the nearest name: the first of equally near ones; long names allow more edits', () => {
    expect(nearest('siz', ['size', 'sig'])).toBe('size');
    expect(nearest('siz', ['sig', 'size'])).toBe('sig');
    expect(() => refuseUnknownKeys('f()', { deadlineMillis: 1 }, ['deadlineMs'])).toThrow('f() has no option "deadlineMillis" (did you mean "deadlineMs"?); it takes deadlineMs');
    expect(() => refuseUnknownKeys('f()', { xyz: 1 }, ['deadlineMs'])).toThrow('f() has no option "xyz"; it takes deadlineMs');
  });

  test('sizes: numbers and strings only, known units only', () => {
    expect([parseSize(5n), parseSize(true), parseSize(null), parseSize('5q'), parseSize('5 k'), parseSize(1.5)]).toEqual([null, null, null, null, 5120, null]);
  });
});
