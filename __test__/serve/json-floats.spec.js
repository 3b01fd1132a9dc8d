'use strict';

// Issue 27, exact floats over JSON: NaN, Infinity, -Infinity and -0 survive a tritonclient
// JSON round trip bit for bit, for FP32 and FP16; each f32 is written as its shortest decimal;
// large JSON outputs are written off the event loop while small requests are answered.
const { spawnSync, execFile } = require('node:child_process');
const { promisify } = require('node:util');
const fs = require('node:fs');
const { fixture } = require('../fixtures/manifest');
const { listenInProcess } = require('../serve/setup');
const { PYTHON } = require('../helpers');

const hasTritonClient = fs.existsSync(PYTHON) && spawnSync(PYTHON, ['-c', 'import tritonclient.http'], { stdio: 'ignore' }).status === 0;

let server;
beforeAll(async () => {
  // Idle connections kept for a minute: the 1M-element test blocks this thread for seconds on
  // a loaded machine, and fetch's own keep-alive timer (a second under the server's 5 s)
  // could then fire late, after the server had closed the socket: the next test's request
  // met a reset connection (ECONNRESET).
  server = await listenInProcess([`add=${fixture('add')}`, `half=${fixture('half-8')}`, `add1m=${fixture('add-1m')}`, '--pool-size', '1', '--poll-ms', '0', '--keep-alive-timeout-ms', '60000']);
});
afterAll(() => server.stop());

const post = (model, body) => fetch(`${server.url}/v2/models/${model}/infer`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });

(hasTritonClient ? test : test.skip)('tritonclient JSON round trips: NaN, ±Infinity, -0 and the f32 and f16 extremes, bit for bit', async () => {
  // add: a + (-0) is a for every a, -0 included. half: y = x.
  const script = `
import json, sys
import numpy as np
import tritonclient.http as httpclient
client = httpclient.InferenceServerClient(sys.argv[1])
a = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
f32 = np.array([np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45, 0.1], np.float32)
out = {}
for name, values in (("special", a), ("extremes", f32)):
    x = httpclient.InferInput("a", [4], "FP32"); x.set_data_from_numpy(values, binary_data=False)
    z = httpclient.InferInput("b", [4], "FP32"); z.set_data_from_numpy(np.full(4, -0.0, np.float32), binary_data=False)
    r = client.infer("add", [x, z], outputs=[httpclient.InferRequestedOutput("output_0", binary_data=False)])
    got = r.as_numpy("output_0")
    out[name] = [values.view(np.uint32).tolist(), got.astype(np.float32).view(np.uint32).tolist()]
h = np.array([np.nan, np.inf, -np.inf, -0.0, 65504, -65504, 6e-8, 6.1035e-05], np.float16)
x = httpclient.InferInput("x", [8], "FP16"); x.set_data_from_numpy(h, binary_data=False)
r = client.infer("half", [x], outputs=[httpclient.InferRequestedOutput("output_0", binary_data=False)])
out["f16"] = [h.view(np.uint16).tolist(), r.as_numpy("output_0").astype(np.float16).view(np.uint16).tolist()]
print(json.dumps(out))
`;
  // Asynchronously: the server answers from this process.
  const { stdout } = await promisify(execFile)(PYTHON, ['-c', script, server.url.replace('http://', '')], { encoding: 'utf8' });
  const out = JSON.parse(stdout);
  for (const [name, [sent, got]] of Object.entries(out)) {
    // NaN's payload may change through arithmetic; a NaN must come back a NaN.
    const canon = (bits, nan) => bits.map((b) => (nan(b) ? 'NaN' : b));
    const nan = name === 'f16' ? (b) => (b & 0x7c00) === 0x7c00 && (b & 0x3ff) !== 0 : (b) => (b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0;
    expect([name, canon(got, nan)]).toEqual([name, canon(sent, nan)]);
  }
});

describe('exact floats over JSON (issue 27)', () => {
  test('the response holds the tokens, -0 and the shortest decimals', async () => {
    // Written by hand: JSON.stringify would write -0 as 0.
    const text = '{"inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":[NaN,-Infinity,0.1,-0]},{"name":"b","datatype":"FP32","shape":[4],"data":[-0,-0,-0,-0]}]}';
    const res = await post('add', text);
    expect(res.status).toBe(200);
    const answer = await res.text();
    expect(answer).toContain('"data":[NaN,-Infinity,0.1,-0.0]');
  });

  test('a 1M-element FP32 output is right, written shorter than doubles would be, and a tiny request is answered meanwhile', async () => {
    const n = 1 << 20;
    // Multiples of 1/8 and 0.1-steps: exact and inexact f32 values.
    const a = Array.from({ length: n }, (_, k) => (k % 1000) / 8);
    const b = Array.from({ length: n }, (_, k) => (k % 7) / 10);
    const big = post('add1m', { inputs: [{ name: 'a', datatype: 'FP32', shape: [n], data: a }, { name: 'b', datatype: 'FP32', shape: [n], data: b }] });
    const tiny = post('add', { inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }, { name: 'b', datatype: 'FP32', shape: [4], data: [1, 1, 1, 1] }] });
    const [bigRes, tinyRes] = await Promise.all([big, tiny]);
    expect((await tinyRes.json()).outputs[0].data).toEqual([2, 3, 4, 5]);
    const text = await bigRes.text();
    const data = JSON.parse(text).outputs[0].data;
    expect(data.length).toBe(n);
    const expected = Float32Array.from(a, (v, k) => Math.fround(Math.fround(v) + Math.fround(b[k])));
    let wrong = 0;
    for (let k = 0; k < n; k++) if (Math.fround(data[k]) !== expected[k]) wrong++;
    expect(wrong).toBe(0);
    // Each value as the double JavaScript would write for it, for comparison.
    const doubles = JSON.stringify(Array.from(expected)).length;
    const written = text.length - text.indexOf('"data":') - 7;
    expect(written).toBeLessThan(doubles * 0.6);
  });

  test('FP16 data over JSON: each value as its shortest f16 decimal', async () => {
    const res = await post('half', { inputs: [{ name: 'x', datatype: 'FP16', shape: [8], data: [0.1, 0.2, 0.3, 1 / 3, 1000.1, 65504, 6e-8, 0] }] });
    expect(await res.text()).toContain('"data":[0.1,0.2,0.3,0.3333,1000,65500,6e-8,0]');
  });

  test('large JSON requests are parsed on a parser thread, with the same refusals and the same tokens', async () => {
    const n = 1 << 20;
    const data = Array.from({ length: n }, (_, k) => k % 100);
    const body = (a) => `{"inputs":[{"name":"a","datatype":"FP32","shape":[${n}],"data":[${a}]},{"name":"b","datatype":"FP32","shape":[${n}],"data":[${data.join(',')}]}]}`;
    // Well over the 1 MB from which a header is parsed off the event loop.
    const bad = data.slice();
    bad[700000] = '"x"';
    let res = await post('add1m', body(bad.join(',')));
    expect(res.status).toBe(400);
    expect((await res.json()).error).toBe('input "a": element 700000 is "x"; FP32 takes numbers');
    res = await post('add1m', body(['NaN', '-Infinity', ...data.slice(2)].join(',')));
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('"data":[NaN,-Infinity,4,6,8,10,12,');
    // The parser threads that did it (up to two on this machine), started on first use.
    expect(server.server.zgc.parserThreads).toBeGreaterThan(0);
    res = await post('add1m', `{"id":NaN,"inputs":[${' '.repeat(n)}]}`);
    expect([res.status, (await res.json()).error]).toEqual([400, 'NaN at id: NaN, Infinity and -Infinity are taken only as FP32 and FP16 tensor "data"']);
  });

  test('concurrent large JSON requests on the parser threads each get their own answer', async () => {
    const n = 1 << 20;
    const sends = [1, 2, 3, 4, 5].map(async (seed) => {
      const a = Array.from({ length: n }, (_, k) => (k * seed) % 1000);
      const res = await post('add1m', `{"id":"r${seed}","inputs":[{"name":"a","datatype":"FP32","shape":[${n}],"data":[${a.join(',')}]},{"name":"b","datatype":"FP32","shape":[${n}],"data":[${new Array(n).fill(seed).join(',')}]}]}`);
      const body = JSON.parse(await res.text());
      let wrong = 0;
      for (let k = 0; k < n; k += 997) if (body.outputs[0].data[k] !== a[k] + seed) wrong++;
      return [body.id, wrong];
    });
    expect(await Promise.all(sends)).toEqual([1, 2, 3, 4, 5].map((seed) => [`r${seed}`, 0]));
  });
});
