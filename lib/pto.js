'use strict';

// The PTO task runtime host library. Every native call of a library runs, in call order, on
// one OS thread that library owns (the device context belongs to the thread that called
// set_device); every method returns a Promise. The state machine in Rust (crates/core/src/pto/host.rs)
// refuses misuse before the library is called.
const native = require('./native');
const { resolvePath } = require('./artifact');

/**
 * Every PTO failure. `code` is stable (`ERR_PTO_*`); `rc` is the library's raw result when
 * it was called and failed (-1, or a positive device-runtime code); `operation` is the C
 * function concerned.
 */
class PtoError extends Error {
  constructor(code, message, { rc = null, operation = null } = {}) {
    super(message);
    this.name = 'PtoError';
    this.code = code;
    this.rc = rc;
    this.operation = operation;
  }
}

const INT32 = 2 ** 31;

function int(operation, what, value) {
  if (!Number.isInteger(value) || value < -INT32 || value >= INT32) {
    throw new PtoError('ERR_PTO_INVALID_ARGUMENT', `${operation}: ${what} must be a 32-bit integer, got ${describe(value)}`, { operation });
  }
  return value;
}

function bytes(operation, what, value) {
  if (!(value instanceof Uint8Array)) {
    throw new PtoError('ERR_PTO_INVALID_ARGUMENT', `${operation}: ${what} must be a Uint8Array (or Buffer), got ${describe(value)}`, { operation });
  }
  return value;
}

function describe(value) {
  if (value === null) return 'null';
  if (typeof value === 'object') return value.constructor ? value.constructor.name : 'object';
  if (typeof value === 'string') return JSON.stringify(value);
  return `${typeof value} ${String(value)}`;
}

/** A native promise's outcome as a value, or the PtoError it carries. */
async function outcome(promise, update) {
  const o = await promise;
  if (update) update(o);
  if (o.code) throw new PtoError(o.code, o.message, { rc: o.rc ?? null, operation: o.operation ?? null });
}

function fromNative(err) {
  if (err && typeof err.code === 'string' && err.code.startsWith('ERR_PTO_')) return new PtoError(err.code, err.message, { operation: 'dlopen' });
  return err;
}

const kCreate = Symbol('create');
let nextRuntimeId = 1;

class PtoRuntime {
  #native;
  #state = 'created';

  constructor(key, nativeLibrary) {
    if (key !== kCreate) throw new TypeError('PtoRuntime is created by PtoLibrary.createRuntime()');
    this.#native = nativeLibrary.createRuntime(nextRuntimeId++);
  }

  /** 'created' | 'initialized' | 'launched' | 'finalized', as of the last settled call. */
  get state() {
    return this.#state;
  }

  #update = (o) => {
    if (o.state) this.#state = o.state;
  };

  /** InitRuntime in 64-byte aligned storage the runtime keeps until finalize() returns. */
  async initialize() {
    return outcome(this.#native.initialize(), this.#update);
  }

  /**
   * launch_runtime. Parameters that would hang the device (aicpuThreadNum outside 1..4,
   * blockDim < 1 or not a multiple of aicpuThreadNum) or that it refuses (blockDim > 24) are
   * refused first. `deviceId` defaults to the library's device and must equal it.
   */
  async launch(params) {
    const op = 'launch_runtime';
    if (typeof params !== 'object' || params === null) throw new PtoError('ERR_PTO_INVALID_ARGUMENT', `${op}: parameters must be an object`, { operation: op });
    const { aicpuThreadNum, blockDim, deviceId, aicpuBinary, aicoreBinary } = params;
    const args = [
      int(op, 'aicpuThreadNum', aicpuThreadNum),
      int(op, 'blockDim', blockDim),
      deviceId === undefined ? undefined : int(op, 'deviceId', deviceId),
      bytes(op, 'aicpuBinary', aicpuBinary),
      bytes(op, 'aicoreBinary', aicoreBinary),
    ];
    return outcome(this.#native.launch(...args), this.#update);
  }

  /**
   * FinalizeRuntime: the library validates the results, then frees everything. Rejects with
   * ERR_PTO_VALIDATION when validation fails (for example a task whose kernel was never
   * registered was skipped). The runtime is finalised either way.
   */
  async finalize() {
    return outcome(this.#native.finalize(), this.#update);
  }
}

class PtoLibrary {
  #native;
  #device = null;

  constructor(key, nativeLibrary) {
    if (key !== kCreate) throw new TypeError('PtoLibrary is created by pto.load()');
    this.#native = nativeLibrary;
  }

  /** The resolved path; null for a library loaded from bytes. */
  get path() {
    return this.#native.path;
  }

  /** sizeof(Runtime), from GetRuntimeSize. */
  get runtimeSize() {
    return this.#native.runtimeSize;
  }

  /** The device set by the first setDevice, or null. */
  get device() {
    return this.#device;
  }

  #update = (o) => {
    if (o.device !== undefined && o.device !== null) this.#device = o.device;
  };

  /** set_device. The first id wins, as in the library; another id later is ERR_PTO_DEVICE. */
  async setDevice(deviceId) {
    return outcome(this.#native.setDevice(int('set_device', 'deviceId', deviceId)), this.#update);
  }

  /** RegisterKernel. The bytes are copied at call time; empty ones are refused. */
  async registerKernel(funcId, binary) {
    const op = 'RegisterKernel';
    return outcome(this.#native.registerKernel(int(op, 'funcId', funcId), bytes(op, 'binary', binary)), this.#update);
  }

  /** A new runtime (no library call yet). One runtime may be live (initialised) at a time. */
  createRuntime() {
    const runtime = new PtoRuntime(kCreate, this.#native);
    Object.defineProperty(runtime, 'library', { value: this });
    return runtime;
  }

  /** The OS thread id every call of this library runs on. */
  get threadId() {
    return this.#native.threadId;
  }
}

const byPath = new Map();

/**
 * Loads a PTO host library: a path (`~` expanded, resolved; the same path gives the same
 * library) or the library's bytes (an anonymous memfd: no file left behind, a new copy each
 * time). Libraries are never unloaded: unloading tears the device down.
 */
function load(library) {
  let nativeLibrary;
  try {
    if (typeof library === 'string') {
      const resolved = resolvePath(library);
      if (byPath.has(resolved)) return byPath.get(resolved);
      nativeLibrary = native.NativePtoLibrary.open(resolved);
      const loaded = new PtoLibrary(kCreate, nativeLibrary);
      byPath.set(resolved, loaded);
      return loaded;
    }
    if (library instanceof Uint8Array) {
      if (library.length === 0) throw new PtoError('ERR_PTO_LOAD', 'pto.load: the library bytes are empty', { operation: 'dlopen' });
      return new PtoLibrary(kCreate, native.NativePtoLibrary.fromBytes(library));
    }
  } catch (err) {
    throw fromNative(err);
  }
  throw new TypeError(`pto.load takes a path or the library's bytes (Uint8Array), got ${describe(library)}`);
}

module.exports = { load, PtoLibrary, PtoRuntime, PtoError };
