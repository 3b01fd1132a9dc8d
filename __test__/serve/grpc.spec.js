'use strict';

// serve's gRPC service (inference.GRPCInferenceService) against the real tritonclient[grpc]
// and its generated stubs, in .venv-grpc: every dtype raw and typed, every error status,
// 200 calls at once, the repository extension, metrics by protocol, and SIGTERM with calls in
// flight. Expected values come from the same artifacts run in this process.
const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { spawn } = require('node:child_process');
const { load } = require('../..');
const { fixture } = require('../fixtures/manifest');
const { rng, randomF32, f16Round } = require('../helpers');
const { makeRepository, listenInProcess, startServer, exited } = require('../serve/setup');

const GRPC_PYTHON = path.join(testDir, '..', '.venv-grpc', 'bin', 'python');
const hasClient = fs.existsSync(GRPC_PYTHON);
const f = Math.fround;

function run(cmd, args, input) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(input);
  });
}

(hasClient ? describe : describe.skip)('tritonclient[grpc] against serve --grpc-port (issue 27)', () => {
  let server;
  let grpcPort;
  let repo;
  let params;
  let seen;
  let plan;
  beforeAll(async () => {
    ({ repo, params } = makeRepository());
    server = await listenInProcess([repo, '--model-control', 'explicit']);
    grpcPort = await server.server.listenGrpc(0, '127.0.0.1');
    const next = rng(27);
    const ints = (n, lo, hi) => Array.from({ length: n }, () => lo + Math.floor(next() * (hi - lo + 1)));
    plan = {
      dtypes: Array.from({ length: 3 }, () => ({
        x: Array.from(randomF32(next, 6)),
        h: ints(4, -64, 64).map((v) => v / 8),
        q: ints(5, -128, 127),
        m: ints(5, 0, 1).map(Boolean),
      })),
      add: [Array.from(randomF32(next, 4)), Array.from(randomF32(next, 4))],
      concurrent: Array.from({ length: 200 }, () => [Array.from(randomF32(next, 4)), Array.from(randomF32(next, 4))]),
    };
    // Not spawnSync: the server answers from this process's event loop.
    const r = await run(GRPC_PYTHON, [path.join(testDir, 'serve', 'grpc_client.py'), `127.0.0.1:${grpcPort}`], JSON.stringify(plan));
    if (r.status !== 0) throw new Error(`grpc_client.py failed (${r.status}): ${r.stderr}`);
    seen = JSON.parse(r.stdout);
  }, 150000);
  afterAll(async () => {
    await server.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });

  test('health, metadata and the repository index say what REST says', async () => {
    expect(seen).toMatchObject({ live: true, ready: true, model_ready: [true, true, true] });
    // Triton's names, in the order Triton 2.51 lists them (its list, measured: classification,
    // sequence, model_repository, model_repository(unload_dependents), schedule_policy,
    // model_configuration, system_shared_memory, cuda_shared_memory, binary_tensor_data,
    // parameters, statistics, trace, logging).
    expect(seen.server).toEqual({ name: 'zgc-runtime', extensions: ['classification', 'sequence', 'model_repository', 'schedule_policy', 'model_configuration', 'binary_tensor_data', 'statistics', 'trace', 'logging'] });
    const rest = await (await fetch(`${server.url}/v2/models/dtypes`)).json();
    expect(seen.metadata).toEqual({
      name: rest.name,
      versions: rest.versions,
      platform: rest.platform,
      inputs: rest.inputs.map((i) => [i.name, i.datatype, i.shape]),
      outputs: rest.outputs.map((o) => [o.name, o.datatype, o.shape]),
    });
    expect(seen.index).toEqual(['add/1:READY', 'add/2:READY', 'add1m/1:READY', 'dtypes/1:READY', 'slow/1:READY', 'slowtimeout/1:READY', 'status/1:READY']);
  });

  test('every dtype through raw contents equals an in-process run with the same parameters', () => {
    const rt = load(fixture('dtypes'));
    for (const [name, p] of Object.entries(params)) {
      if (p.dtype === 'f16') rt.set(name, Array.from(p.data, (bits) => require('../helpers').f16Value(bits)));
      else (p.bind ? rt.bind : rt.set).call(rt, name, p.data);
    }
    plan.dtypes.forEach((c, k) => {
      const want = rt.run({ x: c.x, h: c.h, q: c.q, m: c.m });
      const got = seen.dtypes[k];
      expect(got.datatypes).toEqual(['FP32', 'FP16', 'INT8', 'BOOL', 'FP32', 'FP32']);
      ['o0', 'o1', 'o2', 'o3', 'o4', 'o5'].forEach((n, i) => {
        const w = Array.from(want[i].data, Number);
        expect(got[n].map(Number)).toEqual(w);
      });
      expect(got.o1.every((v) => v === f16Round(v))).toBe(true);
    });
    rt.close();
  });

  test('typed contents (fp32, int, bool) are accepted; FP16 must come raw; the id and version come back', () => {
    const [a, b] = plan.add;
    expect(seen.typed_add).toEqual({ id: 'typed-1', version: '2', values: a.map((v, k) => f(f(v) + f(b[k]))) });
    expect(seen.version_2).toEqual(a.map((v, k) => f(f(v) + f(b[k]))));
    expect(seen.requested).toEqual(['output_0']);
    expect(seen.typed_dtypes_fp16_refused).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "h": FP16 has no typed contents field; send it in raw_input_contents' });
  });

  test('each error has its status code and the message REST gives', () => {
    const e = seen.errors;
    expect(e.unknown_model).toEqual({ code: 'NOT_FOUND', message: 'unknown model "nope"' });
    expect(e.unknown_version).toEqual({ code: 'NOT_FOUND', message: 'model "add" has no version "9" being served (versions: 1, 2)' });
    expect(e.missing_input).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "b" is missing (the model takes a, b)' });
    expect(e.wrong_datatype).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "a": datatype "INT8" given, the model takes FP32' });
    expect(e.wrong_shape).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "a": shape [2,2] given, the model takes [4]' });
    expect(e.unknown_input).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "c": the model has no such input (its inputs: a, b)' });
    expect(e.typed_wrong_count).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "a": fp32_contents has 3 elements, shape [4] takes 4' });
    expect(e.typed_wrong_field).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "a": FP32 data goes in fp32_contents, got int_contents' });
    expect(e.typed_int8_range).toEqual({ code: 'INVALID_ARGUMENT', message: 'input "q": element 2 is 300, outside INT8\'s -128..127' });
    expect(e.timeout).toEqual({ code: 'DEADLINE_EXCEEDED', message: 'model "slowtimeout" did not answer within 100 ms' });
    expect(e.model_error.code).toBe('INTERNAL');
    expect(e.model_error.message).toMatch(/^model "status" version 1 failed: zgc_runtime_run returned .* \(ERR_ZGC_/);
    // One instance, one waiting place: of four calls at once, at least one is refused.
    expect(seen.queue_codes.filter((c) => c === 'RESOURCE_EXHAUSTED').length).toBeGreaterThanOrEqual(1);
    expect(seen.queue_codes.filter((c) => c === 'OK').length).toBeGreaterThanOrEqual(2);
  });

  test('200 calls at once: each answered with its own sum', () => {
    expect(seen.concurrent).toHaveLength(200);
    plan.concurrent.forEach(([a, b], i) => expect(seen.concurrent[i]).toEqual(a.map((v, k) => f(f(v) + f(b[k])))));
  });

  test("the kserve SDK's InferenceGRPCClient: raw and typed inputs, the id echoed", async () => {
    const script = `
import asyncio, json, sys, numpy as np
from kserve import InferenceGRPCClient, InferRequest, InferInput
async def main():
    c = InferenceGRPCClient("127.0.0.1:${grpcPort}")
    out = {"ready": await c.is_server_ready(), "model_ready": await c.is_model_ready("add")}
    a, b = json.loads(sys.argv[1])
    res = []
    for binary in (True, False):
        x = InferInput("a", [4], "FP32"); x.set_data_from_numpy(np.array(a, dtype=np.float32), binary_data=binary)
        y = InferInput("b", [4], "FP32"); y.set_data_from_numpy(np.array(b, dtype=np.float32), binary_data=binary)
        r = await c.infer(InferRequest(model_name="add", infer_inputs=[x, y], request_id=f"k-{binary}"))
        res.append([r.id, r.outputs[0].name, r.outputs[0].as_numpy().tolist()])
    out["infer"] = res
    await c.close()
    print(json.dumps(out))
asyncio.run(main())`;
    const r = await run(GRPC_PYTHON, ['-c', script, JSON.stringify(plan.add)], '');
    expect(r.status).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop());
    const [a, b] = plan.add;
    const sum = a.map((v, k) => f(f(v) + f(b[k])));
    expect(got).toEqual({ ready: true, model_ready: true, infer: [['k-True', 'output_0', sum], ['k-False', 'output_0', sum]] });
  });

  test('a reload under load over gRPC: every call answered right while the model loads again', async () => {
    const script = `
import json, sys, threading, numpy as np, tritonclient.grpc as tg
c = tg.InferenceServerClient("127.0.0.1:${grpcPort}")
pairs = json.loads(sys.argv[1])
results = [None] * len(pairs)
lock = threading.Lock()
left = [len(pairs)]
done = threading.Event()
def cb(i):
    def f(result, error):
        results[i] = result.as_numpy("output_0").tolist() if error is None else str(error)
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()
    return f
for i, (x, y) in enumerate(pairs):
    a = tg.InferInput("a", [4], "FP32"); a.set_data_from_numpy(np.array(x, dtype=np.float32))
    b = tg.InferInput("b", [4], "FP32"); b.set_data_from_numpy(np.array(y, dtype=np.float32))
    c.async_infer("add", [a, b], cb(i))
    if i == len(pairs) // 2:
        c.load_model("add")
done.wait(60)
print(json.dumps({"results": results, "ready": c.is_model_ready("add")}))`;
    const pairs = plan.concurrent.slice(0, 150);
    const r = await run(GRPC_PYTHON, ['-c', script, JSON.stringify(pairs)], '');
    expect(r.status).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop());
    expect(got.ready).toBe(true);
    pairs.forEach(([a, b], i) => expect(got.results[i]).toEqual(a.map((v, k) => f(f(v) + f(b[k])))));
  }, 60000);

  test('metrics count gRPC requests under protocol="grpc", next to REST', async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const count = (labels) => Number((new RegExp(`^zgc_inference_requests_total\\{${labels}\\} (\\d+)$`, 'm').exec(text) || [])[1] || 0);
    expect(count('model="add",version="2",outcome="success",protocol="grpc"')).toBeGreaterThanOrEqual(205);
    expect(count('model="slowtimeout",version="1",outcome="timeout",protocol="grpc"')).toBe(1);
    expect(count('model="_unknown",version="",outcome="not_found",protocol="grpc"')).toBe(1);
  });
});

(hasClient ? describe : describe.skip)('gRPC and the server lifecycle (issue 27)', () => {
  test('SIGTERM with gRPC calls in flight: each is answered, then the server exits 0', async () => {
    const { repo } = makeRepository();
    const srv = await startServer([repo, '--grpc-port', '0', '--poll-ms', '0']);
    const until = Date.now() + 5000;
    while (!/gRPC listening on [^\s]+:(\d+)/.test(srv.stdout()) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    const port = Number(/gRPC listening on [^\s]+:(\d+)/.exec(srv.stdout())[1]);
    const script = `
import sys, threading, time, json, numpy as np, tritonclient.grpc as tg
c = tg.InferenceServerClient("127.0.0.1:${port}")
res = []
def call():
    x = tg.InferInput("x", [4], "FP32"); x.set_data_from_numpy(np.array([1, 2, 3, 4], dtype=np.float32))
    try:
        res.append(c.infer("slow", [x]).as_numpy("output_0").tolist())
    except Exception as e:
        res.append(str(e))
ts = [threading.Thread(target=call) for _ in range(2)]
[t.start() for t in ts]
print("started", flush=True)
[t.join() for t in ts]
print(json.dumps(res), flush=True)`;
    const client = spawn(GRPC_PYTHON, ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    client.stdout.on('data', (d) => (out += d));
    while (!out.includes('started')) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 100));
    srv.child.kill('SIGTERM');
    const [code] = await Promise.all([exited(srv.child), new Promise((r) => client.once('exit', r))]);
    expect(code).toBe(0);
    const answers = JSON.parse(out.trim().split('\n').pop());
    expect(answers).toEqual([[2, 4, 6, 8], [2, 4, 6, 8]]);
    fs.rmSync(repo, { recursive: true, force: true });
  }, 30000);
});
