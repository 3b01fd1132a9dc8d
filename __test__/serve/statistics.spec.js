'use strict';

// The statistics extension (issue 38) through the real tritonclient, HTTP and gRPC: what it
// reports is checked against the requests this test made and counted, and against /metrics
// read at the same moment.
const path = require('node:path');
const { rng, randomF32 } = require('../helpers');
const { makeRepository, servedRepo, pythonClient, hasClients } = require('../serve/setup');

const f = Math.fround;

const client = (protocol, port, plan) => pythonClient('statistics_client.py', protocol, [protocol, `127.0.0.1:${port}`], JSON.stringify(plan));

/** gRPC's JSON mapping gives uint64 as strings and leaves zero fields out: numbers, zeros back. */
const UINT64 = new Set(['count', 'ns', 'last_inference', 'inference_count', 'execution_count', 'batch_size']);
const DURATIONS = new Set(['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss']);
function numbers(value, key) {
  if (Array.isArray(value)) return value.map((v) => numbers(v));
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = numbers(v, k);
    return DURATIONS.has(key) ? { count: out.count ?? 0, ns: out.ns ?? 0 } : out;
  }
  return UINT64.has(key) ? Number(value) : value;
}

/** The value of one series of /metrics' text, by metric name and labels. */
function series(text, name, labels) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const inside = line.slice(name.length + 1, line.indexOf('}'));
    if (want.every((w) => inside.split(',').includes(w))) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

(hasClients ? describe : describe.skip)('the statistics extension over REST and gRPC (issue 38)', () => {
  const next = rng(38);
  const pairs = (n) => Array.from({ length: n }, () => [Array.from(randomF32(next, 4)), Array.from(randomF32(next, 4))]);
  const live = servedRepo(() => makeRepository().repo, ['--model-control', 'explicit']);

  test('counts what each client sent, per version, and agrees with /metrics', async () => {
    const before = Date.now();
    const httpPlan = { version: '1', ok: pairs(7), bad: 3 };
    const http = await client('http', live.server.port, httpPlan);
    const grpcPlan = { version: '2', ok: pairs(5), bad: 2 };
    const grpc = numbers(await client('grpc', live.grpcPort, grpcPlan));
    const metrics = await (await fetch(`${live.server.url}/metrics`)).text();
    const after = Date.now();

    // The runs themselves were right, and the bad requests refused.
    expect(http.sums).toEqual(httpPlan.ok.map(([a, b]) => a.map((x, i) => f(x + b[i]))));
    expect(grpc.sums).toEqual(grpcPlan.ok.map(([a, b]) => a.map((x, i) => f(x + b[i]))));
    expect(http.errors).toEqual(['400', '400', '400']);
    expect(grpc.errors).toEqual(['StatusCode.INVALID_ARGUMENT', 'StatusCode.INVALID_ARGUMENT']);

    const v1 = http.version.model_stats;
    expect(v1.map((m) => [m.name, m.version])).toEqual([['add', '1']]);
    const s1 = v1[0];
    expect(s1.inference_count).toBe(7);
    expect(s1.execution_count).toBe(7);
    expect(s1.inference_stats.success.count).toBe(7);
    expect(s1.inference_stats.fail.count).toBe(3);
    expect(s1.inference_stats.compute_infer.count).toBe(7);
    expect(s1.inference_stats.compute_input.count).toBe(7);
    expect(s1.inference_stats.compute_output.count).toBe(7);
    expect(s1.last_inference).toBeGreaterThanOrEqual(before);
    expect(s1.last_inference).toBeLessThanOrEqual(after);
    for (const k of ['success', 'fail', 'compute_input', 'compute_infer', 'compute_output']) expect(s1.inference_stats[k].ns).toBeGreaterThan(0);
    // No response cache; one batch size, 1, whose figures are the version's own.
    expect([s1.inference_stats.cache_hit, s1.inference_stats.cache_miss]).toEqual([{ count: 0, ns: 0 }, { count: 0, ns: 0 }]);
    const { compute_input: input, compute_infer: infer, compute_output: output } = s1.inference_stats;
    expect(s1.batch_stats).toEqual([{ batch_size: 1, compute_input: input, compute_infer: infer, compute_output: output }]);
    expect(s1.memory_usage).toEqual([]);
    // A version that never ran has no batch figures.
    expect(http.all.model_stats.find((m) => m.name === 'status').batch_stats).toEqual([]);

    // gRPC's view, later: version 2's own counts, and version 1 as HTTP left it.
    const s2 = grpc.version.model_stats[0];
    expect([s2.name, s2.version, s2.inference_count, s2.execution_count, s2.inference_stats.fail.count]).toEqual(['add', '2', 5, 5, 2]);
    expect(grpc.model.model_stats.map((m) => [m.version, m.inference_count]).sort()).toEqual([['1', 7], ['2', 5]]);
    expect(grpc.all.model_stats.map((m) => `${m.name}/${m.version}`).sort()).toEqual(['add/1', 'add/2', 'add1m/1', 'dtypes/1', 'slow/1', 'slowtimeout/1', 'status/1']);
    expect(grpc.unknown).toEqual(['StatusCode.NOT_FOUND', 'unknown model "no-such-model"']);
    expect(http.unknown).toEqual(['404', 'unknown model "no-such-model"']);

    // /metrics says the same, for both versions (read after both clients; no request since).
    const now = (await (await fetch(`${live.server.url}/v2/models/add/stats`)).json()).model_stats;
    for (const s of now) {
      const labels = { model: 'add', version: s.version };
      expect(series(metrics, 'zgc_inference_requests_total', { ...labels, outcome: 'success' })).toBe(s.inference_stats.success.count);
      expect(series(metrics, 'zgc_inference_requests_total', { ...labels, outcome: 'bad_request' })).toBe(s.inference_stats.fail.count);
      expect(series(metrics, 'zgc_compute_seconds_count', labels)).toBe(s.execution_count);
      expect(series(metrics, 'zgc_queue_wait_seconds_count', labels)).toBe(s.inference_stats.queue.count);
      // Both from the same histograms: the sums agree to the nanosecond's rounding.
      expect(Math.abs(series(metrics, 'zgc_compute_seconds_sum', labels) * 1e9 - s.inference_stats.compute_infer.ns)).toBeLessThan(1000);
      expect(Math.abs(series(metrics, 'zgc_queue_wait_seconds_sum', labels) * 1e9 - s.inference_stats.queue.ns)).toBeLessThan(1000);
    }
  }, 120000);

  test('REST paths: every model, one model, one version; an unknown version is 404', async () => {
    const all = await (await fetch(`${live.server.url}/v2/models/stats`)).json();
    const one = await (await fetch(`${live.server.url}/v2/models/add/stats`)).json();
    const version = await (await fetch(`${live.server.url}/v2/models/add/versions/2/stats`)).json();
    expect(all.model_stats.filter((m) => m.name === 'add')).toEqual(one.model_stats);
    expect(version.model_stats).toEqual(one.model_stats.filter((m) => m.version === '2'));
    const missing = await fetch(`${live.server.url}/v2/models/add/versions/9/stats`);
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatch(/^model "add" has no version "9" being served/);
    const post = await fetch(`${live.server.url}/v2/models/stats`, { method: 'POST' });
    expect([post.status, post.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
    const meta = await (await fetch(`${live.server.url}/v2`)).json();
    expect(meta.extensions).toContain('statistics');
    // A model that serves no version has nothing to report: no error.
    expect((await fetch(`${live.server.url}/v2/repository/models/status/unload`, { method: 'POST' })).status).toBe(200);
    expect(await (await fetch(`${live.server.url}/v2/models/status/stats`)).json()).toEqual({ model_stats: [] });
  });
});
