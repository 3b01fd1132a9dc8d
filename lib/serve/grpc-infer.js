'use strict';

// ModelInfer over gRPC: the message's bytes counted against the in-flight budget, decoded (a
// large one on a parser thread), run inline for tiny models or queued with the model's timeout
// and the call's cancellation, answered, and counted in the metrics. Synchronous while the
// run is inline: no promise or microtask per call.

const { decode, messages } = require('../protocol/pb');
const { RequestError, bad } = require('./reasons');
const { classified } = require('./infer-response');
const { outputsFor } = require('./signature');
const { bytesTensor } = require('./classification');
const { overBudget } = require('./body');
const { OFF_THREAD_BYTES } = require('./parsers');
const { statusOf } = require('./grpc-status');
const { parseGrpcInfer } = require('./grpc-request');
const { resolveVersion, settle, logRequest } = require('./context');
const { runNow, runTimed } = require('../pool');
const { startTrace, step, runSteps, endTrace } = require('./tracing');
const { admit, deadline, runOptions } = require('./schedule');
const { runOf } = require('./sequences');


/**
 * The run's inputs and outputs from a ModelInferRequest's bytes (grpc-js hands them over
 * undecoded): small ones decoded here, large ones on a parser thread. Contents are capped at
 * the model's largest input before a value is read.
 */
function readRequest(ctx, v, buf) {
  const { parsers } = ctx;
  if (buf.length >= OFF_THREAD_BYTES) return parsers.parse(v.signature, buf, buf.length, 'grpc');
  return parseGrpcInfer(v.signature, decode(messages.ModelInferRequest, buf, 0, buf.length, v.signature.limits));
}

/** One ModelInfer call, from its message to its answer and its count in the metrics. */
class GrpcInfer {
  constructor(ctx, call, callback) {
    this.ctx = ctx;
    this.call = call;
    this.callback = callback;
    this.started = performance.now();
    // The bytes held against the in-flight budget: the message's, and inputs read from shared memory.
    this.claim = { bytes: 0 };
    // The client shared memory regions the request reads or writes, held until it is answered.
    this.held = null;
    // The decode and the answer's making, in ms: the statistics' compute_input and compute_output.
    this.inputMs = 0;
    this.outputMs = 0;
    this.parseStart = 0;
    // The call's trace, when an OpenTelemetry SDK records it (tracing.js).
    this.trace = null;
    this.failure = undefined;
    this.v = undefined;
    this.name = '';
    this.request = undefined;
    // Set once the parsed request is admitted (schedule.js), inline or after a parser thread.
    this.priority = null;
  }

  /** Lets go of what the call held, and counts it. */
  done(outcome) {
    const { ctx, v, name } = this;
    if (this.trace !== null) endTrace(this.trace, performance.now(), v === undefined ? undefined : v.version, outcome, this.failure);
    if (this.held !== null) ctx.shm.letGo(this.held);
    ctx.budget.release(this.claim.bytes);
    const label = v !== undefined || ctx.repository.models.has(name) ? name : '_unknown';
    const seconds = (performance.now() - this.started) / 1000;
    ctx.metrics.count(label, v === undefined ? '' : v.version, outcome, seconds, 'grpc', this.inputMs, this.outputMs);
    if (ctx.logging.verboseAt(1)) logRequest(ctx, name, v, outcome, seconds, 'grpc');
    settle(ctx);
  }

  fail(err) {
    const s = statusOf(err, this.name, this.v);
    this.failure = s.error.details;
    this.callback(s.error);
    this.done(s.outcome);
  }

  /** The parse's end: its time, and its step in the trace. */
  parsed() {
    const at = performance.now();
    this.inputMs = at - this.parseStart;
    if (this.trace !== null) step(this.trace, 'parse', this.parseStart, at);
    return at;
  }

  /** Sends the answer to the run's tensors, timed. */
  answer(tensors) {
    const answerStart = performance.now();
    answer(this.callback, this.v, this.request, tensors);
    this.outputMs = performance.now() - answerStart;
    if (this.trace !== null) step(this.trace, 'write', answerStart, answerStart + this.outputMs);
  }

  /** Answered before this returns when the run goes inline; true when it goes on asynchronously. */
  start() {
    const { ctx, call } = this;
    const buf = call.request;
    if (ctx.state.closed) throw new RequestError('shutting_down', 'the server is shut down');
    // The message is in memory already: it counts against the budget while it is answered.
    if (!ctx.budget.claim(buf.length)) throw overBudget(ctx.budget);
    this.claim.bytes = buf.length;
    const head = decode(messages.ModelInferHead, buf);
    const name = (this.name = head.modelName);
    if (name === undefined || name === '') throw bad('model_name is required: a ModelInferRequest names the model to run');
    this.trace = startTrace(ctx.trace, name, 'grpc', this.started, call.metadata.get('traceparent')[0], call.metadata.get('tracestate')[0]);
    const v = (this.v = resolveVersion(ctx, name, head.modelVersion === undefined || head.modelVersion === '' ? undefined : head.modelVersion));
    if (v.config.decoupled !== undefined) throw bad(`model "${name}" is decoupled (several responses a request): ModelInfer cannot answer it; use ModelStreamInfer`);
    this.parseStart = performance.now();
    const request = (this.request = readRequest(ctx, v, buf));
    if (request instanceof Promise || request.shmInputs !== undefined || request.shmOutputs !== undefined) return true;
    const parsed = this.parsed();
    // A priority past the model's levels is refused, also for a run that would go inline.
    this.priority = admit(v, request, name);
    const tensors = request.sequence === undefined ? runNow(v.pool, request.inputs) : undefined;
    if (tensors === undefined) return true;
    if (this.trace !== null) runSteps(this.trace, { queueWaitMs: 0, computeMs: performance.now() - parsed }, parsed, performance.now());
    this.answer(tensors);
    this.done('success');
    return false;
  }

  /** The rest of a call that waits: a parser thread, shared memory, or a queued run. */
  async finish() {
    const { ctx, v, name } = this;
    const request = (this.request = await this.request);
    // Parsed on a thread: its outputs are named, and taken from this thread's signature.
    if (request.outputNames !== undefined) {
      const outputs = outputsFor(v.signature, request.rows).outputByName;
      request.outputs = request.outputNames.map((n) => outputs.get(n));
    }
    if (request.shmInputs !== undefined || request.shmOutputs !== undefined) this.held = await ctx.shm.stage(request, ctx.budget, this.claim);
    this.parsed();
    if (this.priority === null) this.priority = admit(v, request, name);
    const pending = offloaded(this.call, v, name, request, this.priority, this.trace);
    // The pool has its copy of the inputs now: buffers read from shared memory serve the next request.
    if (request.shmInputs !== undefined) ctx.shm.recycle(request);
    const tensors = await pending;
    if (request.shmOutputs !== undefined) await ctx.shm.deliver(request, this.held, tensors);
    this.answer(tensors);
  }
}

// Synchronous while the run is done inline (tiny models): no promise or microtask per call.
function modelInfer(ctx, call, callback) {
  ctx.state.active++;
  const infer = new GrpcInfer(ctx, call, callback);
  try {
    if (!infer.start()) return;
  } catch (err) {
    infer.fail(err);
    return;
  }
  infer.finish().then(
    () => infer.done('success'),
    (err) => infer.fail(err),
  );
}

/** Raw contents of an output written into shared memory: empty, so that the others keep their places. */
const NO_BYTES = new Uint8Array(0);

function answer(callback, v, request, tensors) {
  const inShm = request.shmOutputs === undefined ? null : new Set(request.shmOutputs.map((o) => o.name));
  const outputs = request.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, data: inShm !== null && inShm.has(o.name) ? NO_BYTES : tensors[o.index].data }));
  // Outputs asked for as their top classes: BYTES strings, length-prefixed.
  if (request.classes !== undefined) {
    for (const { name, k } of request.classes) {
      const at = request.outputs.findIndex((o) => o.name === name);
      const o = request.outputs[at];
      const { shape, strings } = classified(o, tensors[o.index].data, k, v.signature.labels);
      outputs[at] = { name, datatype: 'BYTES', shape, data: bytesTensor(strings) };
    }
  }
  callback(null, { modelName: v.model.name, modelVersion: v.version, id: request.id, outputs });
}

/**
 * A run on the pool's instances at the request's priority, cancelled with the call and limited
 * by its deadline (the model's timeoutMs, or the request's shorter timeout).
 */
async function offloaded(call, v, name, request, priority, trace) {
  const limit = deadline(v.config, request.timeoutUs, name);
  const controller = new AbortController();
  const onCancel = () => controller.abort(Object.assign(new Error('the call was cancelled'), { name: 'AbortError' }));
  call.once('cancelled', onCancel);
  let timer = null;
  const options = runOptions(v.pool, controller.signal, priority, limit);
  const submitted = trace === null ? 0 : performance.now();
  const timing = trace === null ? undefined : {};
  const run = runOf(v, request, options, () => runTimed(v.pool, request.inputs, options, timing));
  const limited = limit.ms > 0
    ? Promise.race([run, new Promise((_, reject) => {
        timer = setTimeout(() => {
          const err = new RequestError('timeout', limit.message);
          controller.abort(err);
          reject(err);
        }, limit.ms);
      })])
    : run;
  try {
    return await limited;
  } finally {
    if (timer !== null) clearTimeout(timer);
    call.off('cancelled', onCancel);
    if (timing !== undefined) runSteps(trace, timing, submitted, performance.now());
  }
}

module.exports = { modelInfer };
