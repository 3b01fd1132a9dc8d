'use strict';

// pool.sequence(): runs of a pool that keep their own STATE between them, as Triton's sequence
// batcher does for a client's sequence. Two strategies, by where the state lives:
// - lent (in-process pools whose STATE sources are all BOUND): each sequence keeps storage of
//   its own (zeros, or initial values), and every run of it borrows that storage on whichever
//   instance runs it, without a copy; the instance's own binding comes back after the run
//   (crates/core/src/executor/, `Feed::Lend`). Any number of sequences share the instances.
// - direct (OWNED state, or an isolated pool): the state lives inside an instance, so a
//   sequence holds an instance of its own from its first run to its close, a new one (its init
//   is what starts the state) with the pool's setup. At most the pool's size are held at once;
//   a sequence waits up to `waitMs` for one. An isolated instance that dies ends its sequence.
// Either way a sequence's runs go one after another, in call order.

const { ZgcError } = require('./errors');
const { refuseUnknownKeys, priorityOf } = require('./options');
const { toTypedArray } = require('./values');

const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');

const sequenceError = (message) => new ZgcError('ERR_ZGC_SEQUENCE', message);

/** Errors after which an isolated instance starts again, its state gone. */
const LOST_STATE = new Map([
  ['ERR_ZGC_INSTANCE_CRASHED', "its instance's process died"],
  ['ERR_ZGC_MEMORY_LIMIT', "its instance's process passed maxMemoryMb and was killed"],
  ['ERR_ZGC_TIMEOUT', "its instance's process passed timeoutMs and was killed"],
]);

/** The STATE sources of `runtime`'s artifact; none is an error. */
function stateSources(runtime) {
  const states = runtime.sources.filter((s) => s.kind === 'state');
  if (states.length === 0) throw sequenceError(`${runtime.path} has no STATE source: a sequence keeps STATE between its runs`);
  return states;
}

/** Whether a pool's sequences borrow storage (every STATE BOUND, in-process) or hold an instance. */
const lends = (runtime, isolated) => !isolated && stateSources(runtime).every((s) => s.binding === 'bound');

/**
 * The instances direct sequences hold, one each: at most `size` at once. `make()` makes one (a
 * new runtime of the pool's artifact), then the pool's `setup(runtime, slot)` runs on it.
 */
class Holders {
  #make;
  #setup;
  #free;
  #waiters = [];
  #held = new Set();
  #closed = false;

  constructor(size, make, setup) {
    this.#make = make;
    this.#setup = setup;
    this.#free = Array.from({ length: size }, (_, i) => i);
  }

  get held() {
    return this.#held.size;
  }

  /** An instance of a free slot, `{ slot, runtime }`, waiting up to `waitMs` for one. */
  acquire(waitMs) {
    if (this.#closed) return Promise.reject(new ZgcError('ERR_ZGC_CLOSED', 'pool is closed'));
    if (this.#free.length > 0) return this.#take(this.#free.shift());
    // Stryker disable next-line EqualityOperator: a wait of 0 ms ends in the same refusal
    if (waitMs <= 0) return Promise.reject(this.#full(0));
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, timer: null };
      waiter.timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        reject(this.#full(waitMs));
      }, waitMs);
      this.#waiters.push(waiter);
    });
  }

  #full(waitMs) {
    return new ZgcError('ERR_ZGC_QUEUE_FULL', `every instance is held by a sequence (${this.#held.size}), and none was let go within waitMs ${waitMs}: a sequence over OWNED state, or on isolated instances, holds one from its first run to its close`);
  }

  #take(slot) {
    let runtime;
    try {
      runtime = this.#make();
      if (this.#setup) this.#setup(runtime, slot);
    } catch (err) {
      if (runtime !== undefined) runtime.close();
      this.#free.push(slot);
      return Promise.reject(err);
    }
    const held = { slot, runtime };
    this.#held.add(held);
    return Promise.resolve(held);
  }

  /** Closes `held`'s instance and gives its slot to the longest waiting sequence. */
  release(held) {
    if (!this.#held.delete(held)) return;
    held.runtime.close();
    const next = this.#waiters.shift();
    if (next === undefined) {
      this.#free.push(held.slot);
      return;
    }
    clearTimeout(next.timer);
    this.#take(held.slot).then(next.resolve, next.reject);
  }

  /** Refuses new holders and sequences waiting for one, and closes the instances held (the pool closes). */
  close() {
    this.#closed = true;
    for (const w of this.#waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new ZgcError('ERR_ZGC_CLOSED', 'pool is closed'));
    }
    return Promise.all([...this.#held].map((h) => (this.#held.delete(h), h.runtime.close())));
  }
}

class Sequence {
  #pool;
  #runtime;
  #strategy;
  #states;
  #stateNames;
  #initial;
  #waitMs;
  #held = null;
  #broken = null;
  #last = Promise.resolve();
  /** Runs made and not yet over: the next one waits for them (`#last`). */
  #pending = 0;
  #closed = false;
  #runs = 0;

  /**
   * `strategy`: `{ submit(staged, signal, priority) }` for a lent sequence (queues a staged run
   * on the pool), or `{ holders }` for a direct one (lib/pool.js).
   */
  constructor(pool, runtime, strategy, options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('pool.sequence() options must be an object');
    refuseUnknownKeys('pool.sequence()', options, ['initialState', 'waitMs']);
    const states = stateSources(runtime);
    const initial = options.initialState === undefined ? {} : options.initialState;
    if (initial === null || typeof initial !== 'object') throw new TypeError('pool.sequence() option initialState must be an object of STATE source names to values');
    for (const name of Object.keys(initial)) {
      if (!states.some((s) => s.name === name)) {
        throw new ZgcError('ERR_ZGC_UNKNOWN_SOURCE', `initialState names ${JSON.stringify(name)}, which is no STATE source (the artifact's: ${states.map((s) => s.name).join(', ')})`, { source: name });
      }
    }
    const waitMs = options.waitMs === undefined ? 0 : options.waitMs;
    if (typeof waitMs !== 'number' || !(waitMs >= 0) || !Number.isFinite(waitMs)) throw new RangeError(`pool.sequence() option waitMs must be a finite number >= 0, got ${String(waitMs)}`);
    this.#pool = pool;
    this.#runtime = runtime;
    this.#strategy = strategy;
    this.#waitMs = waitMs;
    this.#stateNames = new Set(states.map((s) => s.name));
    if (strategy.submit !== undefined) {
      this.#states = states.map((s) => runtime.lendable(s.name, initial[s.name]));
    } else {
      // Checked now, applied to the instance the sequence comes to hold.
      for (const [name, values] of Object.entries(initial)) {
        const s = states.find((x) => x.name === name);
        const count = logicalCount(s);
        const array = toTypedArray({ ...s, logicalCount: count }, values);
        if (array.length !== count) {
          throw new ZgcError('ERR_ZGC_SIZE', `source "${name}" expects ${count} elements (shape [${s.shape.join(', ')}]), got ${array.length} elements`, { source: name });
        }
      }
      this.#initial = { states, values: initial };
    }
  }

  /** Runs started (or queued) so far. */
  get runs() {
    return this.#runs;
  }
  get closed() {
    return this.#closed;
  }
  /** `'lent'` (storage of its own, borrowed by each run) or `'direct'` (an instance of its own). */
  get strategy() {
    return this.#strategy.submit !== undefined ? 'lent' : 'direct';
  }

  /**
   * One run with the sequence's state, after the sequence's earlier runs. Inputs are copied
   * now. An aborted signal rejects a run that has not started.
   */
  run(inputs, options) {
    try {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'sequence is closed');
      if (this.#pool.closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
      if (this.#broken !== null) throw sequenceError(`the sequence ended: ${this.#broken}, and its state with it; start another`);
      if (options !== undefined && options !== null) refuseUnknownKeys('sequence.run()', options, ['signal', 'priority']);
      const signal = options == null ? undefined : options.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('sequence.run option signal must be an AbortSignal');
      const priority = priorityOf('sequence.run()', options);
      if (signal && signal.aborted) throw signal.reason;
      if (inputs !== undefined && inputs !== null && typeof inputs === 'object') {
        for (const name of Object.keys(inputs)) {
          if (this.#stateNames.has(name)) throw new ZgcError('ERR_ZGC_VALUE', `source "${name}" is the sequence's STATE: it is kept between runs, not given to one (set it with initialState)`, { source: name });
        }
      }
      const go = this.#strategy.submit !== undefined ? this.#lent(inputs, signal, priority) : this.#direct(inputs, signal);
      this.#runs++;
      // Queued at once when the sequence's earlier runs are over, else after them.
      // Stryker disable next-line ConditionalExpression: going after no earlier run only costs a microtask
      const result = this.#pending === 0 ? go() : this.#last.then(go);
      // Stryker disable next-line UpdateOperator: as above, the count only saves that microtask
      this.#pending++;
      // Stryker disable next-line ArrowFunction,UpdateOperator: as above
      const over = () => void this.#pending--;
      this.#last = result.then(over, over);
      return result;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A lent run: its inputs staged now, its state lent when it starts. */
  #lent(inputs, signal, priority) {
    const staged = this.#runtime.stageInputs(inputs);
    for (const state of this.#states) this.#runtime.stageLent(staged, state);
    return () => {
      if (signal && signal.aborted) throw signal.reason;
      return this.#strategy.submit(staged, signal, priority);
    };
  }

  /** A direct run on the instance the sequence holds (taken at its first run). */
  #direct(inputs, signal) {
    const copied = copyInputs(inputs);
    return async () => {
      if (this.#broken !== null) throw sequenceError(`the sequence ended: ${this.#broken}, and its state with it; start another`);
      if (this.#held === null) {
        this.#held = await this.#strategy.holders.acquire(this.#waitMs);
        this.#begin(this.#held.runtime);
      }
      if (signal && signal.aborted) throw signal.reason;
      try {
        return await this.#held.runtime.runAsync(copied, signal ? { signal } : undefined);
      } catch (err) {
        const lost = LOST_STATE.get(err && err.code);
        if (lost !== undefined) this.#broken = lost;
        throw err;
      }
    };
  }

  /** The initial state, on the instance a direct sequence just took: given values, else zeros for BOUND state (OWNED state is as its init left it). */
  #begin(runtime) {
    for (const s of this.#initial.states) {
      const values = this.#initial.values[s.name];
      if (values !== undefined) runtime.set(s.name, values);
      else if (s.binding === 'bound') runtime.set(s.name, new Array(logicalCount(s)).fill(s.dtype === 'bool' ? false : 0));
    }
  }

  /** Why the sequence ended on its own (its isolated instance died), or null. */
  get ended() {
    return this.#broken;
  }

  /** Refuses new runs, and resolves once the runs already made are over; the state, or the instance held, is then let go. */
  close() {
    this.#closed = true;
    return this.#last.then(() => {
      // Stryker disable next-line ArrayDeclaration: drops the lent storage for the GC only
      this.#states = [];
      if (this.#held !== null) {
        this.#strategy.holders.release(this.#held);
        this.#held = null;
      }
    });
  }

  [asyncDispose]() {
    return this.close();
  }
}

const logicalCount = (source) => source.shape.reduce((a, b) => a * b, 1);

/** Each input's values copied, so that a run made later reads them as they were at the call. */
function copyInputs(inputs) {
  if (inputs === undefined || inputs === null || typeof inputs !== 'object') return inputs;
  const out = {};
  for (const name of Object.keys(inputs)) {
    const v = inputs[name];
    out[name] = ArrayBuffer.isView(v) ? v.slice() : Array.isArray(v) ? [...v] : v;
  }
  return out;
}

module.exports = { Sequence, Holders, stateSources, lends };
