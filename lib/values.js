'use strict';

// From what a user passes (a TypedArray, a plain array, a number) to the TypedArray the
// native layer takes. TypedArrays pass through untouched: the native layer checks their
// kind and length against the source, so there is one place that decides.

const { ZgcError } = require('./errors');

function valueError(source, detail) {
  return new ZgcError('ERR_ZGC_VALUE', `source ${JSON.stringify(source.name)}: ${detail}`, { source: source.name });
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return (value.constructor && value.constructor.name) || 'an object';
  return typeof value;
}

function fromArray(source, values) {
  const n = values.length;
  switch (source.dtype) {
    case 'f32':
    case 'f16': {
      // f16 goes through f64 so that each number is rounded once, straight to f16.
      const out = source.dtype === 'f32' ? new Float32Array(n) : new Float64Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (typeof v !== 'number') throw valueError(source, `element ${i} is ${describe(v)}, expected a number`);
        out[i] = v;
      }
      return out;
    }
    case 'i8': {
      const out = new Int8Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (!Number.isInteger(v) || v < -128 || v > 127) {
          throw valueError(source, `element ${i} is ${typeof v === 'number' ? v : describe(v)}; i8 values are integers in -128..127`);
        }
        out[i] = v;
      }
      return out;
    }
    case 'bool': {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (v === true || v === 1) out[i] = 1;
        else if (v !== false && v !== 0) {
          throw valueError(source, `element ${i} is ${typeof v === 'number' ? v : describe(v)}; bool values are true, false, 0 or 1`);
        }
      }
      return out;
    }
    default:
      throw new ZgcError('ERR_ZGC_DTYPE', `source ${JSON.stringify(source.name)} has unknown dtype ${source.dtype}`);
  }
}

/**
 * Whether `array` (a TypedArray) is a Float16Array. By its tag, not `instanceof`: arrays from
 * another realm (a vm context, Jest's sandbox) have another constructor.
 */
function isFloat16Array(array) {
  return array[Symbol.toStringTag] === 'Float16Array';
}

/** Per Float16Array, the Uint16Array over its bytes, so that a loop reusing one allocates none. */
const bitViews = new WeakMap();

/**
 * The f16 bits of a Float16Array, as the Uint16Array over the same memory that the native
 * layer takes for f16 (binary16 is what both hold): no copy, and a binding of it is zero-copy.
 */
function f16Bits(array, what) {
  let bits = bitViews.get(array);
  if (bits === undefined || bits.length !== array.length) {
    try {
      bits = new Uint16Array(array.buffer, array.byteOffset, array.length);
    } catch {
      throw new ZgcError('ERR_ZGC_DETACHED', `${what}: the Float16Array's buffer was detached or transferred`);
    }
    bitViews.set(array, bits);
  }
  return bits;
}

/** `array` as the native layer takes it for `source`: a Float16Array for f16 as its bits. */
function forSource(source, array) {
  return source.dtype === 'f16' && isFloat16Array(array) ? f16Bits(array, `source ${JSON.stringify(source.name)}`) : array;
}

/** The TypedArray to hand to the native layer for `values` given to `source`. */
function toTypedArray(source, values) {
  if (ArrayBuffer.isView(values) && !(values instanceof DataView)) return forSource(source, values);
  if (Array.isArray(values)) return fromArray(source, values);
  if (typeof values === 'number' || typeof values === 'boolean') {
    if (source.logicalCount !== 1) {
      throw new ZgcError(
        'ERR_ZGC_SIZE',
        `source ${JSON.stringify(source.name)} expects ${source.logicalCount} elements (shape [${source.shape.join(', ')}]), got a single ${typeof values}`,
        { source: source.name },
      );
    }
    return fromArray(source, [values]);
  }
  throw new ZgcError(
    'ERR_ZGC_DTYPE',
    `source ${JSON.stringify(source.name)} (${source.dtype}) expects a TypedArray, an array of ${source.dtype === 'bool' ? 'booleans' : 'numbers'} or a number, got ${describe(values)}`,
    { source: source.name },
  );
}

module.exports = { toTypedArray, forSource, isFloat16Array, f16Bits };
