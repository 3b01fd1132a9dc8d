'use strict';

// Tracing (issue 38): with an OpenTelemetry SDK and its in-memory exporter set up in this
// process, as an application would, requests from the real tritonclient (HTTP and gRPC) with a
// W3C traceparent make a server span that is the caller's span's child, with parse, queue,
// compute and write spans under it, in that order; a failed request's span says so.
const path = require('node:path');
const api = require('@opentelemetry/api');
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const { makeRepository, servedRepo, pythonClient, hasClients } = require('../serve/setup');


const client = (protocol, port, ok, bad) => pythonClient('tracing_client.py', protocol, [protocol, `127.0.0.1:${port}`, ok, bad]);

const hex = (n) => Array.from({ length: n }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');
const ns = ([s, n]) => BigInt(s) * 1000000000n + BigInt(n);

(hasClients ? describe : describe.skip)('tracing through @opentelemetry/api (issue 38)', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  beforeAll(() => api.trace.setGlobalTracerProvider(provider));
  const live = servedRepo(() => makeRepository().repo);
  afterAll(async () => {
    await provider.shutdown();
    api.trace.disable();
  });

  for (const protocol of ['http', 'grpc']) {
    test(`${protocol}: the server span is the caller's child, with parse, queue, compute and write in order`, async () => {
      exporter.reset();
      const caller = { traceId: hex(32), spanId: hex(16) };
      const failing = { traceId: hex(32), spanId: hex(16) };
      const seen = await client(protocol, protocol === 'http' ? live.server.port : live.grpcPort, `00-${caller.traceId}-${caller.spanId}-01`, `00-${failing.traceId}-${failing.spanId}-01`);
      expect(seen.ok).toEqual([0, 2, 4, 6]);
      const spans = exporter.getFinishedSpans();
      const roots = spans.filter((s) => s.name === 'infer add');
      expect(roots).toHaveLength(3);

      const root = roots.find((s) => s.spanContext().traceId === caller.traceId);
      expect(root.kind).toBe(api.SpanKind.SERVER);
      expect(root.parentSpanContext.spanId).toBe(caller.spanId);
      expect(root.parentSpanContext.isRemote).toBe(true);
      expect(root.attributes).toEqual({ 'zgc.model': 'add', 'zgc.protocol': protocol === 'http' ? 'rest' : 'grpc', 'zgc.version': '2', 'zgc.outcome': 'success' });
      const children = spans.filter((s) => s.parentSpanContext && s.parentSpanContext.spanId === root.spanContext().spanId);
      expect(children.map((s) => s.name).sort()).toEqual(['compute', 'parse', 'queue', 'write']);
      const at = Object.fromEntries(children.map((s) => [s.name, { start: ns(s.startTime), end: ns(s.endTime) }]));
      // Each within the request's span, one after the other.
      const order = ['parse', 'queue', 'compute', 'write'];
      expect(at.parse.start).toBeGreaterThanOrEqual(ns(root.startTime));
      for (let i = 0; i < order.length; i++) {
        expect(at[order[i]].end).toBeGreaterThanOrEqual(at[order[i]].start);
        if (i > 0) expect(at[order[i]].start).toBeGreaterThanOrEqual(at[order[i - 1]].end - 1000n);
      }
      expect(at.write.end).toBeLessThanOrEqual(ns(root.endTime));

      const failed = roots.find((s) => s.spanContext().traceId === failing.traceId);
      expect(failed.status).toEqual({ code: api.SpanStatusCode.ERROR, message: seen.bad });
      expect(failed.attributes['zgc.outcome']).toBe('bad_request');
      // No traceparent: a trace of its own.
      const own = roots.find((s) => s !== root && s !== failed);
      expect(own.parentSpanContext).toBeUndefined();
      expect([caller.traceId, failing.traceId]).not.toContain(own.spanContext().traceId);
    }, 60000);
  }
});

describe('traceparent (W3C trace context)', () => {
  const { remoteParent } = require('../../lib/serve/tracing');
  const id = '4bf92f3577b34da6a3ce929d0e0e4736';
  const parent = '00f067aa0ba902b7';
  test.each([
    [`00-${id}-${parent}-01`, { traceId: id, spanId: parent, traceFlags: 1, isRemote: true }],
    [`00-${id}-${parent}-00`, { traceId: id, spanId: parent, traceFlags: 0, isRemote: true }],
    // A later version may add fields after a dash.
    [`01-${id}-${parent}-03-extra`, { traceId: id, spanId: parent, traceFlags: 1, isRemote: true }],
  ])('%s is the parent', (header, expected) => {
    expect(remoteParent(header)).toEqual(expected);
  });
  test('spaces around the header are no part of it; a trace id may end in zeros', () => {
    expect(remoteParent(`  00-${id}-${parent}-01 `)).toEqual({ traceId: id, spanId: parent, traceFlags: 1, isRemote: true });
    const zeros = `${id.slice(0, 24)}00000000`;
    expect(remoteParent(`00-${zeros}-00000000000000f7-01`)).toEqual({ traceId: zeros, spanId: '00000000000000f7', traceFlags: 1, isRemote: true });
  });
  test('tracestate comes along, when there is one', () => {
    expect(remoteParent(`00-${id}-${parent}-01`, 'vendor=1,other=x').traceState.serialize()).toBe('vendor=1,other=x');
    expect(remoteParent(`00-${id}-${parent}-01`, '')).not.toHaveProperty('traceState');
  });
  test.each([`ff-${id}-${parent}-01`, `00-${'0'.repeat(32)}-${parent}-01`, `00-${id}-${'0'.repeat(16)}-01`, `00-${id.toUpperCase()}-${parent}-01`, `00-${id}-${parent}-01-extra`, `00-${id}-${parent}`, 'garbage', undefined])('%s is no parent', (header) => {
    expect(remoteParent(header)).toBeUndefined();
  });
});
