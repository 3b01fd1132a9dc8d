'use strict';

// ModelStreamInfer: ModelInferRequests on one stream, each answered on it as a
// ModelStreamInferResponse (its infer_response, or its error_message in Triton's
// "[request id: …]" form, after which the stream goes on). Each request is a ModelInfer call of
// its own (grpc-infer.js); those of one sequence start in turn, each once the one before it is
// answered, and the others at once. The client cancelling the stream aborts what is pending.

const { EventEmitter } = require('node:events');
const { Writer, encoders, decode, messages } = require('./pb');
const { modelInfer } = require('./grpc-infer');

/** A ModelStreamInferResponse: `{ error, id }` for a refused request, else `{ response }` (bytes of its ModelInferResponse). */
function encodeStreamResponse(msg) {
  const w = new Writer();
  if (msg.error !== undefined) {
    w.string(1, msg.error);
    // The request's id again, so that a client knows which request failed (as Triton does).
    const inner = new Writer();
    inner.string(3, msg.id);
    w.message(2, inner);
  } else {
    w.tag(2, 2);
    w.varint(msg.response.length);
    w.raw(msg.response);
  }
  return w.finish();
}

/** Triton's form of an error on a stream: the request's id first. */
const streamError = (id, message) => `[request id: ${id === undefined || id === '' ? '<id_unknown>' : id}] ${message}`;

/** Which requests must run in turn: those of one sequence of one model version; null for any other. */
function orderKey(buf) {
  try {
    const head = decode(messages.ModelInferStreamHead, buf);
    for (const { key, value } of head.parameters) {
      if (key !== 'sequence_id' || value === undefined) continue;
      const id = value.stringParam ?? value.int64Param ?? value.uint64Param;
      if (id === undefined || id === 0 || id === '') return null;
      return `${head.modelName}\0${head.modelVersion ?? ''}\0${typeof id}:${id}`;
    }
  } catch {
    // Undecodable: the call itself refuses it, in its turn.
  }
  return null;
}

/** One request of the stream, as a unary call: its bytes, the stream's metadata, and cancellation. */
class StreamRequest extends EventEmitter {
  constructor(stream, buf) {
    super();
    this.request = buf;
    this.metadata = stream.metadata;
  }
}

/** The handler of a ModelStreamInfer call (`stream`: grpc-js's duplex call). */
function modelStreamInfer(ctx, stream) {
  // Requests started and not answered; and those received and not answered (some wait for their turn).
  const pending = new Set();
  let outstanding = 0;
  // Per sequence: the promise of its last request's answer.
  const turns = new Map();
  let cancelled = false;
  let ended = false;
  const answered = () => {
    outstanding--;
    if (ended && outstanding === 0 && !cancelled) stream.end();
  };

  const start = (buf) =>
    new Promise((resolve) => {
      if (cancelled) {
        answered();
        return resolve();
      }
      const call = new StreamRequest(stream, buf);
      pending.add(call);
      modelInfer(ctx, call, (err, response) => {
        pending.delete(call);
        if (!cancelled) {
          if (err) {
            const id = idOf(buf);
            stream.write({ error: streamError(id, err.details ?? err.message), id });
          } else {
            stream.write({ response: encoders.inferResponse(response) });
          }
        }
        resolve();
        answered();
      });
    });

  stream.on('data', (buf) => {
    if (cancelled) return;
    outstanding++;
    const key = orderKey(buf);
    if (key === null) {
      start(buf);
      return;
    }
    const before = turns.get(key);
    const turn = before === undefined ? start(buf) : before.then(() => start(buf));
    turns.set(key, turn);
    turn.then(() => {
      if (turns.get(key) === turn) turns.delete(key);
    });
  });
  stream.on('end', () => {
    ended = true;
    if (outstanding === 0 && !cancelled) stream.end();
  });
  stream.on('cancelled', () => {
    cancelled = true;
    for (const call of pending) call.emit('cancelled');
  });
  // A stream that fails (its connection gone) ends as a cancelled one: 'cancelled' comes too.
  stream.on('error', () => {});
}

/** A request's id, read from its bytes (only for a refusal, which is rare). */
function idOf(buf) {
  try {
    return decode(messages.ModelInferStreamHead, buf).id;
  } catch {
    return undefined;
  }
}

module.exports = { modelStreamInfer, encodeStreamResponse, streamError };
