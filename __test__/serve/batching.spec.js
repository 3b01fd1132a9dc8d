'use strict';

// Dynamic batching in serve (issue 39): model "affine" is served from its batch variants 1, 4
// and 8 (config.json "dynamicBatching"). The real tritonclient, HTTP and gRPC, sends 200
// requests of 1 to 3 rows at once; every answer is compared with the same rows run alone,
// synchronously, in this process, and /metrics counts the batches.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { load } = require('../..');
const { fixture } = require('../fixtures/manifest');
const { rng } = require('../helpers');
const { formatNpy } = require('../../lib/npy');
const { writeModel, servedRepo, pythonClient, hasClients, loadFailure } = require('../serve/setup');

const STATUS = { http: '400', grpc: 'StatusCode.INVALID_ARGUMENT' };

function makeRepo() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-batching-'));
  // A 50 ms delay: on a loaded machine one turn of the event loop can outlast a few ms, and
  // requests that arrive in turns further apart than the delay each run alone.
  const dir = writeModel(repo, 'affine', { 1: 'affine-b1' }, { instances: 2, dynamicBatching: { variants: { 1: 'model.so', 4: 'model_b4.so', 8: 'model_b8.so' }, maxQueueDelayMs: 50 } });
  fs.copyFileSync(fixture('affine-b4'), path.join(dir, '1', 'model_b4.so'));
  fs.copyFileSync(fixture('affine-b8'), path.join(dir, '1', 'model_b8.so'));
  // The 1M add as one batch variant of 1,048,576 rows of one element: requests of more than 1 MB.
  writeModel(repo, 'wide', { 1: 'add-1m' }, { instances: 1, dynamicBatching: { variants: { 1048576: 'model.so' } } });
  // A batcher that would wait a minute for others.
  const patient = writeModel(repo, 'patient', { 1: 'affine-b1' }, { instances: 1, dynamicBatching: { variants: { 1: 'model.so', 4: 'model_b4.so' }, maxQueueDelayMs: 60000 } });
  fs.copyFileSync(fixture('affine-b4'), path.join(patient, '1', 'model_b4.so'));
  // Rows reaching 4 go at once, whatever the minute's delay.
  const preferred = writeModel(repo, 'preferred', { 1: 'affine-b1' }, { instances: 1, dynamicBatching: { variants: { 1: 'model.so', 4: 'model_b4.so', 8: 'model_b8.so' }, maxQueueDelayMs: 60000, preferredBatchSizes: [4] } });
  fs.copyFileSync(fixture('affine-b4'), path.join(preferred, '1', 'model_b4.so'));
  fs.copyFileSync(fixture('affine-b8'), path.join(preferred, '1', 'model_b8.so'));
  // Warmed up with requests of three rows from x.npy (s random): two runs of the batch-4 variant.
  const warm = writeModel(repo, 'warmbatch', { 1: 'affine-b1' }, { instances: 1, dynamicBatching: { variants: { 1: 'model.so', 4: 'model_b4.so' } }, warmup: [{ name: 'rows', count: 2, inputs: { x: { file: 'x.npy' }, s: 'random' } }] }, { 'x.npy': formatNpy('f32', [3, 4], new Float32Array(12).fill(1)) });
  fs.copyFileSync(fixture('affine-b4'), path.join(warm, '1', 'model_b4.so'));
  // The variants' instances in processes of their own.
  if (process.platform === 'linux') {
    const iso = writeModel(repo, 'iso', { 1: 'affine-b1' }, { instances: 2, isolate: 'process', dynamicBatching: { variants: { 1: 'model.so', 4: 'model_b4.so' }, maxQueueDelayMs: 50 } });
    fs.copyFileSync(fixture('affine-b4'), path.join(iso, '1', 'model_b4.so'));
  }
  return repo;
}

/** 200 requests of 1 to 3 rows of values exact in f32 (so that JSON carries them exactly). */
function requests(seed) {
  const random = rng(seed);
  return Array.from({ length: 200 }, () => {
    const rows = 1 + Math.floor(random() * 3);
    return { x: Array.from({ length: rows * 4 }, () => Math.round(random() * 64 - 32) / 4), s: Array.from({ length: rows }, () => Math.round(random() * 16 - 8) / 2) };
  });
}

/** A request's rows run one by one on the batch-1 variant. */
function alone(rt, { x, s }) {
  const y = [];
  const total = [];
  for (let r = 0; r < s.length; r++) {
    const [yr, tr] = rt.run({ x: x.slice(r * 4, r * 4 + 4), s: [s[r]] });
    y.push(...yr.data);
    total.push(...tr.data);
  }
  return { shape: [[s.length, 3], [s.length]], y, total };
}

/** The batch-rows histogram and padded rows of /metrics: { buckets: {le: n}, count, sum, padded }. */
async function batchMetrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const buckets = {};
  for (const m of text.matchAll(/^zgc_batch_rows_bucket\{model="affine",version="1",le="([^"]+)"\} (\d+)$/gm)) buckets[m[1]] = Number(m[2]);
  // No series before the model's first run.
  const one = (name) => Number((new RegExp(`^${name}\\{model="affine",version="1"\\} (\\d+)$`, 'm').exec(text) || [])[1] ?? 0);
  return { buckets, count: one('zgc_batch_rows_count'), sum: one('zgc_batch_rows_sum'), padded: one('zgc_batch_padded_rows_total') };
}

(hasClients ? describe : describe.skip)('dynamic batching over batch variants (issue 39)', () => {
  const live = servedRepo(makeRepo);
  let rt;
  beforeAll(() => {
    rt = load(fixture('affine-b1'));
  });
  afterAll(() => rt.close());

  for (const [protocol, seed] of [['http', 1], ['grpc', 2]]) {
    test(`${protocol}: 200 concurrent requests each get their own rows, as run alone; /metrics counts the batches`, async () => {
      const before = await batchMetrics(live.server.url);
      const sent = requests(seed);
      const seen = await pythonClient('batching_client.py', protocol, [protocol, `127.0.0.1:${protocol === 'http' ? live.server.port : live.grpcPort}`], JSON.stringify(sent));
      expect(seen.results.length).toBe(200);
      seen.results.forEach((got, i) => expect(got).toEqual(alone(rt, sent[i])));
      // The batch dimension is -1, as Triton shows it.
      expect(seen.shapes).toEqual({ x: [-1, 4], s: [-1], output_0: [-1, 3], output_1: [-1] });
      expect(seen.tooMany).toEqual([STATUS[protocol], 'input "x": 9 rows given, the model takes 1 to 8 (its largest batch variant)']);
      expect(seen.mismatched).toEqual([STATUS[protocol], 'input "s": 3 rows given, input "x" has 2: every input of a request has the same rows']);
      const rows = sent.reduce((n, r) => n + r.s.length, 0);
      const m = await batchMetrics(live.server.url);
      // Every row counted once, in fewer runs than requests; a run's rows plus its padding fill its variant.
      expect(m.sum - before.sum).toBe(rows);
      expect(m.count - before.count).toBeLessThan(200);
      expect(Object.keys(m.buckets)).toEqual(['1', '4', '8', '+Inf']);
      expect(m.buckets['+Inf']).toBe(m.count);
      expect(m.buckets['1'] + (m.buckets['4'] - m.buckets['1']) * 4 + (m.buckets['8'] - m.buckets['4']) * 8).toBe(m.sum + m.padded);
    }, 120000);
  }

  for (const protocol of ['http', 'grpc']) {
    test(`${protocol}: a request parsed on a parser thread gets its rows' outputs`, async () => {
      const rows = 300000;
      const seen = await pythonClient('batching_client.py', protocol, [protocol, `127.0.0.1:${protocol === 'http' ? live.server.port : live.grpcPort}`, 'wide', String(rows)]);
      // Σ (k + 1) for k < rows.
      expect(seen).toEqual({ shape: [rows], sum: (rows * (rows + 1)) / 2 });
    }, 60000);
  }

  test('model metadata and config show the batching; the server metadata names no extension Triton has not', async () => {
    const meta = await (await fetch(`${live.server.url}/v2/models/affine`)).json();
    expect(meta.inputs).toEqual([{ name: 'x', datatype: 'FP32', shape: [-1, 4] }, { name: 's', datatype: 'FP32', shape: [-1] }]);
    const config = await (await fetch(`${live.server.url}/v2/models/affine/config`)).json();
    // Triton's ModelConfig: the largest variant's rows, the delay in microseconds, the variants a parameter.
    expect(config).toMatchObject({ max_batch_size: 8, input: [{ name: 'x', dims: [4] }, { name: 's', dims: [] }], dynamic_batching: { max_queue_delay_microseconds: 50000 } });
    expect(JSON.parse(config.parameters['dynamic_batching.variants'].string_value)).toEqual({ 1: 'model.so', 4: 'model_b4.so', 8: 'model_b8.so' });
    // Dynamic batching is no protocol extension: Triton lists none for it.
    expect((await (await fetch(`${live.server.url}/v2`)).json()).extensions).not.toContain('dynamic_batching');
  });

  test.each([
    ['a first dimension of 0', { x: [0, 4], s: [0] }, 'input "x": 0 rows given, the model takes 1 to 8 (its largest batch variant)'],
    ['another row shape', { x: [1, 3], s: [1] }, 'input "x": shape [1,3] given, the model takes [-1,4] (-1: 1 to 8 rows)'],
    ['a negative first dimension', { x: [-1, 4], s: [1] }, 'input "x": -1 rows given, the model takes 1 to 8 (its largest batch variant)'],
    ['a fractional first dimension', { x: [1.5, 4], s: [1] }, 'input "x": "shape" must be an array of non-negative integers, got [1.5,4]'],
  ])('REST refuses %s, naming it', async (_, shapes, message) => {
    const body = { inputs: [{ name: 'x', datatype: 'FP32', shape: shapes.x, data: [] }, { name: 's', datatype: 'FP32', shape: shapes.s, data: [] }] };
    const r = await fetch(`${live.server.url}/v2/models/affine/infer`, { method: 'POST', body: JSON.stringify(body) });
    expect(r.status).toBe(400);
    expect((await r.json()).error).toBe(message);
  });

  test('preferredBatchSizes: two requests of two rows go at once as one run of 4, not after the minute\'s delay', async () => {
    const sent = [{ x: [1, 2, 3, 4, 5, 6, 7, 8], s: [1, 2] }, { x: [0, 0, 0, 1, 1, 0, 0, 0], s: [-1, 0.5] }];
    const answers = await Promise.all(sent.map(async ({ x, s }) => {
      const body = { inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 4], data: x }, { name: 's', datatype: 'FP32', shape: [2], data: s }] };
      const { outputs } = await (await fetch(`${live.server.url}/v2/models/preferred/infer`, { method: 'POST', body: JSON.stringify(body) })).json();
      return { shape: outputs.map((o) => o.shape), y: outputs[0].data, total: outputs[1].data };
    }));
    answers.forEach((got, i) => expect(got).toEqual(alone(rt, sent[i])));
  }, 10000);

  test('a warmup request takes its rows from its .npy files: three rows, run twice before the model is ready', async () => {
    const text = await (await fetch(`${live.server.url}/metrics`)).text();
    const one = (name) => Number(new RegExp(`^${name}\\{model="warmbatch",version="1"\\} (\\d+)$`, 'm').exec(text)[1]);
    expect([one('zgc_batch_rows_count'), one('zgc_batch_rows_sum'), one('zgc_batch_padded_rows_total')]).toEqual([2, 6, 2]);
    expect((await fetch(`${live.server.url}/v2/models/warmbatch/ready`)).status).toBe(200);
  });

  (process.platform === 'linux' ? test : test.skip)('isolated variants: 60 concurrent REST requests each get their own rows, in batches', async () => {
    const sent = requests(3).slice(0, 60);
    const before = Number(/^zgc_batch_rows_count\{model="iso",version="1"\} (\d+)$/m.exec(await (await fetch(`${live.server.url}/metrics`)).text())?.[1] ?? 0);
    const answers = await Promise.all(sent.map(async ({ x, s }) => {
      const body = { inputs: [{ name: 'x', datatype: 'FP32', shape: [s.length, 4], data: x }, { name: 's', datatype: 'FP32', shape: [s.length], data: s }] };
      const r = await fetch(`${live.server.url}/v2/models/iso/infer`, { method: 'POST', body: JSON.stringify(body) });
      const { outputs } = await r.json();
      return { shape: outputs.map((o) => o.shape), y: outputs[0].data, total: outputs[1].data };
    }));
    answers.forEach((got, i) => expect(got).toEqual(alone(rt, sent[i])));
    const text = await (await fetch(`${live.server.url}/metrics`)).text();
    const runs = Number(/^zgc_batch_rows_count\{model="iso",version="1"\} (\d+)$/m.exec(text)[1]) - before;
    expect(runs).toBeGreaterThan(0);
    expect(runs).toBeLessThan(60);
    // Only isolated models have the instance-process series: these are the iso model's.
    expect(text).toMatch(/^zgc_instances_alive\{model="iso",version="1"\} 2$/m);
    expect(text).toMatch(/^zgc_instance_crashes_total\{model="iso",version="1"\} 0$/m);
    expect(text).not.toMatch(/^zgc_instance_crashes_total\{model="affine"/m);
  }, 60000);

  test("a request's timeout is not waited out: with a 60 s delay, a 2 s timeout is answered before it", async () => {
    const body = { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }, { name: 's', datatype: 'FP32', shape: [1], data: [1] }], parameters: { timeout: 2000000 } };
    const r = await fetch(`${live.server.url}/v2/models/patient/infer`, { method: 'POST', body: JSON.stringify(body) });
    expect(r.status).toBe(200);
    expect((await r.json()).outputs[1].data).toEqual([10]);
  }, 20000);
});

describe('config.json "dynamicBatching" is checked when the model loads', () => {
  test.each([
    ['variants that are no object', { variants: [] }, /"dynamicBatching" must be \{ "variants": .*"variants" names none/],
    ['a size that is no positive integer', { variants: { 0: 'model.so' } }, /variant batch sizes are positive integers, got "0"/],
    ['a path', { variants: { 1: 'model.so', 4: '../model_b4.so' } }, /variant 4 must name a file in the version directory \(no path\), got "\.\.\/model_b4\.so"/],
    ['a file that is not there', { variants: { 1: 'model.so', 4: 'model_b4.so' } }, /"dynamicBatching" names model_b4\.so, which is not in .*\/1/],
    ['a negative delay', { variants: { 1: 'model.so' }, maxQueueDelayMs: -1 }, /"maxQueueDelayMs" must be a number >= 0, got -1/],
    ['a preferred size that is no variant', { variants: { 1: 'model.so' }, preferredBatchSizes: [4] }, /"preferredBatchSizes" must list variant batch sizes \(1\), got \[4\]/],
    ['an unknown key', { variants: { 1: 'model.so' }, delay: 1 }, /"dynamicBatching" has an unknown key "delay"/],
    ['variants of another graph', { variants: { 1: 'model.so', 4: 'other.so' } }, /the batch-4 variant's inputs \(a f32 \[batch\]; b f32 \[batch\]\) are not the batch-1 variant's \(x f32 \[batch, 4\]; s f32 \[batch\]\): variants must be one graph/],
    ['a warmup of more rows than the largest variant', { variants: { 1: 'model.so' } }, /warmup "w": .*x2\.npy has shape \(2, 4\), input "x" has shape \(-1, 4\) \(-1: 1 to 1 rows\)/, { x: 'x2.npy' }],
    ['a warmup file of another row shape', { variants: { 1: 'model.so' } }, /warmup "w": .*x13\.npy has shape \(1, 3\), input "x" has shape \(-1, 4\)/, { x: 'x13.npy' }],
    ['warmup files of different rows', { variants: { 1: 'model.so', 4: 'other.so' } }, /warmup "w": .*s1\.npy has 1 rows, .*x2\.npy has 2: every input of a request has the same rows/, { x: 'x2.npy', s: 's1.npy' }],
  ])('%s', async (_, dynamicBatching, message, warmupFiles = undefined) => {
    const failure = await loadFailure((repo) => {
      const warmup = warmupFiles === undefined ? undefined : [{ name: 'w', inputs: Object.fromEntries(Object.entries(warmupFiles).map(([k, file]) => [k, { file }])) }];
      const files = { 'x2.npy': formatNpy('f32', [2, 4], new Float32Array(8)), 'x13.npy': formatNpy('f32', [1, 3], new Float32Array(3)), 's1.npy': formatNpy('f32', [1], new Float32Array(1)) };
      const dir = writeModel(repo, 'affine', { 1: 'affine-b1' }, { dynamicBatching, ...(warmup ? { warmup } : {}) }, files);
      fs.copyFileSync(fixture(warmupFiles && warmupFiles.s ? 'affine-b4' : 'add'), path.join(dir, '1', 'other.so'));
    });
    expect(failure).toMatch(message);
  });
});

describe('checkBatching: config.json "dynamicBatching", checked as given', () => {
  const { checkBatching } = require('../../lib/serve/batching');
  const rule = '"dynamicBatching" must be { "variants": { "<batch size>": "<file beside model.so>", ... }, "maxQueueDelayMs": ms, "preferredBatchSizes": [sizes] }';
  test('defaults, and what it keeps', () => {
    expect(checkBatching(undefined, 'm')).toBe(undefined);
    expect(checkBatching({ variants: { 1: 'model.so' } }, 'm')).toEqual({ variants: { 1: 'model.so' }, maxQueueDelayMs: 0, preferredBatchSizes: undefined });
    expect(checkBatching({ variants: { 1: 'model.so', 999999999: 'b.so' }, maxQueueDelayMs: 0.5, preferredBatchSizes: [1] }, 'm')).toEqual({ variants: { 1: 'model.so', 999999999: 'b.so' }, maxQueueDelayMs: 0.5, preferredBatchSizes: [1] });
  });
  test.each([
    [null, `m: ${rule}, got null`],
    [[], `m: ${rule}, got []`],
    ['x', `m: ${rule}, got "x"`],
    [{}, `m: ${rule}; "variants" names none`],
    [{ variants: null }, `m: ${rule}; "variants" names none`],
    [{ variants: [] }, `m: ${rule}; "variants" names none`],
    [{ variants: 'model.so' }, `m: ${rule}; "variants" names none`],
    [{ variants: {} }, `m: ${rule}; "variants" names none`],
    [{ variants: { '01': 'model.so' } }, 'm: "dynamicBatching" variant batch sizes are positive integers, got "01"'],
    [{ variants: { 1234567890: 'model.so' } }, 'm: "dynamicBatching" variant batch sizes are positive integers, got "1234567890"'],
    [{ variants: { '1x': 'model.so' } }, 'm: "dynamicBatching" variant batch sizes are positive integers, got "1x"'],
    [{ variants: { x1: 'model.so' } }, 'm: "dynamicBatching" variant batch sizes are positive integers, got "x1"'],
    [{ variants: { 1: 3 } }, 'm: "dynamicBatching" variant 1 must name a file in the version directory (no path), got 3'],
    [{ variants: { 1: '.hidden.so' } }, 'm: "dynamicBatching" variant 1 must name a file in the version directory (no path), got ".hidden.so"'],
    [{ variants: { 1: 'model.so' }, maxQueueDelayMs: '5' }, 'm: "dynamicBatching" "maxQueueDelayMs" must be a number >= 0, got "5"'],
    [{ variants: { 1: 'model.so' }, maxQueueDelayMs: null }, 'm: "dynamicBatching" "maxQueueDelayMs" must be a number >= 0, got null'],
    [{ variants: { 1: 'model.so' }, preferredBatchSizes: 1 }, 'm: "dynamicBatching" "preferredBatchSizes" must list variant batch sizes (1), got 1'],
    [{ variants: { 1: 'model.so', 4: 'b.so' }, preferredBatchSizes: [4, 2] }, 'm: "dynamicBatching" "preferredBatchSizes" must list variant batch sizes (1, 4), got [4,2]'],
  ])('%j is refused', (value, message) => {
    expect(() => checkBatching(value, 'm')).toThrow(new Error(message));
  });
});
