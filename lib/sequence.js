'use strict';

// pool.sequence(): runs of a pool that keep their own STATE between them, as Triton's sequence
// batcher does for a client's sequence. A STATE source that is BOUND takes storage its caller
// keeps: each sequence has its own (zeros, or initial values), and every run of the sequence
// borrows it on whichever instance runs it, without a copy; the instance's own binding comes
// back after the run (crates/core/src/executor.rs, `Feed::Lend`). A sequence's runs go one
// after another, in call order; different sequences share the pool's instances.

const { ZgcError } = require('./errors');
const { refuseUnknownKeys, priorityOf } = require('./options');

const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');

const sequenceError = (message) => new ZgcError('ERR_ZGC_SEQUENCE', message);

/** The STATE sources a sequence of `runtime`'s artifact keeps, checked: each must be BOUND. */
function stateSources(runtime) {
  const states = runtime.sources.filter((s) => s.kind === 'state');
  if (states.length === 0) throw sequenceError(`${runtime.path} has no STATE source: a sequence keeps STATE between its runs`);
  const owned = states.find((s) => s.binding !== 'bound');
  if (owned !== undefined) {
    throw sequenceError(`STATE source "${owned.name}" is ${owned.binding.toUpperCase()}: a sequence lends each run storage of its own, which needs BOUND state (sequences over OWNED state, which hold an instance, are not supported yet)`);
  }
  return states;
}

class Sequence {
  #pool;
  #runtime;
  #submit;
  #states;
  #stateNames;
  #last = Promise.resolve();
  /** Runs made and not yet over: the next one waits for them (`#last`). */
  #pending = 0;
  #closed = false;
  #runs = 0;

  /** `submit(staged, signal, priority)` queues a staged run on the pool (lib/pool.js). */
  constructor(pool, runtime, submit, options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('pool.sequence() options must be an object');
    refuseUnknownKeys('pool.sequence()', options, ['initialState']);
    const states = stateSources(runtime);
    const initial = options.initialState === undefined ? {} : options.initialState;
    if (initial === null || typeof initial !== 'object') throw new TypeError('pool.sequence() option initialState must be an object of STATE source names to values');
    for (const name of Object.keys(initial)) {
      if (!states.some((s) => s.name === name)) {
        throw new ZgcError('ERR_ZGC_UNKNOWN_SOURCE', `initialState names ${JSON.stringify(name)}, which is no STATE source (the artifact's: ${states.map((s) => s.name).join(', ')})`, { source: name });
      }
    }
    this.#pool = pool;
    this.#runtime = runtime;
    this.#submit = submit;
    this.#states = states.map((s) => runtime.lendable(s.name, initial[s.name]));
    this.#stateNames = new Set(states.map((s) => s.name));
  }

  /** Runs started (or queued) so far. */
  get runs() {
    return this.#runs;
  }
  get closed() {
    return this.#closed;
  }

  /**
   * One run with the sequence's state: after the sequence's earlier runs, on any free instance
   * of the pool. Inputs are copied now. An aborted signal rejects a run that has not started.
   */
  run(inputs, options) {
    try {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'sequence is closed');
      if (this.#pool.closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
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
      const staged = this.#runtime.stageInputs(inputs);
      for (const state of this.#states) this.#runtime.stageLent(staged, state);
      this.#runs++;
      const go = () => {
        if (signal && signal.aborted) throw signal.reason;
        return this.#submit(staged, signal, priority);
      };
      // Queued at once when the sequence's earlier runs are over, else after them.
      const result = this.#pending === 0 ? go() : this.#last.then(go);
      this.#pending++;
      const over = () => {
        this.#pending--;
      };
      this.#last = result.then(over, over);
      return result;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Refuses new runs, and resolves once the runs already made are over; the state is then let go. */
  close() {
    this.#closed = true;
    return this.#last.then(() => {
      this.#states = [];
    });
  }

  [asyncDispose]() {
    return this.close();
  }
}

module.exports = { Sequence, stateSources };
