'use strict';

// POST /v2/models/{name}[/versions/{v}]/infer: the body read under the limits, the request
// parsed (large JSON on a parser thread), the run (inline for tiny models, else queued with the
// model's timeout and the client's going away as its abort), the answer as JSON or binary
// tensor data, and the request counted in the metrics. Every failure answers through
// outcomes.js.

const { RequestError, bad } = require('./reasons');
const { parseInfer } = require('./infer-request');
const { formatInfer } = require('./infer-response');
const { OFF_THREAD_BYTES } = require('./parsers');
const { collectBody, collectCompressed, DECODERS } = require('./body');
const { bounded } = require('./elide');
const { outcomeOf } = require('./outcomes');
const { send, JSON_TYPE } = require('./respond');
const { resolveVersion, settle, logRequest } = require('./context');
const { runNow, runTimed } = require('../pool');
const { startTrace, step, runSteps, endTrace } = require('./tracing');
const { admit, deadline, runOptions } = require('./schedule');
const { runOf } = require('./sequences');

function infer(ctx, req, res, name, versionText, started) {
  // What is known before the body: answerInfer's starting point.
  // `claim`: the body bytes this request holds against the budget, given back once it is answered.
  const head = { ctx, req, res, name, versionText, started, t0: performance.now(), claim: { bytes: 0 }, v: undefined, headerLength: undefined, encoding: undefined };
  try {
    head.v = resolveVersion(ctx, name, versionText);
    if (head.v.config.decoupled !== undefined) throw bad(`model "${name}" is decoupled (several responses a request): POST .../infer cannot answer it; use POST .../generate_stream or gRPC ModelStreamInfer`);
    const encoding = req.headers['content-encoding'];
    if (encoding !== undefined && encoding !== 'identity') {
      head.encoding = encoding.trim().toLowerCase();
      if (!Object.hasOwn(DECODERS, head.encoding)) throw new RequestError('bad_request', `Content-Encoding ${JSON.stringify(bounded(encoding).slice(0, 40))} is not supported: send the request uncompressed, or gzip or deflate`);
    }
    const lengthHeader = req.headers['inference-header-content-length'];
    if (lengthHeader !== undefined) {
      head.headerLength = /^[0-9]{1,15}$/.test(lengthHeader) ? Number(lengthHeader) : NaN;
      if (Number.isNaN(head.headerLength)) throw new RequestError('bad_request', `Inference-Header-Content-Length must be decimal digits (a byte count), got ${JSON.stringify(bounded(lengthHeader).slice(0, 40))}`);
    }
  } catch (err) {
    // Refused before a byte of the body is read.
    return void answerInfer(head, err, undefined);
  }
  // Answered from the body's last event, with no promise between: side by side with awaiting
  // readBody, tiny REST measured 0.49x against 0.465x a bare node:http server (medians of 4).
  const options = { maxBody: ctx.config.maxBody, budget: ctx.budget, claim: head.claim, headerLength: head.headerLength };
  const answer = (err, body) => void answerInfer(head, err, body);
  if (head.encoding === undefined) collectBody(req, options, answer);
  else collectCompressed(req, head.encoding, options, answer);
}

/** Writes a formatted infer response: JSON alone, or a JSON header and binary tensor data. */
function sendTensors(res, { head, chunks }) {
  if (chunks.length === 0) {
    res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(head) });
    res.end(head);
    return;
  }
  const headBytes = typeof head === 'string' ? Buffer.from(head) : head;
  let total = headBytes.length;
  for (const c of chunks) total += c.byteLength;
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'inference-header-content-length': headBytes.length, 'content-length': total });
  res.cork();
  res.write(headBytes);
  for (const c of chunks) res.write(c);
  res.end();
  res.uncork();
}

/** One REST infer once its body is read: its state from the parse to the count in the metrics. */
class Exchange {
  constructor(head) {
    this.head = head;
    this.outcome = 'success';
    this.answered = false;
    // The parse and the answer's making, in ms: the statistics' compute_input and compute_output.
    this.inputMs = 0;
    this.outputMs = 0;
    // The client shared memory regions the request reads or writes, held until it is answered.
    this.held = null;
    // The request's trace, when an OpenTelemetry SDK records it (tracing.js).
    this.trace = startTrace(head.ctx.trace, head.name, 'rest', head.t0, head.req.headers.traceparent, head.req.headers.tracestate);
    this.failure = undefined;
  }

  /** Answers an error, once, unless the client is gone. */
  answer(status, message, headers, code) {
    const { res, ctx } = this.head;
    if (this.answered || res.destroyed) return;
    this.answered = true;
    if (ctx.state.draining) res.shouldKeepAlive = false;
    if (message !== undefined) send(res, status, code === undefined ? { error: message } : { error: message, code }, headers);
  }

  /**
   * A run that waits for a worker: the deadline (the model's timeoutMs, or the request's
   * shorter timeout) answers 504 and takes it off the queue, or drops its answer; a client
   * that goes away takes it off too.
   */
  offloaded(version, request, priority) {
    const { res, name } = this.head;
    const trace = this.trace;
    const limit = deadline(version.config, request.timeoutUs, name);
    const controller = new AbortController();
    let timer = null;
    const onClose = () => {
      if (!this.answered) {
        this.outcome = 'canceled';
        this.answered = true;
        controller.abort(new RequestError('canceled', 'the client went away'));
      }
    };
    res.once('close', onClose);
    if (limit.ms > 0) {
      timer = setTimeout(() => {
        this.outcome = 'timeout';
        const err = new RequestError('timeout', limit.message);
        controller.abort(err);
        this.answer(504, err.message);
      }, limit.ms);
    }
    const options = runOptions(version.pool, controller.signal, priority, limit);
    const submitted = trace === null ? 0 : performance.now();
    const timing = trace === null ? undefined : {};
    const run = runOf(version, request, options, () => runTimed(version.pool, request.inputs, options, timing));
    return run.finally(() => {
      if (timer !== null) clearTimeout(timer);
      res.off('close', onClose);
      if (timing !== undefined) runSteps(trace, timing, submitted, performance.now());
    });
  }

  /** Parses, runs and answers the request; throws what answers it otherwise. */
  async respond(body) {
    const { ctx, res, name, versionText, claim, headerLength } = this.head;
    const trace = this.trace;
    if (headerLength !== undefined && headerLength > body.length) throw new RequestError('bad_request', `Inference-Header-Content-Length is ${headerLength}, the body has only ${body.length} bytes`);
    // Looked up again: a reload may have switched versions while the body arrived.
    const v = (this.head.v = resolveVersion(ctx, name, versionText));
    const jsonLength = headerLength === undefined ? body.length : headerLength;
    const parseStart = performance.now();
    // A large JSON header is parsed on a parser thread, so that other requests are answered meanwhile.
    const request = jsonLength >= OFF_THREAD_BYTES ? await ctx.parsers.parse(v.signature, body, jsonLength) : parseInfer(v.signature, body, jsonLength);
    if (this.answered) return;
    if (request.shmInputs !== undefined || request.shmOutputs !== undefined) {
      this.held = await ctx.shm.stage(request, ctx.budget, claim);
      if (this.answered) return;
    }
    const parsed = performance.now();
    this.inputMs = parsed - parseStart;
    if (trace !== null) step(trace, 'parse', parseStart, parsed);
    // A priority past the model's levels is refused, also for a run that would go inline.
    const priority = admit(v, request, name);
    // A run the pool does inline is over before this returns: no timer, no signal, no
    // cancel on close, no promise (a signal's listeners alone cost more than a tiny run).
    // A sequence's runs always queue (lib/sequence.js).
    let tensors = request.sequence === undefined ? runNow(v.pool, request.inputs) : undefined;
    if (tensors !== undefined && trace !== null) runSteps(trace, { queueWaitMs: 0, computeMs: performance.now() - parsed }, parsed, performance.now());
    if (tensors === undefined) {
      const pending = this.offloaded(v, request, priority);
      // The pool has its copy of the inputs now: buffers read from shared memory serve the next request.
      if (request.shmInputs !== undefined) ctx.shm.recycle(request);
      tensors = await pending;
    } else if (request.shmInputs !== undefined) ctx.shm.recycle(request);
    if (this.answered) return;
    const formatStart = performance.now();
    if (request.shmOutputs !== undefined) await ctx.shm.deliver(request, this.held, tensors);
    let formatted = formatInfer(v.model.name, v.version, request.id, request.outputs, tensors, v.signature.labels);
    // Large float outputs are written off the event loop.
    if (formatted instanceof Promise) formatted = await formatted;
    if (this.answered) return;
    this.outputMs = performance.now() - formatStart;
    this.answered = true;
    if (ctx.state.draining) res.shouldKeepAlive = false;
    sendTensors(res, formatted);
    if (trace !== null) step(trace, 'write', formatStart, performance.now());
  }

  /** Answers a failure through outcomes.js. */
  fail(err) {
    const { name, v } = this.head;
    const o = outcomeOf(err, name, v);
    this.failure = o.message;
    // A run the server's own timer gave up on stays a timeout, whatever ends it after.
    if (this.outcome !== 'timeout') this.outcome = o.outcome;
    if (o.http !== 0) this.answer(o.http, o.message, o.headers, o.code);
  }

  /** Lets go of what the request held, and counts it. */
  finish() {
    const { ctx, name, started, claim, v } = this.head;
    if (this.held !== null) ctx.shm.letGo(this.held);
    ctx.budget.release(claim.bytes);
    // Names that are no model share one label: a client must not grow the series at will.
    const label = v !== undefined || ctx.repository.models.has(name) ? name : '_unknown';
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    ctx.metrics.count(label, v === undefined ? '' : v.version, this.outcome, seconds, 'rest', this.inputMs, this.outputMs);
    if (ctx.logging.verboseAt(1)) logRequest(ctx, name, v, this.outcome, seconds, 'rest');
    if (this.trace !== null) endTrace(this.trace, performance.now(), v === undefined ? undefined : v.version, this.outcome, this.failure);
    // Answered (or given up by its client): the response is written, the run is over.
    settle(ctx);
  }
}

/** The request once its body is read (or `bodyError` when it could not be): parsed, run, answered and counted. */
async function answerInfer(head, bodyError, body) {
  const exchange = new Exchange(head);
  try {
    if (bodyError !== null) throw bodyError;
    await exchange.respond(body);
  } catch (err) {
    exchange.fail(err);
  } finally {
    exchange.finish();
  }
}

module.exports = { infer };
