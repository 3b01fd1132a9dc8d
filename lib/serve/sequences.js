'use strict';

// Triton's sequence extension for one served version (config.json "sequenceBatching"): a
// request's `sequence_id`, `sequence_start` and `sequence_end` parameters route it to that
// client sequence's STATE, a `pool.sequence()` of the version's pool (lib/sequence.js): lent
// storage for BOUND state in-process, else an instance held from its first run to its end,
// waited for up to `waitMs`. A sequence idle for `idleTimeoutMs` (no run of it waiting or
// running) is ended, as is one whose isolated instance died; at most `maxSequences` are active at once.

const { RequestError } = require('./reasons');
const { stateSources } = require('../sequence');

/** Recently ended sequences remembered for a clearer error, per version. */
const REMEMBERED = 1024;

const RULE = '"sequenceBatching" must be { "idleTimeoutMs": ms, "maxSequences": n, "waitMs": ms, "initialState": { "<STATE source>": "file.npy" } }';

/** "sequenceBatching" as config.json gives it, checked; undefined when absent. */
function checkSequences(value, where) {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${where}: ${RULE}, got ${JSON.stringify(value)}`);
  for (const key of Object.keys(value)) {
    if (!['idleTimeoutMs', 'maxSequences', 'waitMs', 'initialState'].includes(key)) throw new Error(`${where}: "sequenceBatching" has an unknown key "${key}" (known: idleTimeoutMs, maxSequences, waitMs, initialState)`);
  }
  const { idleTimeoutMs = 60000, maxSequences = 1000, waitMs = 1000, initialState = {} } = value;
  if (!Number.isSafeInteger(waitMs) || waitMs < 0) throw new Error(`${where}: "sequenceBatching" "waitMs" must be a non-negative integer, got ${JSON.stringify(waitMs)}`);
  if (initialState === null || typeof initialState !== 'object' || Array.isArray(initialState) || !Object.values(initialState).every((f) => typeof f === 'string' && f !== '')) {
    throw new Error(`${where}: "sequenceBatching" "initialState" must be an object of STATE source name -> .npy file`);
  }
  if (!Number.isSafeInteger(idleTimeoutMs) || idleTimeoutMs < 1) throw new Error(`${where}: "sequenceBatching" "idleTimeoutMs" must be a positive integer, got ${JSON.stringify(idleTimeoutMs)}`);
  if (!Number.isSafeInteger(maxSequences) || maxSequences < 1) throw new Error(`${where}: "sequenceBatching" "maxSequences" must be a positive integer, got ${JSON.stringify(maxSequences)}`);
  return { idleTimeoutMs, maxSequences, waitMs, initialState };
}

const describeId = (id) => (typeof id === 'string' ? JSON.stringify(id) : String(id));

/** The active sequences of one version. */
class Sequences {
  #pool;
  #settings;
  #name;
  #initial;
  #active = new Map();
  /** id -> why it ended, for the last REMEMBERED ended sequences. */
  #ended = new Map();
  expired = 0;

  constructor(pool, settings, name, runtime, initialState) {
    stateSources(runtime);
    this.#initial = { initialState, waitMs: settings.waitMs };
    this.#pool = pool;
    this.#settings = settings;
    this.#name = name;
  }

  get size() {
    return this.#active.size;
  }

  /** The options a sequence of this version starts with. */
  get startOptions() {
    return this.#initial;
  }

  /**
   * Runs `inputs` in the request's sequence: a new one when it starts (ending an active one
   * of that id first), else the active one; the sequence ends after a run that ends it.
   */
  run(sequence, inputs, options) {
    const { id, start, end } = sequence;
    let entry = this.#active.get(id);
    if (start) {
      if (entry !== undefined) this.#end(entry, 'started again');
      if (this.#active.size >= this.#settings.maxSequences) {
        throw new RequestError('sequences_full', `model "${this.#name}" has ${this.#active.size} active sequences, its maxSequences: end one, or try again later`);
      }
      entry = { id, seq: this.#pool.sequence(this.#initial), timer: null, running: 0 };
      this.#active.set(id, entry);
    } else if (entry === undefined) {
      const why = this.#ended.get(id);
      throw new RequestError('bad_request', `sequence ${describeId(id)} of model "${this.#name}" is not active${why === undefined ? '' : ` (${why})`}: its first request sets "sequence_start"`);
    }
    // Not idle while a run of it waits or runs: its clock starts again when the last is over.
    if (entry.timer !== null) clearTimeout(entry.timer);
    entry.timer = null;
    entry.running++;
    const run = entry.seq.run(inputs, options).finally(() => {
      entry.running--;
      if (entry.running === 0 && this.#active.get(id) === entry) this.#idle(entry);
    }).catch((err) => {
      // Its isolated instance died: the sequence is over, and later requests are told why.
      if (entry.seq.ended !== null) this.#end(entry, entry.seq.ended);
      // A direct sequence's start that found every instance held: it never began. (A lent
      // run refused by the pool's full queue left its state as it was: the sequence goes on.)
      if (err && err.code === 'ERR_ZGC_QUEUE_FULL' && entry.seq.strategy === 'direct') {
        this.#end(entry, 'its start found every instance held');
        throw new RequestError('queue_full', `model "${this.#name}": ${err.message}`);
      }
      throw err;
    });
    if (end) this.#end(entry, 'ended by its last request');
    return run;
  }

  /** Starts the idle clock of `entry`, whose runs are all over. */
  #idle(entry) {
    entry.timer = setTimeout(() => {
      this.expired++;
      this.#end(entry, `it expired after ${this.#settings.idleTimeoutMs} ms without a request`);
    }, this.#settings.idleTimeoutMs);
    entry.timer.unref();
  }

  /** Ends `entry`: out of the active ones (its runs made so far still run), remembered with `why`. */
  #end(entry, why) {
    if (entry.timer !== null) clearTimeout(entry.timer);
    if (this.#active.get(entry.id) === entry) this.#active.delete(entry.id);
    entry.seq.close();
    this.#ended.delete(entry.id);
    this.#ended.set(entry.id, why);
    if (this.#ended.size > REMEMBERED) this.#ended.delete(this.#ended.keys().next().value);
  }

  /** Ends every sequence (the version stops serving). */
  close() {
    for (const entry of [...this.#active.values()]) this.#end(entry, 'its model version stopped serving');
  }
}

/** Refuses a request that names a sequence for a model that keeps none, or names none for one that does. */
function checkSequenceRequest(version, sequence, name) {
  if (sequence !== undefined && version.sequences === undefined) throw new RequestError('bad_request', `model "${name}" keeps no sequences: "sequence_id" needs its config.json "sequenceBatching"`);
  if (sequence === undefined && version.sequences !== undefined) throw new RequestError('bad_request', `model "${name}" runs sequences: give "sequence_id" (and "sequence_start" on a sequence's first request)`);
}

/** A version's run of `request`: in its sequence when it names one, else on the pool by `plain()`. */
function runOf(version, request, options, plain) {
  if (request.sequence === undefined) return plain();
  try {
    return version.sequences.run(request.sequence, request.inputs, options);
  } catch (err) {
    return Promise.reject(err);
  }
}

module.exports = { checkSequences, checkSequenceRequest, runOf, Sequences };
