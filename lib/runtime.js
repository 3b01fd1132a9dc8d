'use strict';

const native = require('./native');

const { NativeStaged } = native;
// Raw N-API functions serve every runtime's run() and inline async runs in this thread (see
// src/js_fast.rs): same arguments; the inline one also times the run for the offload policy.
const [fastRun, fastRunInline] = native.fastRunFunction();
/**
 * What the inline function returns: ran and stays inline, ran and leaves, did not run, or
 * (isolated) still going after a short wait, for the instance's worker to wait for.
 */
const INLINE_STAY = 0;
const INLINE_LEAVE = 1;
const INLINE_NOT_RUN = 2;
const INLINE_GOING = 3;
/** Outputs up to this size come back as slices of a per-runtime scratch array: a fresh small
 * array made in JavaScript costs far less than one whose memory native code must pin. */
const SMALL_OUTPUT_BYTES = 64;

/**
 * `fastRun(args[0], ..., args[n - 1])` for a fixed n. A call with a spread array takes V8's
 * slow path into native code (Builtin_HandleApiCall); a call of fixed arity takes the fast one.
 */
const callers = new Map();
function callerOf(fn, arity) {
  let byArity = callers.get(fn);
  // Stryker disable next-line ConditionalExpression: a cache; a miss every time only costs speed
  if (byArity === undefined) callers.set(fn, (byArity = new Map()));
  let caller = byArity.get(arity);
  // Stryker disable next-line ConditionalExpression: a cache; a miss every time only costs speed
  if (caller === undefined) {
    const list = Array.from({ length: arity }, (_, i) => `a[${i}]`).join(', ');
    caller = new Function('f', `return (a) => f(${list});`)(fn); // eslint-disable-line no-new-func
    byArity.set(arity, caller);
  }
  return caller;
}
const { ZgcError, fromNative } = require('./errors');
const { toTypedArray, forSource, isFloat16Array, f16Bits } = require('./values');
const { refuseUnknownKeys } = require('./options');
const { positive } = require('./isolation');
const { IN_PROCESS_ONLY, checkOptions, open } = require('./artifact');
const { nativeStats, withFaults } = require('./stats');
const { OUTPUT_ARRAYS, STORAGE_ARRAYS, infoOf, asFloat16, inRealm, defineArtifactGetters } = require('./describe');

const { hasOwn } = Object;
// Stryker disable next-line StringLiteral: the fallback of hosts before Symbol.dispose (Node < 20.4), none of which we test on
const dispose = Symbol.dispose || Symbol.for('nodejs.dispose');


/**
 * What pools and async runs use of a runtime, as module-internal functions rather than keys on
 * the object: an inline run through another handle, the handle, the Tensors of a finished run.
 * Runtime's static block sets them, since only the class body reaches its private methods.
 */
let runInline;
let handleOf;
let tensorsOf;
let faultsOf;

class Runtime {
  #native;
  /** The `openArtifact` result `{ native, fromBytes, users }`, shared by the runtimes of a pool. */
  #opened;
  #info;
  #byName;
  /** Per output, the TypedArray class the native layer writes (f16: Float32Array, or Uint16Array bits). */
  #outputArrays;
  /** Per output, null, or `asFloat16` for f16 outputs given back as Float16Array. */
  #wrap;
  /** Outputs of dtype f16, whose `into` arrays may be Float16Arrays. */
  #f16Outputs;
  #f16Bits;
  #float16;
  #closed = false;
  /** The offload option, and whether the next async run goes inline (the native policy's last word). */
  #offload;
  #inline;
  /**
   * Arguments of the fast run call, reused at a fixed length (resizing an array each call
   * costs more than the call): [handle, outputCount, pairCount, ...outputs, ...(index, values)].
   */
  #args;
  #handle;
  #call;
  #callInline;
  #scratch;
  /** An isolated instance's region (its storage() views), made with the first. */
  #region = null;
  /** The queue of an isolated run an inline call left going: its worker waits for it. */
  #going = null;
  // Stryker disable next-line ObjectLiteral,ArrayDeclaration: an empty cache misses as this one does
  #into = { arrays: null, items: [], tensors: null };

  /** @internal Use `load()`. */
  constructor(artifact, options) {
    const { native, fromBytes } = artifact;
    this.#opened = artifact;
    const description = native.describe();
    const checked = checkOptions(options);
    try {
      this.#native = native.instantiate(checked.offload);
    } catch (err) {
      // Stryker disable next-line ConditionalExpression: other users exist only in a pool, and a pool whose instance fails closes them all
      if (artifact.users === 0) native.release();
      throw fromNative(err);
    }
    this.#going = goingQueue(this.#native);
    artifact.users++;
    this.#offload = checked.offload;
    this.#inline = checked.offload === 'never';
    const f16Option = checked.f16;
    this.#float16 = f16Option === 'float16';
    this.#f16Bits = f16Option !== 'float32';
    const f16 = this.#f16Bits ? Uint16Array : Float32Array;
    this.#outputArrays = description.outputs.map((o) => (o.dtype === 'f16' ? f16 : OUTPUT_ARRAYS[o.dtype]));
    this.#wrap = description.outputs.map((o) => (o.dtype === 'f16' && this.#float16 ? asFloat16 : null));
    this.#f16Outputs = description.outputs.flatMap((o, i) => (o.dtype === 'f16' ? [i] : []));
    this.#byName = new Map(description.sources.map((s, i) => [s.name, i]));
    this.#args = new Array(3 + description.outputs.length + 2 * description.sources.length).fill(undefined);
    this.#handle = this.#native.handle();
    this.#args[0] = this.#handle;
    this.#args[1] = description.outputs.length;
    this.#call = callerOf(fastRun, this.#args.length);
    this.#callInline = callerOf(fastRunInline, this.#args.length);
    // Stryker disable next-line all: which outputs use a scratch array changes speed, not results
    this.#scratch = description.outputs.map((o, i) => (o.byteCount <= SMALL_OUTPUT_BYTES ? new this.#outputArrays[i](o.elementCount) : null));
    this.#info = infoOf(description, fromBytes);
  }

  // path, abiVersion, fingerprint, ..., sources, outputs: lib/describe.js defines them.
  static {
    defineArtifactGetters(Runtime, (rt) => rt.#info);
  }
  get closed() { return this.#closed; }

  /** The offload option, and what it does now: `{ mode, inline }` (see also `stats()`). */
  get offload() {
    return { mode: this.#offload, inline: this.#inline };
  }

  /** `'process'`: this runtime's instance runs in a child process (absent in-process). */
  get isolate() {
    return this.#opened.isolated ? 'process' : undefined;
  }

  /** An isolated runtime's process id now (it changes when the instance restarts). */
  get pid() {
    if (!this.#opened.isolated || this.#closed) return undefined;
    return this.#native.faults().pid ?? undefined;
  }

  /** Async runs of this runtime: completed, waiting, in flight, latencies, inline vs offloaded. */
  stats() {
    const stats = nativeStats(this.#native.stats());
    return this.#opened.isolated ? withFaults(stats, [this.#native.faults()]) : stats;
  }

  #open() {
    // Async runs pending: the native layer refuses the call with ERR_ZGC_BUSY.
    if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed');
  }

  #index(name) {
    const index = this.#byName.get(name);
    if (index === undefined) {
      const known = [...this.#byName.keys()].map((n) => JSON.stringify(n)).join(', ');
      throw new ZgcError('ERR_ZGC_UNKNOWN_SOURCE', `artifact has no source named ${JSON.stringify(String(name))} (its sources: ${known})`, {
        source: String(name),
      });
    }
    return index;
  }

  /** Gives a source logical values (C order); OWNED sources copy, BOUND ones are packed. */
  set(name, values) {
    this.#open();
    const index = this.#index(name);
    const array = toTypedArray(this.#info.internal[index], values);
    try {
      this.#native.set(index, array);
    } catch (err) {
      throw fromNative(err);
    }
  }

  /** Binds a TypedArray holding a BOUND source's physical storage, without copying. */
  bind(name, storage) {
    this.#open();
    const index = this.#index(name);
    const source = this.#info.internal[index];
    if (!ArrayBuffer.isView(storage) || storage instanceof DataView) {
      throw new ZgcError(
        'ERR_ZGC_DTYPE',
        `source ${JSON.stringify(source.name)} (${source.dtype}) binds a TypedArray of its physical storage, got ${storage === null ? 'null' : typeof storage}`,
        { source: source.name },
      );
    }
    try {
      this.#native.bind(index, forSource(source, storage));
    } catch (err) {
      throw fromNative(err);
    }
  }

  /**
   * Runs the graph once, after applying `inputs`; returns every output. With
   * `{ into: [array, ...] }` the outputs are copied into your arrays (validated like
   * inputs), and passing the same `into` array again returns the same Tensor objects, so a
   * steady-state loop allocates nothing.
   */
  run(inputs, options) {
    this.#open();
    const into = options === undefined || options === null ? undefined : this.#checkInto(options);
    const n = this.#fill(inputs, into);
    try {
      // This run's deadline (isolated), taken once by the run.
      if (options !== undefined && options !== null && options.timeoutMs !== undefined) this.#native.setRunTimeout(positive('option timeoutMs', options.timeoutMs));
      this.#call(this.#args);
    } catch (err) {
      this.#release(n);
      // A deadline set for a run that never started is not the next one's.
      if (this.#opened.isolated) this.#native.setRunTimeout(undefined);
      throw fromNative(err);
    }
    return this.#collect(n, into);
  }

  /** Puts outputs and inputs into the argument array; returns how far it is filled. */
  #fill(inputs, into) {
    const args = this.#args;
    const outputCount = this.#outputArrays.length;
    for (let i = 0; i < outputCount; i++) {
      args[3 + i] = into !== undefined ? into[i] : this.#scratch[i] || new this.#outputArrays[i](this.#info.outputs[i].elementCount);
    }
    const f16 = this.#f16Outputs;
    if (into !== undefined && f16.length !== 0) {
      for (let k = 0; k < f16.length; k++) {
        const i = f16[k];
        if (ArrayBuffer.isView(into[i]) && isFloat16Array(into[i])) args[3 + i] = f16Bits(into[i], `output ${i}`);
      }
    }
    const first = 3 + outputCount;
    let n = first;
    if (inputs !== undefined && inputs !== null) {
      if (typeof inputs !== 'object') throw new TypeError(`run() inputs must be an object of source names to values, got ${typeof inputs}`);
      // Own enumerable string keys, as Object.keys() (and so runAsync and pools) gives them:
      // for-in also walks the prototype chain, so its inherited names are skipped.
      const names = Object.keys(inputs);
      for (let k = 0; k < names.length; k++) {
        const name = names[k];
        const index = this.#index(name);
        args[n++] = index;
        args[n++] = toTypedArray(this.#info.internal[index], inputs[name]);
      }
    }
    args[2] = (n - first) / 2;
    return n;
  }

  /** The Tensors of a call that just returned. */
  #collect(n, into) {
    if (into !== undefined) {
      this.#release(n);
      return this.#intoTensors(into);
    }
    const args = this.#args;
    const outputCount = this.#outputArrays.length;
    const tensors = new Array(outputCount);
    for (let i = 0; i < outputCount; i++) {
      const info = this.#info.outputs[i];
      const scratch = this.#scratch[i];
      const data = scratch ? scratch.slice() : args[3 + i];
      tensors[i] = { dtype: info.dtype, shape: info.shape, data: this.#wrap[i] === null ? data : this.#wrap[i](data) };
    }
    this.#release(n);
    return tensors;
  }

  /**
   * @internal An async run done inline: the Tensors, or undefined when it must queue instead
   * (runs are pending, and it must not overtake them). `handle` counts it in a pool's queue.
   */
  #runInline(inputs, handle, timeoutMs) {
    this.#open();
    const n = this.#fill(inputs, undefined);
    const args = this.#args;
    args[0] = handle;
    let code;
    try {
      // An isolated run's deadline, kept if it is left going.
      if (timeoutMs !== undefined) this.#native.setRunTimeout(timeoutMs);
      code = this.#callInline(args);
    } catch (err) {
      this.#release(n);
      throw fromNative(err);
    } finally {
      args[0] = this.#handle;
      if (timeoutMs !== undefined) this.#native.setRunTimeout(undefined);
    }
    if (code === INLINE_NOT_RUN) {
      this.#release(n);
      return undefined;
    }
    if (code === INLINE_GOING) {
      this.#release(n);
      return { leave: true, going: true };
    }
    return { leave: code === INLINE_LEAVE, tensors: this.#collect(n, undefined) };
  }

  static {
    runInline = (rt, inputs, handle, timeoutMs) => rt.#runInline(inputs, handle, timeoutMs);
    handleOf = (rt) => rt.#handle;
    tensorsOf = (rt, arrays) => rt.#tensors(arrays);
    faultsOf = (rt) => rt.#native.faults();
  }

  /** The argument array holds no input or output past the call. */
  // Stryker disable all: clearing lets the GC take inputs sooner, which no in-process test can see
  #release(n) {
    const args = this.#args;
    for (let i = 3; i < n; i++) args[i] = undefined;
  }
  // Stryker restore all

  #checkInto(options) {
    if (typeof options !== 'object') throw new TypeError(`run() options must be an object, got ${typeof options}`);
    refuseUnknownKeys('run()', options, this.#opened.isolated ? ['into', 'timeoutMs'] : ['into'], IN_PROCESS_ONLY);
    const { into } = options;
    if (into === undefined) return undefined;
    if (!Array.isArray(into) || into.length !== this.#outputArrays.length) {
      throw new TypeError(`run() option into must be an array of ${this.#outputArrays.length} TypedArrays, one per output`);
    }
    return into;
  }

  #intoTensors(into) {
    const cache = this.#into;
    // Stryker disable next-line ConditionalExpression: another array of the same items may share their Tensors
    let same = cache.arrays === into;
    for (let i = 0; same && i < into.length; i++) same = cache.items[i] === into[i];
    if (!same) {
      cache.arrays = into;
      cache.items = [...into];
      cache.tensors = into.map((data, i) => Object.freeze({ dtype: this.#info.outputs[i].dtype, shape: this.#info.outputs[i].shape, data }));
    }
    return cache.tensors;
  }

  /**
   * Runs off the JavaScript thread (or inline, when that is cheaper: see `offload`). Inputs
   * are copied now; storage bound with bind() is copied when the run starts; storage from
   * storage() is read in place. Runs of one runtime keep call order. An aborted signal
   * cancels a run that has not started.
   */
  runAsync(inputs, options) {
    try {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed');
      if (options !== undefined && options !== null) refuseUnknownKeys('runAsync()', options, this.#opened.isolated ? ['signal', 'timeoutMs'] : ['signal'], IN_PROCESS_ONLY);
      const signal = options === undefined || options === null ? undefined : options.signal;
      const timeoutMs = options === undefined || options === null ? undefined : positive('option timeoutMs', options.timeoutMs);
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('runAsync option signal must be an AbortSignal');
      // abort() without a reason gives the signal a DOMException AbortError.
      if (signal && signal.aborted) throw signal.reason;
      const after = () => {
        this.#inline = this.#native.inline;
      };
      if (this.#inline) {
        const ran = this.#runInline(inputs, this.#handle, timeoutMs);
        if (ran !== undefined) {
          if (ran.leave) this.#inline = false;
          // An isolated run longer than a short wait: its worker waits for it.
          if (ran.going) return submit(this, this.#going, null, this.#f16Bits, signal, after);
          return Promise.resolve(ran.tensors);
        }
      }
      return submit(this, this.#native, this.stageInputs(inputs, this.#native), this.#f16Bits, signal, after, 0, undefined, timeoutMs);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** @internal Storage of BOUND source `name` that runs borrow one at a time (a sequence's state): zeros, or `initial` packed. */
  lendable(name, initial) {
    const index = this.#index(name);
    const array = initial === undefined ? undefined : toTypedArray(this.#info.internal[index], initial);
    try {
      return this.#opened.native.lendable(index, array);
    } catch (err) {
      throw fromNative(err);
    }
  }

  /** @internal Lends `lendable` to the run `staged` is for, for that run only. */
  stageLent(staged, lendable) {
    this.#opened.native.stageLent(staged, lendable);
  }

  /**
   * @internal Copies `inputs` for a run that starts later: into `target`'s staging (a
   * runtime applies them at once when it is idle), by default the artifact's (any instance).
   */
  stageInputs(inputs, target = this.#opened.native) {
    const staged = new NativeStaged();
    if (inputs === undefined || inputs === null) return staged;
    if (typeof inputs !== 'object') throw new TypeError(`run inputs must be an object of source names to values, got ${typeof inputs}`);
    for (const name of Object.keys(inputs)) {
      const index = this.#index(name);
      const array = toTypedArray(this.#info.internal[index], inputs[name]);
      try {
        target.stage(staged, index, array);
      } catch (err) {
        throw fromNative(err);
      }
    }
    return staged;
  }

  /** @internal Tensors for the output arrays of a finished async run. */
  #tensors(arrays) {
    const outputs = this.#info.outputs;
    // Stryker disable next-line ArrayDeclaration: a preallocated length only saves growing it
    const tensors = new Array(arrays.length);
    for (let i = 0; i < arrays.length; i++) {
      const data = this.#wrap[i] === null ? inRealm(arrays[i], this.#outputArrays[i]) : this.#wrap[i](arrays[i]);
      tensors[i] = { dtype: outputs[i].dtype, shape: outputs[i].shape, data };
    }
    return tensors;
  }

  /**
   * Binds new zeroed storage that the runtime owns to a BOUND source and returns it as a
   * TypedArray of its physical layout: zero-copy for sync and async runs, and no JavaScript
   * action (transfer, GC) can free it under the artifact.
   */
  storage(name) {
    this.#open();
    const index = this.#index(name);
    if (this.#opened.isolated) return this.#regionStorage(index);
    let storage;
    try {
      storage = this.#native.storage(index);
    } catch (err) {
      throw fromNative(err);
    }
    // With f16: 'float16', f16 storage is a Float16Array over the same (runtime-owned) memory.
    if (this.#float16 && this.#info.internal[index].dtype === 'f16') return asFloat16(storage);
    return inRealm(storage, STORAGE_ARRAYS[this.#info.internal[index].dtype]);
  }

  /** An isolated instance's storage: its slot of the region, which the child reads in place. */
  #regionStorage(index) {
    const source = this.#info.internal[index];
    let slot;
    try {
      slot = this.#native.storageSlot(index);
      this.#region ??= this.#native.region();
    } catch (err) {
      throw fromNative(err);
    }
    if (this.#region === null) throw new ZgcError('ERR_ZGC_NAPI', 'this host forbids external buffers, which storage() of an isolated runtime needs');
    const Class = STORAGE_ARRAYS[source.dtype];
    const view = new Class(this.#region, slot[0], slot[1] / Class.BYTES_PER_ELEMENT);
    return this.#float16 && source.dtype === 'f16' ? asFloat16(view) : view;
  }

  /** Output `index` of the last run, as a new Tensor. */
  output(index) {
    this.#open();
    if (!Number.isInteger(index) || index < 0 || index >= this.#outputArrays.length) {
      throw new RangeError(`output index ${String(index)} is out of range: the artifact has ${this.#outputArrays.length} outputs`);
    }
    return this.#copyOutput(index);
  }

  #copyOutput(index) {
    const info = this.#info.outputs[index];
    const data = new this.#outputArrays[index](info.elementCount);
    try {
      this.#native.copyOutput(index, data);
    } catch (err) {
      throw fromNative(err);
    }
    return { dtype: info.dtype, shape: info.shape, data: this.#wrap[index] === null ? data : this.#wrap[index](data) };
  }

  /**
   * Deinitialises the runtime and releases bound storage. Safe to call twice. Async runs not
   * started yet reject with ERR_ZGC_CLOSED; one in flight finishes first, then deinit runs.
   */
  close() {
    // Stryker disable next-line ConditionalExpression: a second close only drops the artifact's handle early; each instance holds the library itself
    if (!this.#closed) {
      this.#closed = true;
      // The region's mapping goes once no storage() view of it is left.
      this.#region = null;
      this.#native.close();
      // The last runtime of an artifact unloads it now, not when finalizers get to run.
      if (--this.#opened.users === 0) this.#opened.native.release();
    }
  }

  [dispose]() {
    this.close();
  }
}

/**
 * `queue` (a runtime's or a pool's native queue) as `submit` takes it for the isolated run an
 * inline call left going there: its promise comes from the worker that waits for it.
 */
function goingQueue(queue) {
  return { submit: (staged, f16Bits, id) => queue.resume(f16Bits, id), cancel: (id, reason) => queue.cancel(id, reason) };
}

/** Ids of async runs that carry an AbortSignal, by which they are cancelled natively. */
let lastId = 0;

/**
 * Hands staged inputs to `queue` (a runtime's or a pool's native queue) and returns the
 * Tensors' promise. `owner` makes the Tensors (and stays reachable while the run is pending);
 * `after` runs once it settles.
 */
/**
 * `timing`, when given, gets the run's `queueWaitMs` and `computeMs` (serve's spans);
 * `timeoutMs` is an isolated run's deadline.
 */
function submit(owner, queue, staged, f16Bits, signal, after, priority = 0, timing = undefined, timeoutMs = undefined) {
  const id = signal ? ++lastId : 0;
  let onAbort;
  if (signal) {
    onAbort = () => queue.cancel(id, signal.reason);
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: settling removes the listener anyway, and a signal aborts once
    signal.addEventListener('abort', onAbort, { once: true });
  }
  const settled = signal
    ? () => {
        signal.removeEventListener('abort', onAbort);
        after();
      }
    : after;
  return queue.submit(staged, f16Bits, id, priority, timeoutMs).then(
    (arrays) => {
      settled();
      // An isolated run aborted after it finished, before its answer came here: dropped, as
      // one aborted while it ran (docs/isolation.md).
      if (signal && signal.aborted && owner.isolate === 'process') throw signal.reason;
      if (timing !== undefined) {
        timing.queueWaitMs = arrays.queueWaitMs;
        timing.computeMs = arrays.computeMs;
      }
      return tensorsOf(owner, arrays);
    },
    (err) => {
      settled();
      // Aborted while it ran on an isolated instance: its process was killed for it.
      if (signal && err && err.code === 'ERR_ZGC_ABORTED') throw signal.reason;
      throw fromNative(err);
    },
  );
}

/** Loads an artifact from a path or from its bytes, validates it and starts one runtime. */
function load(artifact, options) {
  const checked = checkOptions(options);
  return new Runtime(open(artifact, options || {}, 'load()'), checked);
}

module.exports = { load, Runtime, runInline, handleOf, faultsOf, submit, goingQueue };
