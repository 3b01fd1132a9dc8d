'use strict';

// serve beside the real Triton 2.51 (started here from PyPI's nvidia-pytriton, with a python
// backend model "add" equal to serve's ZGC "add"): the same tritonclient calls go to both
// (side_by_side.py), and serve must answer as Triton does: the extensions it lists (a subset,
// in Triton's order), the model configuration parsed strictly, a stream with a refused
// request, the log and trace settings' keys and kinds over REST and gRPC, the nv_ metrics and
// their labels, a gzip body, the statuses of a refused infer, and gRPC health.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startTriton, hasTriton, PYTHON } = require('./triton');
const { writeModel, listenInProcess } = require('../serve/setup');

function sideBySide(httpAddress, grpcAddress, metricsUrl) {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [path.join(__dirname, 'side_by_side.py'), httpAddress, grpcAddress, metricsUrl], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (status) => (status === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`side_by_side.py failed (${status}): ${stderr}`))));
  });
}

(hasTriton ? describe : describe.skip)('serve answers as the real Triton 2.51 does', () => {
  let triton;
  let serve;
  let repo;
  beforeAll(async () => {
    // Concurrently: Triton's start takes seconds, and each server answers from its own process
    // (serve from this one, so the client is not waited for synchronously).
    repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-beside-triton-'));
    writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
    const server = await listenInProcess([repo]);
    const grpcPort = await server.server.listenGrpc(0, '127.0.0.1');
    const tritonServer = await startTriton(path.join(__dirname, 'models'));
    try {
      const [t, s] = await Promise.all([
        sideBySide(`127.0.0.1:${tritonServer.http}`, `127.0.0.1:${tritonServer.grpc}`, `http://127.0.0.1:${tritonServer.metrics}/metrics`),
        sideBySide(`127.0.0.1:${server.port}`, `127.0.0.1:${grpcPort}`, `${server.url}/metrics`),
      ]);
      triton = t;
      serve = s;
    } finally {
      await Promise.all([tritonServer.stop(), server.stop()]);
    }
  }, 180000);
  afterAll(() => fs.rmSync(repo, { recursive: true, force: true }));

  test("serve's extensions are Triton's names, in Triton's order", () => {
    const order = serve.extensions.map((e) => triton.extensions.indexOf(e));
    expect(order.every((at) => at >= 0)).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    // What serve leaves out: no GPU, no dependents to unload, no per-request parameters extension.
    expect(triton.extensions.filter((e) => !serve.extensions.includes(e))).toEqual(['model_repository(unload_dependents)', 'system_shared_memory', 'cuda_shared_memory', 'parameters']);
  });

  test('the model configuration: the same inputs, outputs and batch size, and gRPC the same as REST', () => {
    expect(serve.config).toEqual(triton.config);
    expect(serve.config.grpc_same).toBe(true);
  });

  test('a stream: each request answered under its id, the refused one in the "[request id: …]" form', () => {
    expect(serve.stream).toEqual(triton.stream);
    expect(Object.keys(serve.stream)).toContain('[request id: r2]');
  });

  test('log settings: the same keys, in the same order, with the same kinds, over REST and gRPC', () => {
    expect(serve.log).toEqual(triton.log);
  });

  test('trace settings: the same keys and kinds, server-wide and per model, over REST and gRPC', () => {
    expect(serve.trace).toEqual(triton.trace);
  });

  test('nv_ metrics: the same series and labels, moved by the same requests', () => {
    // A tiny run goes inline, with no queue to wait in: serve adds 0 µs where Triton's pipeline adds a few.
    const { nv_inference_queue_duration_us: queue, ...rest } = serve.metrics;
    const { nv_inference_queue_duration_us: tritonQueue, ...tritonRest } = triton.metrics;
    expect(rest).toEqual(tritonRest);
    expect(queue.labels).toEqual(tritonQueue.labels);
    expect(serve.metrics.nv_inference_request_success).toEqual({ labels: ['model', 'version'], grew: 3 });
  });

  test('the generate extension: the same JSON answer, the same server-sent events, a refusal alike', () => {
    expect(serve.generate).toEqual(triton.generate);
    expect(serve.generate_stream).toEqual(triton.generate_stream);
    expect(serve.generate_refused).toEqual(triton.generate_refused);
  });

  test('a gzip body, a refused infer and gRPC health are answered alike', () => {
    expect(serve.compressed).toEqual(triton.compressed);
    expect([serve.refused_rest, serve.refused_grpc]).toEqual([triton.refused_rest, triton.refused_grpc]);
    expect(serve.health).toBe(triton.health);
  });
});
