'use strict';

// ModelStreamInfer: ModelInferRequests on one stream, each answered on it as a
// ModelStreamInferResponse (its infer_response, or its error_message in Triton's
// "[request id: …]" form, after which the stream goes on). Each request is a ModelInfer call of
// its own (grpc-infer.js); those of one sequence start in turn, each once the one before it is
// answered, and the others at once. A decoupled model's request (decoupled.js) is answered by
// a response per step, each with Triton's triton_final_response. The client cancelling the
// stream aborts what is pending.

const { EventEmitter } = require('node:events');
const { Writer, encoders, decode, messages } = require('../protocol/pb');
const { modelInfer } = require('./grpc-infer');
const { parseGrpcInfer } = require('./grpc-request');
const { statusOf } = require('./grpc-status');
const { bad } = require('./reasons');
const { overBudget } = require('./body');
const { resolveVersion, settle, logRequest } = require('./context');
const { runDecoupled } = require('./decoupled');

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

/** A request's model, version, id and parameters; null when its bytes do not decode (the call refuses it). */
function headOf(buf) {
  try {
    return decode(messages.ModelInferStreamHead, buf);
  } catch {
    return null;
  }
}

/** The served version of a decoupled model the request names; else undefined (a plain call). */
function decoupledVersion(ctx, head) {
  if (head === null) return undefined;
  try {
    const v = resolveVersion(ctx, head.modelName, head.modelVersion || undefined);
    return v.config.decoupled === undefined ? undefined : v;
  } catch {
    return undefined;
  }
}

/** Triton's parameter on each response of a decoupled model: whether it is the request's last. */
function withFinalFlag(response, final) {
  const value = new Writer();
  value.tag(1, 0);
  value.varint(final ? 1 : 0);
  const entry = new Writer();
  entry.string(1, 'triton_final_response');
  entry.message(2, value);
  const w = new Writer();
  w.message(4, entry);
  // A field after the others is the same message: protobuf reads fields in any order.
  return Buffer.concat([response, w.finish()]);
}

/** A request to a decoupled model: each step's outputs answered on the stream, the last marked final. */
async function decoupledInfer(ctx, call, v, head, buf, write) {
  ctx.state.active++;
  const started = performance.now();
  const name = v.model.name;
  let outcome = 'success';
  let claimed = 0;
  const controller = new AbortController();
  const onCancel = () => controller.abort(Object.assign(new Error('the call was cancelled'), { name: 'AbortError' }));
  call.once('cancelled', onCancel);
  try {
    if (!ctx.budget.claim(buf.length)) throw overBudget(ctx.budget);
    claimed = buf.length;
    const request = parseGrpcInfer(v.signature, decode(messages.ModelInferRequest, buf, 0, buf.length, v.signature.limits));
    if (request.shmInputs !== undefined || request.shmOutputs !== undefined || request.classes !== undefined || request.sequence !== undefined) {
      throw bad(`model "${name}" is decoupled: its requests take no shared memory, classification or sequence_id (each runs on state of its own)`);
    }
    await runDecoupled(v, request.inputs, controller.signal, (tensors, final) => {
      const outputs = request.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, data: tensors[o.index].data }));
      write({ response: withFinalFlag(encoders.inferResponse({ modelName: name, modelVersion: v.version, id: request.id, outputs }), final) });
    });
  } catch (err) {
    const s = statusOf(err, name, v);
    outcome = s.outcome;
    write({ error: streamError(head.id, s.error.details), id: head.id });
  } finally {
    call.off('cancelled', onCancel);
    ctx.budget.release(claimed);
    const seconds = (performance.now() - started) / 1000;
    ctx.metrics.count(name, v.version, outcome, seconds, 'grpc', 0, 0);
    if (ctx.logging.verboseAt(1)) logRequest(ctx, name, v, outcome, seconds, 'grpc');
    settle(ctx);
  }
}

/** Which requests must run in turn: those of one sequence of one model version; null for any other. */
function orderKey(head) {
  if (head === null) return null;
  for (const { key, value } of head.parameters) {
    if (key !== 'sequence_id' || value === undefined) continue;
    const id = value.stringParam ?? value.int64Param ?? value.uint64Param;
    if (id === undefined || id === 0 || id === '') return null;
    return `${head.modelName}\0${head.modelVersion ?? ''}\0${typeof id}:${id}`;
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

  const start = (buf, head) =>
    new Promise((resolve) => {
      if (cancelled) {
        answered();
        return resolve();
      }
      const call = new StreamRequest(stream, buf);
      pending.add(call);
      const v = decoupledVersion(ctx, head);
      if (v !== undefined) {
        decoupledInfer(ctx, call, v, head, buf, (msg) => cancelled || stream.write(msg)).then(() => {
          pending.delete(call);
          resolve();
          answered();
        });
        return;
      }
      modelInfer(ctx, call, (err, response) => {
        pending.delete(call);
        if (!cancelled) {
          if (err) {
            const id = head === null ? undefined : head.id;
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
    const head = headOf(buf);
    const key = orderKey(head);
    if (key === null) {
      start(buf, head);
      return;
    }
    const before = turns.get(key);
    const turn = before === undefined ? start(buf, head) : before.then(() => start(buf, head));
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

module.exports = { modelStreamInfer, encodeStreamResponse, streamError };
