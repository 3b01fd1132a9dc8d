'use strict';

// gRPC's ModelStreamInfer as an async iterable: requests sent on one stream, to one server, and
// their responses as they come, a decoupled model's several for one request, each marked
// `final` on its last. A refused request is a response with its `error`; the stream goes on.

const { ZgcError } = require('../errors');
const { buildRequest, readResponse } = require('./request');

class RemoteStream {
  #transport;
  #server;
  #call;
  #pending = new Map();
  #queue = [];
  /** Callers of next() waiting for a response, in order. */
  #waiting = [];
  #ending = false;
  #done = false;
  #failure = null;
  #next = 1;
  #binary;

  #over;

  /** `over`: called once the stream has ended, whichever way. */
  constructor(server, binary, over = () => {}) {
    this.#over = over;
    if (typeof server.transport.stream !== 'function') throw new TypeError('a stream of requests (ModelStreamInfer) is gRPC\'s: connect to the server\'s grpc:// address for it');
    this.#server = server;
    this.#transport = server.transport;
    this.#binary = binary;
    server.outstanding++;
  }

  /** The call, opened by the first request written: a stream refused before it holds none. */
  #opened() {
    if (this.#call === undefined) {
      this.#call = this.#transport.stream();
      this.#call.on('data', (msg) => this.#answer(msg));
      this.#call.on('error', (err) => this.#finish(err.code === 1 ? null : this.#transport.callError(err)));
      this.#call.on('end', () => this.#finish(null));
    }
    return this.#call;
  }

  /** The server the stream goes to. */
  get url() {
    return this.#server.url;
  }

  /** Requests sent and not yet answered in full. */
  get pending() {
    return this.#pending.size;
  }

  /**
   * Sends a request for `model` (from `client.model()`) on the stream: returns its id (given
   * as `options.id`, else one of the stream's own). Inputs are checked and copied now.
   */
  send(model, inputs, options = {}) {
    if (this.#done || this.#ending) throw new ZgcError('ERR_ZGC_CLOSED', this.#done ? 'the stream has ended' : 'the stream was ended with end(): it takes no more requests');
    const { id, f16, ...rest } = options;
    const { request, wanted, classified, asked } = buildRequest(model, inputs, rest, this.#binary);
    const rid = id === undefined ? String(this.#next++) : String(id);
    if (this.#pending.has(rid)) throw new TypeError(`request id ${JSON.stringify(rid)} is already pending on this stream`);
    request.id = rid;
    // A decoupled model's last response says it is the last (Triton's empty final response).
    request.parameters.triton_enable_empty_final_response = true;
    this.#pending.set(rid, { model, wanted, classified, asked, into: rest.into, f16: f16 ?? model.f16 });
    this.#opened().write(this.#transport.prepare(model.name, model.version, request));
    return rid;
  }

  /** No more requests: the iteration ends once those sent are answered. */
  end() {
    this.#ending = true;
    if (this.#call === undefined) this.#finish(null);
    else this.#call.end();
  }

  /** Ends the stream now: what is pending is dropped. */
  cancel() {
    if (this.#call !== undefined) this.#call.cancel();
    this.#finish(null);
  }

  #answer(msg) {
    let item;
    if (msg.error !== undefined) {
      const id = msg.id || undefined;
      if (id !== undefined) this.#pending.delete(id);
      item = { id, final: true, error: new ZgcError('ERR_ZGC_REMOTE', `${this.#server.url}: ${msg.error}`, { server: this.#server.url }) };
    } else {
      const r = msg.response;
      const p = this.#pending.get(r.id);
      const final = r.parameters.triton_final_response === undefined ? true : r.parameters.triton_final_response === true;
      if (final) this.#pending.delete(r.id);
      if (p === undefined) item = { id: r.id, final, error: new ZgcError('ERR_ZGC_REMOTE', `${this.#server.url}: a response for request ${JSON.stringify(r.id)}, which this stream did not send`, { server: this.#server.url }) };
      else {
        try {
          // An empty final response only says the request is over.
          const tensors = final && r.outputs.length === 0 ? [] : readResponse(this.#server.url, r, p.wanted, { f16: p.f16, into: p.into, classified: p.classified, asked: p.asked });
          item = { id: r.id, model: r.modelName, version: r.modelVersion, final, tensors };
        } catch (err) {
          item = { id: r.id, final, error: err };
        }
      }
    }
    this.#push(item);
  }

  #push(item) {
    if (this.#waiting.length > 0) this.#waiting.shift().resolve({ value: item, done: false });
    else this.#queue.push(item);
  }

  #finish(err) {
    if (this.#done) return;
    this.#done = true;
    this.#server.outstanding--;
    this.#over();
    this.#failure = err;
    // Every caller waiting: the first is told the failure, the others that it is over.
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const w of waiting) {
      if (this.#failure) {
        w.reject(this.#failure);
        this.#failure = null;
      } else w.resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this.#queue.length > 0) return Promise.resolve({ value: this.#queue.shift(), done: false });
        if (this.#done) {
          const err = this.#failure;
          this.#failure = null;
          return err ? Promise.reject(err) : Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => this.#waiting.push({ resolve, reject }));
      },
      return: () => {
        if (!this.#done) this.cancel();
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }
}

module.exports = { RemoteStream };
