'use strict';

const os = require('node:os');
const { Runtime, openArtifact, checkOptions, kRunStaged } = require('./runtime');
const { ZgcError } = require('./errors');

const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');

function abortError(signal) {
  return signal.reason !== undefined ? signal.reason : new DOMException('This operation was aborted', 'AbortError');
}

/**
 * `size` runtimes of one artifact (one library, separate instances) behind one `run()`.
 * Each run goes to a free instance; when none is free it waits in a bounded queue.
 */
class Pool {
  #runtimes;
  #free;
  #queue = [];
  #maxQueue;
  #inFlight = 0;
  #closed = false;
  #drained = null;

  constructor(artifact, options = {}) {
    if (typeof options !== 'object' || options === null) throw new TypeError('createPool options must be an object');
    const size = options.size === undefined ? os.availableParallelism() : options.size;
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`pool size must be a positive integer, got ${String(size)}`);
    const maxQueue = options.maxQueue === undefined ? 1024 : options.maxQueue;
    if (!(Number.isInteger(maxQueue) || maxQueue === Infinity) || maxQueue < 0) {
      throw new RangeError(`pool maxQueue must be a non-negative integer, got ${String(maxQueue)}`);
    }
    if (options.setup !== undefined && typeof options.setup !== 'function') throw new TypeError('pool setup must be a function');
    const runtimeOptions = checkOptions({ f16: options.f16 });
    const opened = openArtifact(artifact);
    this.#maxQueue = maxQueue;
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
    this.#free = [...this.#runtimes];
  }

  get size() { return this.#runtimes.length; }
  /** Runs waiting for a free instance. */
  get pending() { return this.#queue.length; }
  /** Runs executing now. */
  get inFlight() { return this.#inFlight; }
  get closed() { return this.#closed; }
  /** The pool's runtimes, for inspection (their metadata is the artifact's). */
  get runtimes() { return this.#runtimes; }

  /** Runs once on a free instance. Inputs are copied now, as with `runAsync`. */
  run(inputs, options) {
    return new Promise((resolve, reject) => {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
      const signal = options === undefined || options === null ? undefined : options.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('pool.run option signal must be an AbortSignal');
      if (signal && signal.aborted) throw abortError(signal);
      if (this.#free.length === 0 && this.#queue.length >= this.#maxQueue) {
        throw new ZgcError('ERR_ZGC_QUEUE_FULL', `pool queue is full: ${this.#queue.length} runs wait for ${this.size} instances (maxQueue ${this.#maxQueue})`);
      }
      const staged = this.#runtimes[0].stageInputs(inputs);
      const job = { staged, resolve, reject, signal, onAbort: null };
      if (signal) {
        job.onAbort = () => {
          const at = this.#queue.indexOf(job);
          if (at >= 0) {
            this.#queue.splice(at, 1);
            reject(abortError(signal));
            this.#settle();
          }
        };
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.#queue.push(job);
      this.#pump();
    });
  }

  #pump() {
    while (this.#free.length > 0 && this.#queue.length > 0) {
      const job = this.#queue.shift();
      if (job.signal) job.signal.removeEventListener('abort', job.onAbort);
      const rt = this.#free.pop();
      this.#inFlight += 1;
      rt[kRunStaged](job.staged).then(job.resolve, job.reject).finally(() => {
        this.#inFlight -= 1;
        this.#free.push(rt);
        this.#pump();
        this.#settle();
      });
    }
  }

  #settle() {
    if (this.#drained && this.#queue.length === 0 && this.#inFlight === 0) this.#drained();
  }

  /** Refuses new runs, lets queued and running ones finish, then closes every instance. */
  close() {
    if (!this.#closed) {
      this.#closed = true;
      this.done = new Promise((resolve) => {
        this.#drained = () => {
          this.#drained = null;
          for (const rt of this.#runtimes) rt.close();
          resolve();
        };
      });
      this.#settle();
    }
    return this.done;
  }

  [asyncDispose]() {
    return this.close();
  }
}

/** A pool of `size` instances of one artifact (default: one per CPU). */
function createPool(artifact, options) {
  return new Pool(artifact, options);
}

module.exports = { Pool, createPool };
