'use strict';

// A model on a server, with the surface of a local runtime: `sources` and `outputs` from its
// metadata, `runAsync(inputs, options)` resolving Tensors in the model's output order, and
// `sequence()` for runs that share the server's sequence state.

const crypto = require('node:crypto');
const { ZgcError } = require('../errors');
const { refuseUnknownKeys } = require('../options');
const { dtypeOf } = require('../protocol/datatypes');
const { buildRequest, readResponse, sequenceParameters } = require('./request');

const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');
const SEND = Symbol('send');

function tensorInfo(t) {
  return Object.freeze({ name: t.name, dtype: dtypeOf(t.datatype), shape: Object.freeze((t.shape || []).map(Number)) });
}

class RemoteModel {
  #client;
  #f16;

  constructor(client, metadata, version, f16) {
    this.#client = client;
    this.#f16 = f16;
    /** How f16 outputs come back: 'float32', 'bits' or 'float16'. */
    this.f16 = f16;
    this.name = metadata.name;
    /** The version asked for (undefined: the server's choice), and those the server lists. */
    this.version = version;
    this.versions = Object.freeze([...(metadata.versions || [])]);
    this.platform = metadata.platform;
    this.sources = Object.freeze((metadata.inputs || []).map(tensorInfo));
    this.outputs = Object.freeze((metadata.outputs || []).map(tensorInfo));
    Object.freeze(this);
  }

  /**
   * One run on the server: `Promise<Tensor[]>` in the model's output order (or `outputs`').
   * Inputs are read and copied before it returns, as a local `runAsync`'s are.
   */
  runAsync(inputs = {}, options = undefined) {
    return this[SEND](inputs, options, undefined).then((r) => r.tensors);
  }

  /** `runAsync`, on the server `pin` when given: resolves `{ server, tensors }`. */
  [SEND](inputs, options, pin) {
    try {
      const { request, wanted, classified, asked } = buildRequest(this, inputs, options, this.#client.binary);
      const o = options || {};
      if (o.signal && o.signal.aborted) throw o.signal.reason;
      // A plain infer may be sent again to another server; a sequence's step may not.
      const idempotent = o.sequence === undefined;
      const sent = this.#client.infer(this.name, this.version, request, { signal: o.signal, timeoutMs: o.timeoutMs, idempotent, pin, wanted });
      return sent.then(({ server, response }) => ({ server, tensors: readResponse(server.url, response, wanted, { f16: this.#f16, into: o.into, classified, asked }) }));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * The responses of one request, as an async iterable of Tensor lists: a decoupled model's
   * several (gRPC's ModelStreamInfer), ending after its last. Inputs are checked and copied now.
   */
  responses(inputs = {}, options = {}) {
    const { signal, ...rest } = options || {};
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('responses() option signal must be an AbortSignal');
    if (signal && signal.aborted) throw signal.reason;
    const stream = this.#client.stream();
    try {
      stream.send(this, inputs, rest);
    } catch (err) {
      stream.cancel();
      throw err;
    }
    stream.end();
    const onAbort = () => stream.cancel();
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    const it = stream[Symbol.asyncIterator]();
    let over = false;
    const finish = () => {
      over = true;
      if (signal) signal.removeEventListener('abort', onAbort);
      it.return();
    };
    return {
      async next() {
        while (!over) {
          let step;
          try {
            step = await it.next();
          } catch (err) {
            finish();
            throw err;
          }
          const { value, done } = step;
          if (signal && signal.aborted) {
            finish();
            throw signal.reason;
          }
          if (done) break;
          if (value.error) {
            finish();
            throw value.error;
          }
          if (value.final) finish();
          if (value.tensors.length > 0) return { value: value.tensors, done: false };
        }
        finish();
        return { value: undefined, done: true };
      },
      async return() {
        finish();
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** Whether the server has this model (version) ready. */
  ready() {
    return this.#client.modelReady(this.name, this.version);
  }

  /**
   * Runs that share one sequence's state on the server (Triton's sequence batcher): each
   * carries the sequence's id, the first `start`, the one run with `{ end: true }` `end`.
   * They go in call order, all to the server the first went to.
   */
  sequence(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('sequence() options must be an object');
    refuseUnknownKeys('sequence()', options, ['id']);
    const id = options.id === undefined ? crypto.randomInt(1, 2 ** 48) : options.id;
    sequenceParameters({ id });
    return new RemoteSequence(this, id, () => this.#client.pick());
  }
}

class RemoteSequence {
  #model;
  #pick;
  #last = Promise.resolve();
  #runs = 0;
  #started = false;
  #ended = false;
  #server = undefined;

  /** `pick`: the server the sequence's runs all go to, taken at its first. */
  constructor(model, id, pick) {
    this.#model = model;
    this.#pick = pick;
    this.id = id;
  }

  get runs() {
    return this.#runs;
  }

  get ended() {
    return this.#ended;
  }

  /**
   * One run of the sequence, after its earlier ones; `{ end: true }` ends it. Its inputs are
   * checked and copied now: a run refused here changes nothing of the sequence.
   */
  run(inputs, options = {}) {
    try {
      if (this.#ended) throw new ZgcError('ERR_ZGC_CLOSED', `sequence ${this.id} has ended`);
      if (options === null || typeof options !== 'object') throw new TypeError('sequence.run() options must be an object');
      refuseUnknownKeys('sequence.run()', options, ['signal', 'timeoutMs', 'priority', 'outputs', 'into', 'end']);
      const { end, ...rest } = options;
      if (rest.signal && rest.signal.aborted) throw rest.signal.reason;
      // Checked as it will be sent (the flags do not change what is checked).
      buildRequest(this.#model, inputs, { ...rest, sequence: { id: this.id } }, false);
      const copied = copyInputs(inputs);
      this.#runs++;
      if (end) this.#ended = true;
      // Sent once the runs before it are answered, all to one server; the first sent starts it.
      const go = () => {
        if (rest.signal && rest.signal.aborted) throw rest.signal.reason;
        if (this.#server === undefined) this.#server = this.#pick();
        const start = !this.#started;
        this.#started = true;
        return this.#model[SEND](copied, { ...rest, sequence: { id: this.id, start, end: Boolean(end) } }, this.#server).then(({ tensors }) => tensors);
      };
      const result = this.#last.then(go);
      this.#last = result.catch(() => {});
      return result;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Resolves once the runs already made are answered; runs after it are refused. */
  close() {
    this.#ended = true;
    return this.#last;
  }

  [asyncDispose]() {
    return this.close();
  }
}

/** Each input's values copied, so that a run sent later sends them as they were at the call. */
function copyInputs(inputs) {
  if (inputs === undefined || inputs === null || typeof inputs !== 'object') return inputs;
  const out = {};
  for (const name of Object.keys(inputs)) {
    const v = inputs[name];
    const copy = (x) => (ArrayBuffer.isView(x) ? x.slice() : Array.isArray(x) ? [...x] : x);
    out[name] = v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && !Array.isArray(v) ? { ...v, data: copy(v.data) } : copy(v);
  }
  return out;
}

module.exports = { RemoteModel, RemoteSequence };
