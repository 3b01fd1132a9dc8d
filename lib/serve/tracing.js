'use strict';

// Tracing through @opentelemetry/api, an optional peer dependency: without it, or without an
// SDK set up by the application, a request costs one non-recording span and nothing else.
// A W3C `traceparent` (REST header, gRPC metadata) makes a request's span a child of the
// caller's; its children are the request's parse, its run's queue wait and compute, and the
// answer's write, each timed where it happened.

const { version } = require('../../package.json');

let api = null;
try {
  api = require('@opentelemetry/api');
} catch {
  // Not installed: no tracing.
}

const tracer = api === null ? null : api.trace.getTracer('zgc-runtime', version);

/** version-traceid-parentid-flags, lowercase hex (https://www.w3.org/TR/trace-context/). */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-|$)/;

/** The caller's span context from `traceparent` (and `tracestate`), or undefined when it is not valid W3C. */
function remoteParent(traceparent, tracestate) {
  if (typeof traceparent !== 'string') return undefined;
  const header = traceparent.trim();
  const m = TRACEPARENT.exec(header);
  if (m === null) return undefined;
  const [, ver, traceId, spanId, flags] = m;
  // Version ff is invalid; version 00 has exactly four fields.
  if (ver === 'ff' || (ver === '00' && header.length !== 55)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  const context = { traceId, spanId, traceFlags: parseInt(flags, 16) & 1, isRemote: true };
  if (typeof tracestate === 'string' && tracestate !== '') context.traceState = api.createTraceState(tracestate);
  return context;
}

const epochMs = (t) => performance.timeOrigin + t;

/**
 * A request's trace, or null when nothing records it or the trace settings (`settings`,
 * trace-settings.js) leave it out: `{ span, context }`. `t0` is when the request began
 * (performance.now()).
 */
function startTrace(settings, model, protocol, t0, traceparent, tracestate) {
  if (tracer === null || !settings.take(model)) return null;
  const remote = remoteParent(traceparent, tracestate);
  const parent = remote === undefined ? api.ROOT_CONTEXT : api.trace.setSpanContext(api.ROOT_CONTEXT, remote);
  const span = tracer.startSpan(`infer ${model}`, { kind: api.SpanKind.SERVER, startTime: epochMs(t0), attributes: { 'zgc.model': model, 'zgc.protocol': protocol } }, parent);
  if (!span.isRecording()) return null;
  return { span, context: api.trace.setSpan(parent, span) };
}

/** A finished child span `name` of `trace`, from `start` to `end` (performance.now() times). */
function step(trace, name, start, end, attributes) {
  if (trace === null) return;
  const span = tracer.startSpan(name, { startTime: epochMs(start), attributes }, trace.context);
  span.end(epochMs(end));
}

/** The run's queue wait and compute as two steps ending at `end`, from its `timing`. */
function runSteps(trace, timing, submitted, end) {
  if (trace === null || timing.computeMs === undefined) return;
  const queued = submitted + timing.queueWaitMs;
  step(trace, 'queue', submitted, queued);
  step(trace, 'compute', queued, Math.min(end, queued + timing.computeMs));
}

/** Ends the request's span: its version, outcome and, for a failure, the message. */
function endTrace(trace, end, version, outcome, message) {
  if (trace === null) return;
  const { span } = trace;
  if (version !== undefined) span.setAttribute('zgc.version', version);
  span.setAttribute('zgc.outcome', outcome);
  if (outcome !== 'success') span.setStatus({ code: api.SpanStatusCode.ERROR, message });
  span.end(epochMs(end));
}

module.exports = { startTrace, step, runSteps, endTrace, remoteParent };
