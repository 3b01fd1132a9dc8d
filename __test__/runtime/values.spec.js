'use strict';

// lib/values.js on its own: what each kind of value a user passes becomes before the native
// layer sees it, and the errors for what cannot become one. The end-to-end behaviour (the
// artifact computing with those values) is in runtime/run.spec.js and runtime/fuzz-inputs.spec.js.

const { toTypedArray, forSource, isFloat16Array, f16Bits } = require('../../lib/values');

const src = (dtype, shape = [3], name = 'x') => ({ name, dtype, shape, logicalCount: shape.reduce((a, b) => a * b, 1) });

function refusal(fn) {
  try {
    fn();
  } catch (err) {
    return { name: err.name, code: err.code, message: err.message, source: err.source };
  }
  throw new Error('expected a refusal');
}

/** A TypedArray over 2-byte elements that says it is a Float16Array (Node 20 has none). */
function fakeFloat16(length) {
  const array = new Int16Array(length);
  Object.defineProperty(array, Symbol.toStringTag, { value: 'Float16Array' });
  return array;
}

describe('plain arrays become the TypedArray of the source dtype', () => {
  test('f32, i8 and bool keep each value; f16 goes through f64 so it is rounded once, later', () => {
    const f32 = toTypedArray(src('f32'), [1.5, -2, 1e-3]);
    expect(f32).toBeInstanceOf(Float32Array);
    expect(Array.from(f32)).toEqual([1.5, -2, Math.fround(1e-3)]);
    // 1 + 2^-11 + 2^-30 rounds to 1 + 2^-10 in f16 only if the 2^-30 survives: f32 drops it.
    const tie = 1 + 2 ** -11 + 2 ** -30;
    const f16 = toTypedArray(src('f16'), [tie, 0.1, 65504]);
    expect(f16).toBeInstanceOf(Float64Array);
    expect(Array.from(f16)).toEqual([tie, 0.1, 65504]);
    const i8 = toTypedArray(src('i8'), [-128, 0, 127]);
    expect(i8).toBeInstanceOf(Int8Array);
    expect(Array.from(i8)).toEqual([-128, 0, 127]);
    const bool = toTypedArray(src('bool', [4]), [true, false, 1, 0]);
    expect(bool).toBeInstanceOf(Uint8Array);
    expect(Array.from(bool)).toEqual([1, 0, 1, 0]);
  });

  test('a single number or boolean is a one-element source', () => {
    const one = src('f32', []);
    expect(Array.from(toTypedArray(one, 2.5))).toEqual([2.5]);
    expect(Array.from(toTypedArray(src('bool', [1, 1]), true))).toEqual([1]);
    expect(Array.from(toTypedArray(src('i8', [1]), -7))).toEqual([-7]);
    expect(refusal(() => toTypedArray(src('f32', [2, 2]), 3))).toEqual({
      name: 'ZgcError',
      code: 'ERR_ZGC_SIZE',
      message: 'source "x" expects 4 elements (shape [2, 2]), got a single number',
      source: 'x',
    });
    expect(refusal(() => toTypedArray(src('bool', [2]), false)).message).toBe('source "x" expects 2 elements (shape [2]), got a single boolean');
  });

  test('TypedArrays pass through untouched, whatever their kind: the native layer checks them', () => {
    const given = new Float64Array(3);
    expect(toTypedArray(src('f32'), given)).toBe(given);
    const bytes = new Uint8Array(3);
    expect(toTypedArray(src('f16'), bytes)).toBe(bytes);
  });
});

describe('values that cannot be the source are refused, naming source, element and rule', () => {
  test.each([
    ['f32', [1, 'two', 3], 'element 1 is string, expected a number'],
    ['f16', [null], 'element 0 is null, expected a number'],
    ['f32', [1, 2, [3]], 'element 2 is an array, expected a number'],
    ['f32', [{}], 'element 0 is Object, expected a number'],
    ['f32', [new Map()], 'element 0 is Map, expected a number'],
    ['f32', [Object.create(null)], 'element 0 is an object, expected a number'],
    ['f32', [1n], 'element 0 is bigint, expected a number'],
    ['i8', [128], 'element 0 is 128; i8 values are integers in -128..127'],
    ['i8', [0, -129], 'element 1 is -129; i8 values are integers in -128..127'],
    ['i8', [1.5], 'element 0 is 1.5; i8 values are integers in -128..127'],
    ['i8', [NaN], 'element 0 is NaN; i8 values are integers in -128..127'],
    ['i8', ['3'], 'element 0 is string; i8 values are integers in -128..127'],
    ['i8', [true], 'element 0 is boolean; i8 values are integers in -128..127'],
    ['bool', [true, 2], 'element 1 is 2; bool values are true, false, 0 or 1'],
    ['bool', ['true'], 'element 0 is string; bool values are true, false, 0 or 1'],
    ['bool', [null], 'element 0 is null; bool values are true, false, 0 or 1'],
  ])('%s %j', (dtype, values, detail) => {
    expect(refusal(() => toTypedArray(src(dtype, [values.length], 'w'), values))).toEqual({
      name: 'ZgcError',
      code: 'ERR_ZGC_VALUE',
      message: `source "w": ${detail}`,
      source: 'w',
    });
  });

  test.each([
    ['f32', 'a string', 'string', 'numbers'],
    ['bool', null, 'null', 'booleans'],
    ['i8', new DataView(new ArrayBuffer(3)), 'DataView', 'numbers'],
    ['f16', { length: 3 }, 'Object', 'numbers'],
    ['f32', undefined, 'undefined', 'numbers'],
  ])('%s given %s', (dtype, value, what, elements) => {
    expect(refusal(() => toTypedArray(src(dtype), value))).toEqual({
      name: 'ZgcError',
      code: 'ERR_ZGC_DTYPE',
      message: `source "x" (${dtype}) expects a TypedArray, an array of ${elements} or a number, got ${what}`,
      source: 'x',
    });
  });

  test('an unknown dtype is named', () => {
    expect(refusal(() => toTypedArray(src('u4'), [1, 2, 3]))).toEqual({
      name: 'ZgcError',
      code: 'ERR_ZGC_DTYPE',
      message: 'source "x" has unknown dtype u4',
      source: undefined,
    });
  });
});

describe('Float16Array: known by its tag, handed over as its bits', () => {
  test('the tag decides, not the constructor', () => {
    expect(isFloat16Array(fakeFloat16(2))).toBe(true);
    expect(isFloat16Array(new Uint16Array(2))).toBe(false);
    expect(isFloat16Array(new Float32Array(2))).toBe(false);
  });

  test('an f16 source takes a Float16Array as a Uint16Array over the same memory, reused', () => {
    const array = fakeFloat16(3);
    const bits = forSource(src('f16'), array);
    expect(bits).toBeInstanceOf(Uint16Array);
    expect([bits.buffer, bits.byteOffset, bits.length]).toEqual([array.buffer, 0, 3]);
    bits[1] = 0x3c00;
    expect(array[1]).toBe(0x3c00);
    expect(forSource(src('f16'), array)).toBe(bits);
    // Other sources, and other arrays for f16, pass through.
    expect(forSource(src('f32'), array)).toBe(array);
    const plain = new Uint16Array(3);
    expect(forSource(src('f16'), plain)).toBe(plain);
  });

  test('a view into the middle of a buffer keeps its offset', () => {
    const whole = new Int16Array(8);
    const middle = new Int16Array(whole.buffer, 4, 3);
    const bits = f16Bits(middle, 'here');
    expect([bits.byteOffset, bits.length]).toEqual([4, 3]);
    bits[0] = 7;
    expect(whole[2]).toBe(7);
  });

  test('an array that grew with its resizable buffer gets a new view of its new length', () => {
    const buffer = new ArrayBuffer(4, { maxByteLength: 16 });
    const tracking = new Int16Array(buffer);
    const before = f16Bits(tracking, 'here');
    expect(before.length).toBe(2);
    buffer.resize(12);
    const after = f16Bits(tracking, 'here');
    expect(after).not.toBe(before);
    expect(after.length).toBe(6);
    expect(f16Bits(tracking, 'here')).toBe(after);
  });

  test('a detached buffer is refused, naming what it was for', () => {
    const array = fakeFloat16(4);
    structuredClone(array.buffer, { transfer: [array.buffer] });
    expect(refusal(() => forSource(src('f16', [4], 'h'), array))).toEqual({
      name: 'ZgcError',
      code: 'ERR_ZGC_DETACHED',
      message: 'source "h": the Float16Array\'s buffer was detached or transferred',
      source: undefined,
    });
  });
});
