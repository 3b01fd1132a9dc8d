'use strict';

const os = require('node:os');
const { Runtime, runInline, handleOf, faultsOf, submit, goingQueue } = require('./runtime');
const { IN_PROCESS_ONLY, checkOptions, open } = require('./artifact');
const { nativeStats, withFaults } = require('./stats');
const { positive } = require('./isolation');
const { ZgcError } = require('./errors');
const { NativePool } = require('./native');
const { refuseUnknownKeys, priorityOf } = require('./options');
const { Sequence, Holders, lends } = require('./sequence');

// Stryker disable next-line StringLiteral: the fallback of hosts before Symbol.asyncDispose (Node < 20.4), none of which we test on
const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');
/** What a pool's inline run gives when it went to an isolated instance and is still going. */
const GOING = Symbol('going');
/** Set by Pool's static block: an in-process pool's inline run (see `runNow`). */
let poolRunNow;
/** Set by Pool's static block: `run` with its times (see `runTimed`). */
let poolRunTimed;

/**
 * `size` runtimes of one artifact (one library, separate instances, or one process each with
 * `isolate: 'process'`) behind one `run()`. The queue and its dispatch are native
 * (crates/core/src/executor/): each instance has a worker thread that takes the next waiting
 * run as soon as it is free, with no trip through JavaScript between runs; a graph cheaper
 * than that trip runs inline instead (`offload`).
 */
class Pool {
  #runtimes;
  #native;
  #inlineHandle;
  #inline;
  #f16Bits;
  #closed = false;
  #done = null;
  /** What a direct sequence's instance is made with, and the instances sequences hold. */
  #opened;
  #runtimeOptions;
  #setup;
  #holders = null;

  constructor(artifact, options = {}) {
    if (typeof options !== 'object' || options === null) throw new TypeError('createPool options must be an object');
    refuseUnknownKeys('createPool()', options, ['size', 'maxQueue', 'setup', 'f16', 'offload', 'isolate', 'timeoutMs', 'maxMemoryMb', 'startTimeoutMs']);
    const size = options.size === undefined ? os.availableParallelism() : options.size;
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`pool size must be a positive integer, got ${String(size)}`);
    const maxQueue = options.maxQueue === undefined ? 1024 : options.maxQueue;
    if (!(Number.isInteger(maxQueue) || maxQueue === Infinity) || maxQueue < 0) {
      throw new RangeError(`pool maxQueue must be a non-negative integer, got ${String(maxQueue)}`);
    }
    if (options.setup !== undefined && typeof options.setup !== 'function') throw new TypeError('pool setup must be a function');
    const runtimeOptions = checkOptions({ f16: options.f16, offload: options.offload });
    const opened = open(artifact, options, 'createPool()');
    this.#opened = opened;
    this.#runtimeOptions = runtimeOptions;
    this.#setup = options.setup;
    this.#runtimes = [];
    try {
      for (let i = 0; i < size; i++) {
        const rt = new Runtime(opened, runtimeOptions);
        this.#runtimes.push(rt);
        if (options.setup) options.setup(rt, i);
      }
    } catch (err) {
      for (const rt of this.#runtimes) rt.close();
      throw err;
    }
    this.#native = NativePool.create(this.#runtimes.map((rt) => handleOf(rt)), maxQueue, runtimeOptions.offload);
    this.#going = goingQueue(this.#native);
    this.#inlineHandle = this.#native.inlineHandle();
    this.#inline = this.#native.inline;
    this.#f16Bits = runtimeOptions.f16 !== 'float32';
  }

  get size() { return this.#runtimes.length; }
  /** Runs waiting for a free instance. */
  get pending() { return this.#native.figures()[1]; }
  /** Runs executing now (or starting on a free instance). */
  get inFlight() { return this.#native.figures()[0]; }
  get closed() { return this.#closed; }
  /** The pool's runtimes, for inspection (their metadata is the artifact's). */
  get runtimes() { return this.#runtimes; }
  /** 'process' for a pool of isolated instances (absent in-process). */
  get isolate() { return this.#opened.isolated ? 'process' : undefined; }

  /** What a service exports as metrics: completed runs, queue depth, in flight, latencies, inline vs offloaded. */
  stats() {
    const stats = nativeStats(this.#native.stats());
    return this.#opened.isolated ? withFaults(stats, this.#runtimes.map((rt) => faultsOf(rt))) : stats;
  }

  static {
    poolRunNow = (pool, inputs) => pool.#runNow(inputs, false);
    poolRunTimed = (pool, inputs, options, timing) => pool.#run(inputs, options, timing);
  }

  /**
   * Throws as run() rejects; undefined when the run cannot go inline now, GOING when it went
   * to an isolated instance and is still going (its worker waits for it: `#going`). Only
   * `run` takes that: `runNow` (serve's) leaves an isolated pool's runs to it.
   */
  #runNow(inputs, mayGo = true, timeoutMs = undefined) {
    if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
    if (!this.#inline || (!mayGo && this.#opened.isolated)) return undefined;
    const ran = runInline(this.#runtimes[0], inputs, this.#inlineHandle, timeoutMs);
    if (ran === undefined) return undefined;
    if (ran.leave) this.#inline = false;
    return ran.going ? GOING : ran.tensors;
  }

  /** The queue of an isolated run an inline call left going: its worker waits for it. */
  #going = null;

  /** Runs once on a free instance. Inputs are copied now, as with `runAsync`. */
  run(inputs, options) {
    return this.#run(inputs, options, undefined);
  }

  /** `run`, and the run's queue wait and compute into `timing` when it is given. */
  #run(inputs, options, timing) {
    try {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
      if (options !== undefined && options !== null) refuseUnknownKeys('pool.run()', options, this.#opened.isolated ? ['signal', 'priority', 'timeoutMs'] : ['signal', 'priority'], IN_PROCESS_ONLY);
      const signal = options === undefined || options === null ? undefined : options.signal;
      const timeoutMs = options === undefined || options === null ? undefined : positive('option timeoutMs', options.timeoutMs);
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('pool.run option signal must be an AbortSignal');
      const priority = priorityOf('pool.run()', options);
      if (signal && signal.aborted) throw signal.reason;
      // Inline only while nothing waits: no run is overtaken, whatever its priority.
      const started = timing === undefined ? 0 : performance.now();
      const now = this.#runNow(inputs, true, timeoutMs);
      const after = () => {
        this.#inline = this.#native.inline;
      };
      if (now === GOING) return submit(this.#runtimes[0], this.#going, null, this.#f16Bits, signal, after, priority, timing);
      if (now !== undefined) {
        if (timing !== undefined) {
          timing.queueWaitMs = 0;
          timing.computeMs = performance.now() - started;
        }
        return Promise.resolve(now);
      }
      const first = this.#runtimes[0];
      return submit(
        first,
        this.#native,
        first.stageInputs(inputs),
        this.#f16Bits,
        signal,
        () => {
          this.#inline = this.#native.inline;
        },
        priority,
        timing,
        timeoutMs,
      );
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * A sequence of runs that keeps its own STATE between them (lib/sequence.js): its runs go
   * in call order, each on any free instance, lent the sequence's state.
   */
  sequence(options) {
    if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
    const first = this.#runtimes[0];
    if (lends(first, this.#opened.isolated)) {
      const queue = (staged, signal, priority) =>
        submit(first, this.#native, staged, this.#f16Bits, signal, () => {
          this.#inline = this.#native.inline;
        }, priority);
      return new Sequence(this, first, { submit: queue }, options);
    }
    // OWNED state: each sequence holds a new instance, made as the pool's are.
    this.#holders ??= new Holders(this.#runtimes.length, () => new Runtime(this.#opened, this.#runtimeOptions), this.#setup);
    return new Sequence(this, first, { holders: this.#holders }, options);
  }

  /** Refuses new runs, lets queued and running ones finish, then closes every instance. */
  close() {
    if (this.#done === null) {
      this.#closed = true;
      if (this.#holders !== null) this.#holders.close();
      this.#native.stop();
      this.#done = this.#native.settled().then(() => {
        this.#native.close();
        for (const rt of this.#runtimes) rt.close();
      });
    }
    return this.#done;
  }

  [asyncDispose]() {
    return this.close();
  }
}

/** A pool of `size` instances of one artifact (default: one per CPU). */
function createPool(artifact, options) {
  return new Pool(artifact, options);
}

/**
 * The server's tiny-model path, without a promise: a pool's inline run's tensors now, or
 * undefined where the run must queue. Throws as run() rejects.
 */
function runNow(pool, inputs) {
  if (pool instanceof Pool) return poolRunNow(pool, inputs);
  if (pool.closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
  return undefined;
}

/**
 * `pool.run(inputs, options)` that also sets `timing.queueWaitMs` and `timing.computeMs`, the
 * run's own times, once it resolves (serve's trace spans), in-process or isolated.
 */
function runTimed(pool, inputs, options, timing) {
  if (pool instanceof Pool) return poolRunTimed(pool, inputs, options, timing);
  // Anything else that runs like a pool (serve's batched versions): no times of its own.
  return pool.run(inputs, options);
}

module.exports = { Pool, createPool, runNow, runTimed };
