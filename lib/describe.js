'use strict';

// What a loaded artifact looks like to JavaScript, to a runtime (lib/runtime.js) in-process
// or isolated: its frozen metadata, the arrays its tensors come in, and arrays of the
// caller's realm.

const OUTPUT_ARRAYS = { f32: Float32Array, i8: Int8Array, bool: Uint8Array };
/** The class of a BOUND source's physical storage, by dtype (f16 as its bits). */
const STORAGE_ARRAYS = { f32: Float32Array, f16: Uint16Array, i8: Int8Array, bool: Uint8Array };

function deepFreeze(list) {
  for (const item of list) {
    // Stryker disable next-line ConditionalExpression: freezing a string or number changes nothing
    for (const value of Object.values(item)) if (Array.isArray(value)) Object.freeze(value);
    Object.freeze(item);
  }
  return Object.freeze(list);
}

/**
 * The runtime's metadata from the native `describe()`: documented fields frozen; `internal`
 * keeps the full source descriptions (`logicalCount`, `identity`) for the runtime's own use.
 */
function infoOf(description, fromBytes = false) {
  return {
    path: fromBytes ? null : description.path,
    abiVersion: description.abiVersion,
    fingerprint: BigInt(description.fingerprintHex),
    fingerprintHex: description.fingerprintHex,
    runtimeSize: description.runtimeSize,
    runtimeAlignment: description.runtimeAlignment,
    mutableBytes: description.mutableBytes,
    // `logicalCount` and `identity` stay internal: the documented fields are the contract.
    internal: description.sources,
    sources: deepFreeze(
      description.sources.map((s) => ({
        key: s.key,
        name: s.name,
        kind: s.kind,
        binding: s.binding,
        dtype: s.dtype,
        shape: s.shape,
        strides: s.strides,
        offset: s.offset,
        elementCount: s.elementCount,
        byteCount: s.byteCount,
      })),
    ),
    outputs: deepFreeze(
      description.outputs.map((o) => ({ dtype: o.dtype, shape: o.shape, elementCount: o.elementCount, byteCount: o.byteCount })),
    ),
  };
}

/** Tensor data for an output the native layer wrote: f16 bits become a Float16Array over the same memory when asked. */
function asFloat16(bits) {
  return new globalThis.Float16Array(bits.buffer, bits.byteOffset, bits.length);
}

/**
 * `array` as an instance of `Class` of this module's realm. The addon makes arrays in the
 * realm it was loaded in (Node's main one); code in another realm (a Jest test, a vm
 * context) must get its own `Float32Array`, so such an array is viewed again, without a copy.
 */
function inRealm(array, Class) {
  return array instanceof Class ? array : new Class(array.buffer, array.byteOffset, array.length);
}

/** What every runtime says of its artifact, in-process or isolated, read from its `infoOf` result. */
const ARTIFACT_GETTERS = ['path', 'abiVersion', 'fingerprint', 'fingerprintHex', 'runtimeSize', 'runtimeAlignment', 'mutableBytes', 'sources', 'outputs'];

/** Defines those getters on `Class`'s prototype; `info(runtime)` gives a runtime's description. */
function defineArtifactGetters(Class, info) {
  for (const key of ARTIFACT_GETTERS) {
    Object.defineProperty(Class.prototype, key, {
      get() {
        return info(this)[key];
      },
      configurable: true,
    });
  }
}

module.exports = { defineArtifactGetters, OUTPUT_ARRAYS, STORAGE_ARRAYS, infoOf, asFloat16, inRealm };
