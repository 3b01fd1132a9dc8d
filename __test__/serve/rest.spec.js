'use strict';

// `zgc-runtime serve`: the Open Inference Protocol over HTTP, checked with the real
// tritonclient[http] from PyPI, with plain HTTP for what a client library never sends, and
// against direct runs of the same artifacts.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { load } = require('../..');
const { createServer, createHandler } = require('../../lib/serve');
const { fixture } = require('../fixtures/manifest');
const { makeRepository, writeModel, startServer, listenInProcess, exited } = require('../serve/setup');

const { PYTHON } = require('../helpers');
const hasTritonClient = fs.existsSync(PYTHON) && spawnSync(PYTHON, ['-c', 'import tritonclient.http'], { stdio: 'ignore' }).status === 0;

/** Sends one request; resolves { status, headers, body (Buffer), json }. */
function request(url, { method = 'POST', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const buf = Buffer.concat(chunks);
        let json;
        try {
          json = JSON.parse(buf.toString('utf8'));
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, body: buf, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const tensor = (name, datatype, shape, data) => ({ name, datatype, shape, data });
const infer = (url, model, body, headers) => request(`${url}/v2/models/${model}/infer`, { body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body), headers });

/** A binary-extension body: the JSON header, then each input's bytes. */
function binaryBody(header, arrays) {
  const head = Buffer.from(JSON.stringify(header));
  const parts = arrays.map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength));
  return { body: Buffer.concat([head, ...parts]), headers: { 'inference-header-content-length': String(head.length), 'content-type': 'application/octet-stream' } };
}

/** Splits a binary response into its JSON header and each binary output, in order. */
function splitBinary(res) {
  const n = Number(res.headers['inference-header-content-length']);
  const header = JSON.parse(res.body.subarray(0, n).toString('utf8'));
  let at = n;
  const data = {};
  for (const o of header.outputs) {
    const size = o.parameters && o.parameters.binary_data_size;
    if (size !== undefined) {
      data[o.name] = res.body.subarray(at, at + size);
      at += size;
    }
  }
  return { header, data, rest: res.body.length - at };
}

const addAll = (a, b) => Array.from(a, (v, i) => Math.fround(v + b[i]));

let repo;
let params;
beforeAll(() => {
  ({ repo, params } = makeRepository());
});
afterAll(() => fs.rmSync(repo, { recursive: true, force: true }));

/** The dtypes fixture loaded directly and given the same parameters as the server gives it. */
function directDtypes() {
  const rt = load(fixture('dtypes'), { f16: 'bits' });
  for (const [name, p] of Object.entries(params)) (p.bind ? rt.bind : rt.set).call(rt, name, p.data);
  return rt;
}

(hasTritonClient ? describe : describe.skip)('the real tritonclient[http] against `zgc-runtime serve`', () => {
  let server;
  let seen;
  beforeAll(async () => {
    server = await startServer([repo, '--model-control', 'explicit']);
    const r = spawnSync(PYTHON, [path.join(testDir, 'serve', 'triton_client.py'), `${server.host}:${server.port}`], { encoding: 'utf8', timeout: 120000 });
    if (r.status !== 0) throw new Error(`triton_client.py failed (${r.status}): ${r.stderr}`);
    seen = JSON.parse(r.stdout);
  }, 150000);
  afterAll(async () => {
    server.child.kill('SIGTERM');
    expect(await exited(server.child)).toBe(0);
  });

  test('server metadata, liveness and readiness', () => {
    expect(seen.live).toBe(true);
    expect(seen.ready).toBe(true);
    expect(seen.server).toEqual({ name: 'zgc-runtime', version: require('../../package.json').version, extensions: expect.arrayContaining(['binary_tensor_data', 'model_repository']) });
  });

  test('model metadata lists the INPUT sources with protocol datatypes and the configured output names', () => {
    const rt = load(fixture('dtypes'));
    const inputs = rt.sources.filter((s) => s.kind === 'input');
    const datatype = { f32: 'FP32', f16: 'FP16', i8: 'INT8', bool: 'BOOL' };
    expect(seen.dtypes_metadata.inputs).toEqual(inputs.map((s) => ({ name: s.name, datatype: datatype[s.dtype], shape: s.shape })));
    expect(seen.dtypes_metadata.outputs).toEqual(rt.outputs.map((o, i) => ({ name: `o${i}`, datatype: datatype[o.dtype], shape: o.shape })));
    expect(seen.dtypes_metadata.inputs.map((i) => i.datatype)).toEqual(['FP32', 'FP16', 'INT8', 'BOOL']);
    rt.close();
    // Default output names, and the versions a model serves.
    expect(seen.add_v2_metadata).toMatchObject({ name: 'add', versions: ['1', '2'], outputs: [{ name: 'output_0', datatype: 'FP32', shape: [4] }] });
  });

  test('model readiness per version, and the repository index', () => {
    expect([seen.add_ready, seen.add_v2_ready, seen.add_v9_ready]).toEqual([true, true, false]);
    const rows = seen.index.map((r) => `${r.name}/${r.version}:${r.state}`);
    expect(rows).toEqual(['add/1:READY', 'add/2:READY', 'add1m/1:READY', 'dtypes/1:READY', 'slow/1:READY', 'slowtimeout/1:READY', 'status/1:READY']);
  });

  test.each(['json', 'binary'])('every dtype over %s equals a direct run with the same inputs and parameters', (mode) => {
    const runs = seen[`dtypes_${mode}`];
    expect(runs).toHaveLength(4);
    const rt = directDtypes();
    for (const [i, r] of runs.entries()) {
      expect(r.id).toBe(`rq-${i}`);
      expect(r.returned).toEqual(['o0', 'o1', 'o2', 'o3', 'o5']);
      const sizes = mode === 'binary' ? [24, 8, 5, 5, 4] : [null, null, null, null, null];
      expect(r.binary_sizes).toEqual(sizes);
      const { x, h, q, m } = r.inputs;
      const out = rt.run({ x: Float32Array.from(x.values), h: Uint16Array.from(h.bits), q: Int8Array.from(q.values), m: Uint8Array.from(m.values) });
      expect(r.outputs.o0.values).toEqual(Array.from(out[0].data));
      expect(r.outputs.o1.bits).toEqual(Array.from(out[1].data));
      expect(r.outputs.o2.values).toEqual(Array.from(out[2].data));
      expect(r.outputs.o3.values).toEqual(Array.from(out[3].data));
      expect(r.outputs.o5.values).toEqual(Array.from(out[5].data));
    }
    rt.close();
  });

  test('a 1M-element model over binary data gives a + b exactly', () => {
    expect(seen.add1m_max_error).toBe(0);
  });

  test("bodies tritonclient compresses (request_compression_algorithm gzip and deflate, JSON and binary) are answered right", () => {
    const x = [0, 1, 2, 3];
    const c = [0.5, -1.25, 3, 1e-3];
    const want = x.map((v, i) => Math.fround(v + Math.fround(c[i])));
    expect(Object.keys(seen.compressed).sort()).toEqual(['deflate_binary', 'deflate_json', 'gzip_binary', 'gzip_json']);
    for (const [how, data] of Object.entries(seen.compressed)) expect([how, data.map(Math.fround)]).toEqual([how, want]);
  });

  test('each error has its status and names the problem', () => {
    const e = seen.errors;
    expect(e.unknown_model).toEqual({ status: '404', message: 'unknown model "nope"' });
    expect(e.metadata_unknown.status).toBe('404');
    expect(e.unknown_version).toEqual({ status: '404', message: expect.stringMatching(/model "add" has no version "9".*versions: 1, 2/) });
    expect(e.unknown_input).toEqual({ status: '400', message: expect.stringMatching(/input "zz": the model has no such input \(its inputs: a, b\)/) });
    expect(e.missing_input).toEqual({ status: '400', message: expect.stringMatching(/input "b" is missing/) });
    expect(e.wrong_shape).toEqual({ status: '400', message: 'input "a": shape [5] given, the model takes [4]' });
    expect(e.wrong_datatype).toEqual({ status: '400', message: 'input "a": datatype "FP16" given, the model takes FP32' });
    expect(e.unknown_output).toEqual({ status: '400', message: expect.stringMatching(/no output "nope" \(its outputs: output_0\)/) });
    expect(e.model_status).toEqual({ status: '500', message: expect.stringMatching(/model "status" version 1 failed: .*SIZE_MISMATCH/) });
    expect(e.timeout).toEqual({ status: '504', message: 'model "slowtimeout" did not answer within 100 ms' });
    // The model that returned an error status serves the next request (binary this time).
    expect(e.model_after_status).toEqual([3.5]);
  });

  test('200 concurrent infers, half JSON and half binary, all right and with their ids', () => {
    expect(seen.concurrent).toEqual({ count: 200, wrong: 0, ids_echoed: 200 });
  });

  test('unload makes the model unready and its infers fail; load serves it again', () => {
    expect(seen.after_unload.ready).toBe(false);
    expect(seen.after_unload.infer.status).toBe('400');
    expect(seen.after_unload.infer.message).toMatch(/model "add" is not ready \(UNAVAILABLE: unloaded\)/);
    expect(seen.after_load).toEqual([0, 2, 4, 6]);
  });
});

describe('what a client library never sends (issue 14)', () => {
  let server;
  let url;
  beforeAll(async () => {
    server = await listenInProcess([repo, `solo=${fixture('add')}`, '--max-body', '2k', '--pool-size', '1']);
    url = server.url;
  });
  afterAll(async () => {
    await expect(server.stop()).resolves.toEqual({ drained: true, unanswered: 0 });
  });

  test('nested data and a single artifact given as name=path', async () => {
    const r = await infer(url, 'solo', { inputs: [tensor('a', 'FP32', [4], [[1, 2], [3, 4]].flat()), tensor('b', 'FP32', [4], [0.5, 0.5, 0.5, 0.5])] });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ model_name: 'solo', model_version: '1', outputs: [{ name: 'output_0', datatype: 'FP32', shape: [4], data: [1.5, 2.5, 3.5, 4.5] }] });
    // x is [2, 3]: nested rows are accepted, and a wrong nesting names the axis.
    const rt = directDtypes();
    const x = [[1, 2, 3], [4, 5, 6]];
    const good = await infer(url, 'dtypes', {
      inputs: [tensor('x', 'FP32', [2, 3], x), tensor('h', 'FP16', [4], [1, 2, 3, 4]), tensor('q', 'INT8', [5], [1, 2, 3, 4, 5]), tensor('m', 'BOOL', [5], [true, false, true, false, true])],
      outputs: [{ name: 'o0' }, { name: 'o3' }],
    });
    const direct = rt.run({ x: x.flat(), h: [1, 2, 3, 4], q: [1, 2, 3, 4, 5], m: [1, 0, 1, 0, 1] });
    expect(good.json.outputs).toEqual([
      { name: 'o0', datatype: 'FP32', shape: [2, 3], data: Array.from(direct[0].data) },
      { name: 'o3', datatype: 'BOOL', shape: [5], data: Array.from(direct[3].data, (v) => v === 1) },
    ]);
    rt.close();
    const bad = await infer(url, 'dtypes', { inputs: [tensor('x', 'FP32', [2, 3], [[1, 2], [3, 4], [5, 6]])] });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toBe('input "x": nested "data" does not match shape [2,3] at axis 0 (expected 2 entries, got 3)');
  });

  test.each([
    ['a body that is not JSON', '{"inputs": [', /^the request header is not JSON/],
    ['inputs that are not an array', { inputs: {} }, /^"inputs" must be an array of tensors, got an object/],
    ['a string where a number goes', { inputs: [tensor('a', 'FP32', [4], [1, 'x', 3, 4]), tensor('b', 'FP32', [4], [1, 2, 3, 4])] }, /^input "a": element 1 is "x"; FP32 takes numbers/],
    ['too few values', { inputs: [tensor('a', 'FP32', [4], [1, 2, 3]), tensor('b', 'FP32', [4], [1, 2, 3, 4])] }, /^input "a": "data" has 3 elements, shape \[4\] takes 4/],
    ['an FP32 value beyond its range', { inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 1e39]), tensor('b', 'FP32', [4], [1, 2, 3, 4])] }, /^input "a": element 3 is 1e\+39, beyond FP32's largest finite value/],
    ['an input given twice', { inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 4]), tensor('a', 'FP32', [4], [1, 2, 3, 4])] }, /^input "a" is given twice/],
    ['a non-string id', { id: 7, inputs: [] }, /^"id" must be a string, got 7/],
    ['neither data nor binary_data_size', { inputs: [{ name: 'a', datatype: 'FP32', shape: [4] }, tensor('b', 'FP32', [4], [1, 2, 3, 4])] }, /^input "a": has neither "data" nor binary_data_size/],
  ])('400 for %s', async (_, body, message) => {
    const r = await infer(url, 'solo', body);
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(message);
  });

  test('400 for INT8 out of range, a BOOL that is not true/false, FP16 beyond its range', async () => {
    const inputs = (q, m, h) => ({ inputs: [tensor('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]), tensor('h', 'FP16', [4], h), tensor('q', 'INT8', [5], q), tensor('m', 'BOOL', [5], m)] });
    const ok = { q: [1, 2, 3, 4, 5], m: [true, true, false, false, true], h: [1, 2, 3, 4] };
    const cases = [
      [{ ...ok, q: [1, 2, 300, 4, 5] }, 'input "q": element 2 is 300; INT8 takes integers from -128 to 127'],
      [{ ...ok, q: [1, 2, 1.5, 4, 5] }, 'input "q": element 2 is 1.5; INT8 takes integers from -128 to 127'],
      [{ ...ok, m: [true, 'yes', false, false, true] }, 'input "m": element 1 is "yes"; BOOL takes true or false'],
      [{ ...ok, h: [1, 2, 70000, 4] }, "input \"h\": element 2 is 70000, beyond FP16's largest finite value 65504"],
    ];
    for (const [c, message] of cases) {
      const r = await infer(url, 'dtypes', inputs(c.q, c.m, c.h));
      expect([r.status, r.json.error]).toEqual([400, message]);
    }
  });

  test('binary requests: aligned in place, misaligned copied, and each size rule', async () => {
    const a = Float32Array.of(1, 2, 3, 4);
    const b = Float32Array.of(10, 20, 30, 40);
    const header = (extra = {}) => ({
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } },
        { name: 'b', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } },
      ],
      outputs: [{ name: 'output_0', parameters: { binary_data: true } }],
      ...extra,
    });
    // Header lengths of every remainder mod 8 put the binary part at every alignment.
    for (let pad = 0; pad < 8; pad++) {
      const { body, headers } = binaryBody(header({ id: 'x'.repeat(pad) }), [a, b]);
      const r = await infer(url, 'solo', body, headers);
      expect(r.status).toBe(200);
      const { header: h, data, rest } = splitBinary(r);
      expect(h.id).toBe('x'.repeat(pad));
      expect(h.outputs).toEqual([{ name: 'output_0', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } }]);
      expect(Array.from(new Float32Array(data.output_0.buffer.slice(data.output_0.byteOffset, data.output_0.byteOffset + 16)))).toEqual(addAll(a, b));
      expect(rest).toBe(0);
    }
    // binary_data_output for every output, with a JSON input next to a binary one.
    const mixed = binaryBody({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: [1, 1, 1, 1] }, { name: 'b', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } }], parameters: { binary_data_output: true } }, [b]);
    const m = await infer(url, 'solo', mixed.body, mixed.headers);
    expect(Array.from(new Float32Array(new Uint8Array(splitBinary(m).data.output_0).buffer))).toEqual([11, 21, 31, 41]);

    // JSON has no number for NaN or Infinity: such outputs go as null (binary keeps them).
    const nonFinite = binaryBody({ inputs: header().inputs }, [Float32Array.of(NaN, Infinity, 1, 2), Float32Array.of(1, 1, 1, 1)]);
    const nf = await infer(url, 'solo', nonFinite.body, nonFinite.headers);
    // Written as Python's json writes them (JSON.parse refuses these tokens; tritonclient reads them).
    expect(nf.body.toString()).toContain('"data":[NaN,Infinity,2,3]');

    const wrong = [
      [binaryBody(header(), [a, b.subarray(0, 3)]), /^input "b": binary_data_size 16 runs past the end of the request's binary data \(12 bytes left\)/],
      [binaryBody({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 12 } }, { name: 'b', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } }] }, [a.subarray(0, 3), b]), /^input "a": binary_data_size is 12 bytes, FP32 of shape \[4\] takes 16/],
      [binaryBody(header(), [a, b, Float32Array.of(9)]), /^the request has 4 bytes of binary data that no input's binary_data_size accounts for/],
    ];
    for (const [{ body, headers }, message] of wrong) {
      const r = await infer(url, 'solo', body, headers);
      expect([r.status, r.json.error]).toEqual([400, expect.stringMatching(message)]);
    }
    const long = await infer(url, 'solo', '{}', { 'inference-header-content-length': '999' });
    expect([long.status, long.json.error]).toEqual([400, 'Inference-Header-Content-Length is 999, the body has only 2 bytes']);
    // A BOOL byte other than 0 or 1, caught by the runtime's own check, named as the input.
    const bools = binaryBody(
      {
        inputs: [
          tensor('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]),
          tensor('h', 'FP16', [4], [1, 2, 3, 4]),
          tensor('q', 'INT8', [5], [1, 2, 3, 4, 5]),
          { name: 'm', datatype: 'BOOL', shape: [5], parameters: { binary_data_size: 5 } },
        ],
      },
      [Uint8Array.of(0, 1, 2, 0, 1)],
    );
    const r = await infer(url, 'dtypes', bools.body, bools.headers);
    expect([r.status, r.json.error]).toEqual([400, 'model "dtypes" refused the request\'s inputs: source "m": bool element 2 is 2; bool values must be 0 or 1']);
  });

  test('413 for a body over --max-body, declared or chunked, and the server goes on', async () => {
    const big = JSON.stringify({ inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 4])], pad: 'x'.repeat(3000) });
    const declared = await infer(url, 'solo', big);
    expect([declared.status, declared.json.error]).toEqual([413, `the request body of ${big.length} bytes is over the server's limit of 2048 bytes`]);
    const chunked = await new Promise((resolve, reject) => {
      const req = http.request(`${url}/v2/models/solo/infer`, { method: 'POST', headers: { 'transfer-encoding': 'chunked' } }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode, json: JSON.parse(text) }));
      });
      req.on('error', reject);
      for (let i = 0; i < 6; i++) req.write('x'.repeat(500));
      req.end();
    });
    expect([chunked.status, chunked.json.error]).toEqual([413, "the request body is over the server's limit of 2048 bytes"]);
    const after = await infer(url, 'solo', { inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 4]), tensor('b', 'FP32', [4], [1, 2, 3, 4])] });
    expect(after.json.outputs[0].data).toEqual([2, 4, 6, 8]);
  });

  test('503 with Retry-After when the queue is full; the accepted requests are answered right', async () => {
    // slow: one instance, 300 ms a run, one waiting request at most.
    const body = (i) => ({ id: String(i), inputs: [tensor('x', 'FP32', [4], [i, i, i, i])] });
    const replies = await Promise.all([0, 1, 2, 3].map((i) => infer(url, 'slow', body(i))));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 503, 503]);
    for (const r of replies) {
      if (r.status === 503) {
        expect(r.headers['retry-after']).toBe('1');
        expect(r.json.error).toBe('model "slow" has 1 requests waiting already: try again shortly');
      } else {
        const i = Number(r.json.id);
        expect(r.json.outputs[0].data).toEqual([2 * i, 2 * i, 2 * i, 2 * i]);
      }
    }
  });

  test('404 for unknown routes and models, 405 for the wrong method', async () => {
    expect((await request(`${url}/v2/nothing`, { method: 'GET' })).status).toBe(404);
    expect((await request(`${url}/v2/models/nope`, { method: 'GET' })).json).toEqual({ error: 'unknown model "nope"' });
    expect((await request(`${url}/v2/models/solo/versions/3/ready`, { method: 'GET' })).status).toBe(404);
    const wrong = await request(`${url}/v2/models/solo/infer`, { method: 'GET' });
    expect([wrong.status, wrong.headers.allow, wrong.json.error]).toEqual([405, 'POST', 'GET /v2/models/solo/infer: use POST']);
    expect((await request(`${url}/v2/health/live`, { method: 'POST' })).status).toBe(405);
  });

  test('metrics count requests by model and outcome and histogram every run', async () => {
    const before = await request(`${url}/metrics`, { method: 'GET' });
    const value = (text, line) => {
      const m = new RegExp(`^${line.replace(/[{}"+.]/g, '\\$&')} (\\S+)$`, 'm').exec(text);
      return m ? Number(m[1]) : 0;
    };
    const count = (text, outcome) => value(text, `zgc_inference_requests_total{model="solo",version="1",outcome="${outcome}",protocol="rest"}`);
    const runs = (text) => value(text, 'zgc_compute_seconds_count{model="solo",version="1"}');
    const ok = { inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 4]), tensor('b', 'FP32', [4], [1, 2, 3, 4])] };
    for (let i = 0; i < 5; i++) await infer(url, 'solo', ok);
    for (let i = 0; i < 3; i++) await infer(url, 'solo', { inputs: [] });
    const after = (await request(`${url}/metrics`, { method: 'GET' })).body.toString();
    expect(count(after, 'success') - count(before.body.toString(), 'success')).toBe(5);
    expect(count(after, 'bad_request') - count(before.body.toString(), 'bad_request')).toBe(3);
    // Bad requests never reach the model: only the five runs are in the compute histogram.
    expect(runs(after) - runs(before.body.toString())).toBe(5);
    expect(value(after, 'zgc_compute_seconds_bucket{model="solo",version="1",le="+Inf"}')).toBe(runs(after));
    expect(after).toMatch(/^zgc_queue_depth\{model="slow",version="1"\} 0$/m);
    expect(after).toMatch(/^zgc_runs_in_flight\{model="solo",version="1"\} 0$/m);
    expect(after).toMatch(/^# TYPE zgc_queue_wait_seconds histogram$/m);
    expect(after).toMatch(/^process_resident_memory_bytes \d+/m);
    // Requests for models that do not exist share one label, however many names are tried.
    for (let i = 0; i < 3; i++) await infer(url, `nope-${i}`, ok);
    const unknown = (await request(`${url}/metrics`, { method: 'GET' })).body.toString();
    expect(unknown).not.toMatch(/nope-/);
    expect(value(unknown, 'zgc_inference_requests_total{model="_unknown",version="",outcome="not_found",protocol="rest"}')).toBeGreaterThanOrEqual(3);
  });
});

describe('reloading and shutting down (issue 14)', () => {
  test('a changed model.so reloads under load without dropping a request; a broken one keeps the old serving', async () => {
    // Outside the shared repository, which the next test serves whole.
    const own = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'zgc-swap-'));
    const dir = writeModel(own, 'swap', { 1: 'add' }, { instances: 2 });
    const server = await listenInProcess([`swap=${dir}`, '--model-control', 'poll', '--poll-ms', '50']);
    const body = JSON.stringify({ inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 4]), tensor('b', 'FP32', [4], [1, 1, 1, 1])] });
    const once = [2, 3, 4, 5];
    const thrice = once.map((v) => 3 * v);
    const seen = { once: 0, thrice: 0, other: [] };
    let stop = false;
    const client = async () => {
      while (!stop) {
        const r = await infer(server.url, 'swap', body);
        const data = r.json && r.json.outputs ? r.json.outputs[0].data.join() : `${r.status} ${r.body}`;
        if (data === once.join()) seen.once++;
        else if (data === thrice.join()) seen.thrice++;
        else seen.other.push(data);
      }
    };
    const clients = [client(), client(), client(), client()];
    await new Promise((r) => setTimeout(r, 300));
    // Written to a new name and renamed over, as a deploy does.
    const so = path.join(dir, '1', 'model.so');
    fs.copyFileSync(fixture('add-x3'), `${so}.tmp`);
    fs.renameSync(`${so}.tmp`, so);
    const deadline = Date.now() + 10000;
    while (seen.thrice < 50 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    // A half-written artifact fails to load; the running version goes on.
    fs.writeFileSync(so, Buffer.from('not a shared library'));
    await new Promise((r) => setTimeout(r, 400));
    const thriceBefore = seen.thrice;
    await new Promise((r) => setTimeout(r, 200));
    stop = true;
    await Promise.all(clients);
    expect(seen.other).toEqual([]);
    expect(seen.once).toBeGreaterThan(0);
    expect(seen.thrice).toBeGreaterThan(thriceBefore);
    const index = await request(`${server.url}/v2/repository/index`, { body: '{}' });
    expect(index.json).toEqual([{ name: 'swap', version: '1', state: 'READY', reason: '' }]);
    expect(server.stderr()).toMatch(/model "swap" reloaded/);
    expect(server.stderr()).toMatch(/model "swap" failed to reload, still serving what it served: cannot load artifact .*file too short/);
    await expect(server.stop()).resolves.toEqual({ drained: true, unanswered: 0 });
    fs.rmSync(own, { recursive: true });
  }, 30000);

  test('SIGTERM: readiness goes false, accepted requests are all answered, exit 0', async () => {
    const server = await startServer([repo, '--shutdown-timeout-ms', '10000']);
    const slow = (i) => infer(server.url, 'slow', { id: String(i), inputs: [tensor('x', 'FP32', [4], [i, 0, 0, 0])] });
    // One runs, one waits (maxQueue 1): both were accepted before the signal.
    const replies = [slow(1), slow(2)];
    await new Promise((r) => setTimeout(r, 100));
    server.child.kill('SIGTERM');
    const answered = await Promise.all(replies);
    expect(answered.map((r) => [r.status, r.json.outputs[0].data[0]])).toEqual([
      [200, 2],
      [200, 4],
    ]);
    expect(await exited(server.child)).toBe(0);
    expect(server.stderr()).toMatch(/SIGTERM: draining/);
    expect(server.stderr()).toMatch(/every accepted request answered; pools closed/);
    await expect(request(`${server.url}/v2/health/live`, { method: 'GET' })).rejects.toThrow(/ECONNREFUSED/);
  }, 30000);
});

describe('the API: createServer and a handler that mounts in another server (issue 14)', () => {
  test('createHandler passes what is not its own to next(); shutdown drains and resolves', async () => {
    const handler = createHandler({ models: [`m=${fixture('add')}`], poolSize: 1, pollMs: 0 });
    const outer = http.createServer((req, res) =>
      handler(req, res, () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('app route');
      }),
    );
    await new Promise((r) => outer.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${outer.address().port}`;
    expect((await request(`${url}/elsewhere`, { method: 'GET' })).body.toString()).toBe('app route');
    const r = await infer(url, 'm', { inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 4]), tensor('b', 'FP32', [4], [4, 3, 2, 1])] });
    expect(r.json.outputs[0].data).toEqual([5, 5, 5, 5]);
    await new Promise((r2) => outer.close(r2));
    await handler.close();
    expect([...handler.repository.served()]).toEqual([]);

    const server = createServer({ models: [`m=${fixture('add')}`], poolSize: 1, pollMs: 0 });
    await new Promise((r2) => server.listen(0, '127.0.0.1', r2));
    const ready = await request(`http://127.0.0.1:${server.address().port}/v2/health/ready`, { method: 'GET' });
    expect(ready.status).toBe(200);
    await expect(server.shutdown({ deadlineMs: 5000 })).resolves.toEqual({ drained: true, unanswered: 0 });
  });

  test.each(['express', 'fastify'])('the handler mounted in %s serves infers, metrics and leaves the app its routes', async (framework) => {
    const handler = createHandler({ models: [`m=${fixture('add')}`], poolSize: 1, pollMs: 0 });
    let close;
    let port;
    if (framework === 'express') {
      const app = require('express')();
      app.get('/app', (req, res) => res.send('app route'));
      app.use(handler);
      const server = await new Promise((r) => {
        const s = app.listen(0, '127.0.0.1', () => r(s));
      });
      port = server.address().port;
      close = () => new Promise((r) => server.close(r));
    } else {
      const app = require('fastify')();
      app.get('/app', async () => 'app route');
      // In onRequest, before fastify reads the body: the handler reads it itself.
      app.addHook('onRequest', (req, reply, done) => {
        if (req.url.startsWith('/v2') || req.url === '/metrics') {
          reply.hijack();
          handler(req.raw, reply.raw);
        } else {
          done();
        }
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      port = app.server.address().port;
      close = () => app.close();
    }
    const url = `http://127.0.0.1:${port}`;
    expect((await request(`${url}/app`, { method: 'GET' })).body.toString()).toBe('app route');
    const body = { inputs: [tensor('a', 'FP32', [4], [1, 2, 3, 4]), tensor('b', 'FP32', [4], [4, 3, 2, 1])] };
    const r = await infer(url, 'm', body, { 'content-type': 'application/json' });
    expect([r.status, r.json.outputs[0].data]).toEqual([200, [5, 5, 5, 5]]);
    const bad = await infer(url, 'm', { inputs: [] }, { 'content-type': 'application/json' });
    expect([bad.status, bad.json.error]).toEqual([400, expect.stringMatching(/input "a", "b" are missing/)]);
    const metrics = (await request(`${url}/metrics`, { method: 'GET' })).body.toString();
    expect(metrics).toMatch(/^zgc_inference_requests_total\{model="m",version="1",outcome="success",protocol="rest"\} 1$/m);
    await close();
    await handler.close();
  });

  test('a model that cannot load is refused at start, naming the model and the rule', () => {
    const dir = writeModel(repo, 'broken', { 1: 'dtypes' }, { parameters: { wt: 'missing.npy' } });
    expect(() => createHandler({ models: [`broken=${dir}`], pollMs: 0 })).toThrow(/model "broken": parameter file "missing.npy" not found/);
    const noParams = writeModel(repo, 'noparams', { 1: 'dtypes' }, {});
    expect(() => createHandler({ models: [`noparams=${noParams}`], pollMs: 0 })).toThrow(/source "wt" is a BOUND PARAMETER and config "parameters" gives it no file/);
    const typo = writeModel(repo, 'typo', { 1: 'add' }, { instance: 2 });
    expect(() => createHandler({ models: [`typo=${typo}`], pollMs: 0 })).toThrow(/unknown key "instance"/);
    for (const name of ['broken', 'noparams', 'typo']) fs.rmSync(path.join(repo, name), { recursive: true });
  });
});

describe('faults mixed into a sustained load (scripts/serve-faults.js, 5 s here) (issue 14)', () => {
  test('no wrong answer, every accepted request answered, reloads under load, exit 0 on SIGTERM', () => {
    const r = spawnSync(process.execPath, [path.join(testDir, '..', 'scripts', 'serve-faults.js'), '--seconds', '5'], { encoding: 'utf8', timeout: 120000 });
    const figures = JSON.parse(r.stdout.trim().split('\n').pop());
    expect(figures).toMatchObject({ wrongAnswers: 0, badRequestsOtherwise: 0, unexpected: [], slowAnsweredAfterSigterm: '2/2', exitCode: 0 });
    expect(figures.answeredRight).toBeGreaterThan(1000);
    expect(figures.badRequestsAnswered400).toBeGreaterThan(0);
    expect(figures.clientsGone).toBeGreaterThan(0);
    expect(figures.modelErrorStatus500).toBeGreaterThan(0);
    expect(figures.reloads).toBeGreaterThan(0);
    expect(r.status).toBe(0);
  }, 150000);
});

describe('the serve command line (issue 14)', () => {
  const cli = (...args) => spawnSync(process.execPath, [path.join(testDir, '..', 'bin', 'zgc-runtime.js'), 'serve', ...args], { encoding: 'utf8', timeout: 30000 });
  test.each([
    [[], /serve needs at least one model/],
    [['m.so', '--port', '70000'], /--port must be a port from 0 to 65535, got "70000"/],
    [['m.so', '--max-body', '2x'], /--max-body must be a size: whole bytes, or a string with a unit such as "512k", "64m", "1.5g" .*, at least 1 byte, got "2x"/],
    [['m.so', '--pool-size=0'], /--pool-size must be an integer >= 1, got "0"/],
    [['m.so', '--timeout-ms'], /--timeout-ms needs a value/],
    [['m.so', '--ports', '1'], /serve does not take "--ports"/],
  ])('exit 2 for %j', (args, message) => {
    const r = cli(...args);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  test('exit 1 naming a model that cannot be found or loaded', () => {
    const missing = cli('/nonexistent/model.so', '--port', '0');
    expect([missing.status, missing.stderr]).toEqual([1, expect.stringMatching(/model "\/nonexistent\/model.so": cannot find \/nonexistent\/model.so \(ENOENT\)/)]);
    const bad = cli(`bad=${fixture('malformed-dtype')}`, '--port', '0');
    expect([bad.status, bad.stderr]).toEqual([1, expect.stringMatching(/model "bad": .*source #0 "a": unknown dtype 9/)]);
  });

  test('--max-body takes k, m and g suffixes', async () => {
    const server = await startServer([`m=${fixture('add')}`, '--max-body', '1k', '--pool-size', '1']);
    const r = await infer(server.url, 'm', JSON.stringify({ inputs: [], pad: 'x'.repeat(1100) }));
    expect([r.status, r.json.error]).toEqual([413, expect.stringMatching(/limit of 1024 bytes/)]);
    server.child.kill('SIGINT');
    expect(await exited(server.child)).toBe(0);
  });
});
