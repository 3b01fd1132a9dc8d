'use strict';

// `isolate: 'process'`: each instance lives in a host child process (crates/core/src/isolate).
// Tensors cross through a shared region; a crash, a timeout or a memory cap fails the one run
// the child was executing, and the instance starts again. This is the facade, with the API of
// Runtime and Pool; `lane.js` is one instance, `dispatch.js` the queue, `protocol.js` the
// region's numbers (the core's), `options.js` the options and the host program.

const { ZgcError } = require('../errors');
const { toTypedArray, forSource } = require('../values');
const { OUTPUT_ARRAYS, infoOf, asFloat16, inRealm, defineArtifactGetters } = require('../describe');
const { isolatedStats } = require('../stats');
const { Lane, Counters, RUN } = require('./lane');
const { Dispatch, submitRun } = require('./dispatch');
const { positive, isolationOptions, hostPath } = require('./options');
const { refuseUnknownKeys } = require('../options');
const { Sequence, Holders } = require('../sequence');

/** What a runtime and a pool of isolated instances share: values in, tensors out. */
/** Set by IsolatedPool's static block: `pool.run` that also sets the run's times in `timing` (lib/pool.js: runTimed). */
let isolatedRunTimed;

class Shape {
  constructor(description, f16) {
    this.info = infoOf(description);
    this.byName = new Map(description.sources.map((s, i) => [s.name, i]));
    this.f16Bits = f16 !== 'float32';
    this.float16 = f16 === 'float16';
    const f16Class = this.f16Bits ? Uint16Array : Float32Array;
    this.outputArrays = description.outputs.map((o) => (o.dtype === 'f16' ? f16Class : OUTPUT_ARRAYS[o.dtype]));
  }

  index(name) {
    const index = this.byName.get(name);
    if (index === undefined) {
      const known = [...this.byName.keys()].map((n) => JSON.stringify(n)).join(', ');
      throw new ZgcError('ERR_ZGC_UNKNOWN_SOURCE', `artifact has no source named ${JSON.stringify(String(name))} (its sources: ${known})`, { source: String(name) });
    }
    return index;
  }

  /** `[index, TypedArray]` per input, checked for names and kinds (the child checks the rest). */
  entries(inputs) {
    const given = new Map();
    if (inputs === undefined || inputs === null) return { entries: [], given };
    if (typeof inputs !== 'object') throw new TypeError(`run inputs must be an object of source names to values, got ${typeof inputs}`);
    const entries = Object.keys(inputs).map((name) => {
      const index = this.index(name);
      const array = toTypedArray(this.info.internal[index], inputs[name]);
      if (array === inputs[name]) given.set(index, array);
      return [index, array];
    });
    return { entries, given };
  }

  tensorsOf(arrays) {
    return arrays.map((array, i) => {
      const o = this.info.outputs[i];
      let data = inRealm(array, this.outputArrays[i]);
      if (o.dtype === 'f16' && this.float16) data = asFloat16(data);
      return { dtype: o.dtype, shape: o.shape, data };
    });
  }

  storageView(source, view) {
    return this.float16 && source.dtype === 'f16' ? asFloat16(view) : view;
  }
}

const dispose = Symbol.dispose || Symbol.for('nodejs.dispose');
const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');

/** A runtime whose instance lives in a child process: the API of `Runtime`. */
class IsolatedRuntime {
  #lane;
  #shape;
  #dispatch;
  #counters;
  #options;
  #closed = false;
  #pooled;

  /** @internal Use `load(path, { isolate: 'process' })`. */
  constructor(artifactPath, options, lane, pooled) {
    this.#options = options;
    this.#counters = lane ? lane.counters : new Counters();
    this.#lane = lane || new Lane(artifactPath, options, this.#counters, 0);
    this.#lane.facade = this;
    this.#shape = new Shape(this.#lane.description, options.f16);
    this.#pooled = Boolean(pooled);
    this.#dispatch = pooled ? null : new Dispatch([this.#lane], Infinity);
  }

  // path, abiVersion, fingerprint, ..., sources, outputs: lib/describe.js defines them.
  static {
    defineArtifactGetters(IsolatedRuntime, (rt) => rt.#shape.info);
  }
  get closed() { return this.#closed; }
  get offload() { return { mode: this.#options.offload || 'auto', inline: false }; }
  /** `'process'`: this runtime's instance runs in a child process. */
  get isolate() { return 'process'; }
  /** The pid of the instance's process now (it changes when the instance restarts). */
  get pid() { return this.#lane.pid; }

  stats() {
    return isolatedStats(this.#counters, this.#dispatch || { queue: [], inFlight: this.#lane.inflight.length }, [this.#lane]);
  }

  #open() {
    if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed');
  }

  set(name, values) {
    this.#open();
    const index = this.#shape.index(name);
    this.#lane.set(index, toTypedArray(this.#shape.info.internal[index], values));
  }

  bind(name, storage) {
    this.#open();
    const index = this.#shape.index(name);
    const source = this.#shape.info.internal[index];
    if (!ArrayBuffer.isView(storage) || storage instanceof DataView) {
      throw new ZgcError('ERR_ZGC_DTYPE', `source ${JSON.stringify(source.name)} (${source.dtype}) binds a TypedArray of its physical storage, got ${storage === null ? 'null' : typeof storage}`, {
        source: source.name,
      });
    }
    this.#lane.bind(index, forSource(source, storage));
  }

  storage(name) {
    this.#open();
    const index = this.#shape.index(name);
    const source = this.#shape.info.internal[index];
    return this.#shape.storageView(source, this.#lane.storage(index));
  }

  /** Runs synchronously, blocking on the child (up to `timeoutMs`, after which it is killed). */
  run(inputs, options) {
    this.#open();
    let into;
    let timeoutMs = this.#options.timeoutMs;
    if (options !== undefined && options !== null) {
      if (typeof options !== 'object') throw new TypeError(`run() options must be an object, got ${typeof options}`);
      refuseUnknownKeys('run()', options, ['into', 'timeoutMs']);
      into = options.into;
      if (options.timeoutMs !== undefined) timeoutMs = positive('option timeoutMs', options.timeoutMs);
      if (into !== undefined && (!Array.isArray(into) || into.length !== this.#shape.info.outputs.length)) {
        throw new TypeError(`run() option into must be an array of ${this.#shape.info.outputs.length} TypedArrays, one per output`);
      }
    }
    const lane = this.#lane;
    lane.ready();
    const { entries } = this.#shape.entries(inputs);
    lane.writeInputs(entries);
    const started = performance.now();
    try {
      lane.calling = true;
      try {
        lane.callSync(RUN, 0, timeoutMs);
      } finally {
        lane.calling = false;
      }
    } catch (err) {
      this.#counters.failed++;
      throw err;
    }
    // As an in-process sync run: no wait for the instance.
    this.#counters.latencies.record(true, 0, performance.now() - started);
    this.#counters.completed++;
    const tensors = this.#shape.tensorsOf(lane.outputsOf(lane.lastSeq, this.#shape.f16Bits));
    if (into === undefined) return tensors;
    return tensors.map((t, i) => {
      const target = into[i];
      if (!ArrayBuffer.isView(target) || target.length !== t.data.length) throw new TypeError(`run() option into[${i}] must be a TypedArray of ${t.data.length} elements`);
      target.set(t.data);
      return Object.freeze({ dtype: t.dtype, shape: t.shape, data: target });
    });
  }

  runAsync(inputs, options) {
    try {
      this.#open();
      if (options !== undefined && options !== null) refuseUnknownKeys('runAsync()', options, ['signal', 'timeoutMs']);
      if (this.#pooled) throw new ZgcError('ERR_ZGC_BUSY', 'a pool runtime runs through pool.run()');
      return submitRun(this.#shape, this.#dispatch, inputs, options, this.#options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  output(index) {
    this.#open();
    if (!Number.isInteger(index) || index < 0 || index >= this.#shape.info.outputs.length) {
      throw new RangeError(`output index ${String(index)} is out of range: the artifact has ${this.#shape.info.outputs.length} outputs`);
    }
    return this.#shape.tensorsOf([this.#lane.native.output(this.#lane.lastSeq, index, this.#shape.f16Bits)])[0];
  }

  /** Ends the child. Runs waiting reject with ERR_ZGC_CLOSED; one in flight ends with it. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#dispatch) {
      this.#dispatch.stopped = true;
      for (const job of this.#dispatch.queue.splice(0)) job.reject(new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed'));
    }
    const lane = this.#lane;
    // Runs handed to the child finish first (as in-process, a started run is not cut off).
    if (lane.busy) lane.closeWhenIdle = true;
    else lane.close();
  }

  [dispose]() {
    this.close();
  }
}

/** A pool of isolated instances: the API of `Pool`. */
class IsolatedPool {
  static {
    isolatedRunTimed = (pool, inputs, options, timing) => {
      if (pool.#closed) return Promise.reject(new ZgcError('ERR_ZGC_CLOSED', 'pool is closed'));
      try {
        if (options !== undefined && options !== null) refuseUnknownKeys('pool.run()', options, ['signal', 'timeoutMs', 'priority']);
        return submitRun(pool.#shape, pool.#dispatch, inputs, options, pool.#options, timing);
      } catch (err) {
        return Promise.reject(err);
      }
    };
  }

  #lanes;
  #runtimes;
  #dispatch;
  #counters = new Counters();
  #shape;
  #options;
  #closed = false;
  #done = null;
  #path;
  #setup;
  #holders = null;

  constructor(artifactPath, size, maxQueue, setup, options) {
    this.#options = options;
    this.#path = artifactPath;
    this.#setup = setup;
    this.#lanes = [];
    this.#runtimes = [];
    try {
      for (let i = 0; i < size; i++) {
        const lane = new Lane(artifactPath, options, this.#counters, i);
        this.#lanes.push(lane);
        const rt = new IsolatedRuntime(artifactPath, options, lane, true);
        this.#runtimes.push(rt);
        if (setup) setup(rt, i);
        lane.setup = setup || null;
      }
    } catch (err) {
      for (const lane of this.#lanes) lane.close();
      throw err;
    }
    this.#shape = new Shape(this.#lanes[0].description, options.f16);
    this.#dispatch = new Dispatch(this.#lanes, maxQueue);
  }

  get size() { return this.#lanes.length; }
  get pending() { return this.#dispatch.queue.length; }
  get inFlight() { return this.#dispatch.inFlight; }
  get closed() { return this.#closed; }
  get runtimes() { return this.#runtimes; }
  get isolate() { return 'process'; }

  stats() {
    return isolatedStats(this.#counters, this.#dispatch, this.#lanes);
  }

  /**
   * A sequence of runs that keeps its own STATE (lib/sequence.js): on isolated instances it
   * holds an instance of its own, a new process with the pool's setup, from its first run
   * to its close. An instance that dies ends its sequence.
   */
  sequence(options) {
    if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
    this.#holders ??= new Holders(this.#lanes.length, () => new IsolatedRuntime(this.#path, this.#options), this.#setup);
    return new Sequence(this, this.#runtimes[0], { holders: this.#holders }, options);
  }

  run(inputs, options) {
    try {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
      if (options !== undefined && options !== null) refuseUnknownKeys('pool.run()', options, ['signal', 'timeoutMs', 'priority']);
      return submitRun(this.#shape, this.#dispatch, inputs, options, this.#options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Refuses new runs, lets queued and running ones finish, then ends every child. */
  close() {
    if (this.#done === null) {
      this.#closed = true;
      this.#dispatch.stopped = true;
      const held = this.#holders === null ? Promise.resolve() : this.#holders.close();
      this.#done = Promise.all([this.#dispatch.whenSettled(), held]).then(() => {
        for (const lane of this.#lanes) lane.close();
      });
    }
    return this.#done;
  }

  [asyncDispose]() {
    return this.close();
  }
}

const runTimedIsolated = (pool, inputs, options, timing) => isolatedRunTimed(pool, inputs, options, timing);

module.exports = { IsolatedRuntime, IsolatedPool, isolationOptions, hostPath, runTimedIsolated };
