'use strict';

// gRPC ModelStreamInfer (Triton's stream), against the real tritonclient[grpc]: requests of
// three sequences interleaved with plain ones and a refused one, all sent on one stream
// without waiting. Each sequence's answers come in its order and equal the same steps run
// alone in this process; the plain ones equal a direct run; the refused one is answered with
// Triton's "[request id: …]" error and the stream goes on.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { load } = require('../..');
const { fixture } = require('../fixtures/manifest');
const { rng } = require('../helpers');
const { spawn } = require('node:child_process');
const { writeModel, servedRepo, pythonClient, hasClients, listenInProcess, PYTHON } = require('../serve/setup');
const { request } = require('../serve/wire');
const { holdFile, tempLog, executions, clearFaultyEnv } = require('../isolate/faulty');

function makeRepo() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-stream-'));
  writeModel(repo, 'acc', { 1: 'accum' }, { instances: 2, sequenceBatching: {} });
  writeModel(repo, 'twice', { 1: 'slow' }, { instances: 2 });
  return repo;
}

/** A sequence's steps run alone on a fresh runtime: each step's running sum and step count. */
function alone(steps) {
  const rt = load(fixture('accum'));
  try {
    rt.storage('h');
    return steps.map((x) => {
      const [sum, n] = rt.run({ x });
      return { output_0: Array.from(sum.data), output_1: Array.from(n.data) };
    });
  } finally {
    rt.close();
  }
}

(hasClients ? describe : describe.skip)('gRPC ModelStreamInfer', () => {
  const live = servedRepo(makeRepo);

  test('3 sequences interleaved with plain requests and a refused one on one stream: each answered, in order per sequence', async () => {
    const random = rng(48);
    const value = () => Math.round(random() * 32 - 16) / 2;
    const steps = [5, 3, 4].map((n) => Array.from({ length: n }, () => Array.from({ length: 4 }, value)));
    const requests = [];
    const plain = [];
    for (let round = 0; round < 5; round++) {
      steps.forEach((seq, s) => {
        if (round >= seq.length) return;
        const parameters = { sequence_id: 100 + s, sequence_start: round === 0, sequence_end: round === seq.length - 1 };
        requests.push({ model: 'acc', id: `s${s}-${round}`, x: seq[round], parameters });
      });
      const x = Array.from({ length: 4 }, value);
      plain.push(x);
      requests.push({ model: 'twice', id: `p${round}`, x });
      if (round === 2) requests.push({ model: 'acc', id: 'bad', x: [1, 2, 3], parameters: { sequence_id: 100 } });
    }
    const got = await pythonClient('stream_client.py', 'grpc', [`127.0.0.1:${live.grpcPort}`], JSON.stringify(requests));
    expect(got).toHaveLength(requests.length);
    // The refused request: Triton's form, no status (tritonclient's stream callback sees none).
    const errors = got.filter((r) => r.error !== undefined);
    expect(errors).toEqual([{ error: '[request id: bad] input "x": shape [3] given, the model takes [4]', status: 'None' }]);
    // Each sequence: its answers in its order, each what the same steps give alone.
    steps.forEach((seq, s) => {
      const answers = got.filter((r) => r.id !== undefined && r.id.startsWith(`s${s}-`));
      expect(answers.map((r) => r.id)).toEqual(seq.map((_, k) => `s${s}-${k}`));
      expect(answers.map((r) => r.outputs)).toEqual(alone(seq));
    });
    // The plain ones: x * 2 (slow.c without its sleep), each under its own id.
    plain.forEach((x, k) => {
      const answer = got.find((r) => r.id === `p${k}`);
      expect(answer.model).toBe('twice');
      expect(answer.outputs.output_0).toEqual(x.map((v) => v * 2));
    });
  }, 120000);

  test('a request parsed on a thread (over 1 MB) is not overtaken by the next of its sequence', async () => {
    // A custom parameter pads step 1 past the size parsed off the event loop; step 2 is tiny.
    const pad = 'p'.repeat(1.5 * 1024 * 1024);
    const seq = [[1, 2, 3, 4], [10, 20, 30, 40], [100, 0, 0, 0]];
    const requests = seq.map((x, k) => ({ model: 'acc', id: `q${k}`, x, parameters: { sequence_id: 'padded', sequence_start: k === 0, sequence_end: k === 2, ...(k === 1 ? { pad } : {}) } }));
    const got = await pythonClient('stream_client.py', 'grpc', [`127.0.0.1:${live.grpcPort}`], JSON.stringify(requests));
    expect(got.map((r) => r.id)).toEqual(['q0', 'q1', 'q2']);
    expect(got.map((r) => r.outputs)).toEqual(alone(seq));
  }, 120000);
});

(hasClients && process.platform === 'linux' ? describe : describe.skip)('gRPC ModelStreamInfer: the client cancelling its stream', () => {
  clearFaultyEnv();

  test('cancels what it had pending: the held run is stopped, the queued ones never run, and the model answers after', async () => {
    // faulty.c, one isolated instance: mode 7 holds a run in the child until the hold file
    // exists; every run logs its id as it starts.
    const hold = holdFile();
    const log = tempLog();
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-stream-cancel-'));
    writeModel(repo, 'faulty', { 1: 'faulty' }, { instances: 1, isolate: 'process' });
    const server = await listenInProcess([repo, '--poll-ms', '0']);
    const grpcPort = await server.server.listenGrpc(0, '127.0.0.1');
    const scrape = async () => (await request(`${server.url}/metrics`, { method: 'GET' })).text;
    const gauge = (text, name) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)[1]);
    const child = spawn(PYTHON.grpc, [path.join(__dirname, 'stream_cancel.py'), `127.0.0.1:${grpcPort}`], { stdio: ['pipe', 'pipe', 'pipe'] });
    try {
      let stdout = '';
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise((resolve) => child.on('exit', resolve));
      const sent = new Promise((resolve) => child.stdout.on('data', (d) => {
        stdout += d;
        if (stdout.startsWith('sent\n')) resolve();
      }));
      const req = (id, mode) => ({ id: `r${id}`, inputs: { x: [[4], [1, 2, 3, 4]], mode: [[], [mode]], id: [[], [id]] } });
      child.stdin.write(`${JSON.stringify({ model: 'faulty', requests: [req(1, 7), req(2, 0), req(3, 0)] })}\n`);
      await sent;
      // All three are being answered: the first held in the child, the others queued behind it.
      let text = await scrape();
      while (gauge(text, 'zgc_http_requests_in_flight') !== 3 || gauge(text, 'zgc_runs_in_flight') !== 1) text = await scrape();
      child.stdin.end('cancel\n');
      expect(await exited).toBe(0);
      expect(JSON.parse(stdout.split('\n')[1]).filter((r) => r.id !== undefined)).toEqual([]);
      while (gauge(text, 'zgc_http_requests_in_flight') !== 0) text = await scrape();
      // Only the held run ever started; the queued ones were dropped unrun, all three counted as cancelled.
      expect([...executions(log).keys()]).toEqual([1]);
      expect(text).toMatch(/^zgc_inference_requests_total\{model="faulty",version="1",outcome="canceled",protocol="grpc"\} 3$/m);
      hold.release();
      const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }, { name: 'mode', datatype: 'FP32', shape: [], data: [0] }, { name: 'id', datatype: 'FP32', shape: [], data: [4] }] });
      const after = await request(`${server.url}/v2/models/faulty/infer`, { body });
      expect([after.status, after.json.outputs[0].data]).toEqual([200, [3, 5, 7, 9]]);
      expect(stderr).toBe('');
    } finally {
      child.kill();
      hold.release();
      await server.stop();
    }
  }, 60000);
});

(hasClients ? describe : describe.skip)('decoupled models over ModelStreamInfer', () => {
  // accum-stop: a running sum in STATE, and `done` once its h[0] reaches 10; at most 6 steps.
  const live = servedRepo(() => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-decoupled-'));
    writeModel(repo, 'gen', { 1: 'accum-stop' }, { instances: 2, decoupled: { maxSteps: 6, stopOutput: 'output_2' } });
    writeModel(repo, 'twice', { 1: 'slow' }, { instances: 1 });
    return repo;
  });

  /** The steps a request of x gives: the same x run on fresh state until done or 6 steps. */
  function steps(x) {
    const rt = load(fixture('accum-stop'));
    try {
      rt.storage('h');
      const out = [];
      for (let k = 1; k <= 6; k++) {
        const [sum, n, done] = rt.run({ x });
        out.push({ output_0: Array.from(sum.data), output_1: Array.from(n.data), output_2: [done.data[0] === 1], final: done.data[0] === 1 || k === 6 });
        if (done.data[0] === 1) break;
      }
      return out;
    } finally {
      rt.close();
    }
  }

  test("each request's steps come as responses in order, each on state of its own, the last marked triton_final_response", async () => {
    const xs = { a: [4, 1, 0, 0], b: [1, 2, 3, 4], c: [0, 0, 0, 1], d: [10, 0, 0, 0] };
    const requests = [...Object.entries(xs).map(([id, x]) => ({ model: 'gen', id, x })), { model: 'twice', id: 'p', x: [1, 2, 3, 4] }, { model: 'gen', id: 'bad', x: [1] }];
    const got = await pythonClient('stream_client.py', 'grpc', [`127.0.0.1:${live.grpcPort}`], JSON.stringify(requests));
    for (const [id, x] of Object.entries(xs)) {
      const answers = got.filter((r) => r.id === id).map(({ outputs, final }) => ({ ...outputs, final }));
      expect([id, answers]).toEqual([id, steps(x)]);
    }
    // Stopped by done after 3 steps, by the limit after 6 (twice: h[0] never reaches 10), by done at once.
    expect(Object.keys(xs).map((id) => got.filter((r) => r.id === id).length)).toEqual([3, 6, 6, 1]);
    // A plain model on the same stream: one response, no final flag.
    expect(got.filter((r) => r.id === 'p')).toEqual([{ id: 'p', model: 'twice', outputs: { output_0: [2, 4, 6, 8], output_1: expect.any(Array) } }]);
    expect(got.filter((r) => r.error !== undefined)).toEqual([{ error: '[request id: bad] input "x": shape [1] given, the model takes [4]', status: 'None' }]);
  }, 60000);

  test('ModelInfer and REST infer refuse a decoupled model, naming the stream', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }] });
    const r = await request(`${live.server.url}/v2/models/gen/infer`, { body });
    expect([r.status, r.json.error]).toEqual([400, 'model "gen" is decoupled (several responses a request): POST .../infer cannot answer it; use POST .../generate_stream or gRPC ModelStreamInfer']);
    const unary = [
      'import sys, numpy as np, tritonclient.grpc as C',
      'x = C.InferInput("x", [4], "FP32"); x.set_data_from_numpy(np.ones(4, np.float32))',
      'try:\n    C.InferenceServerClient(sys.argv[1]).infer("gen", [x])\nexcept C.InferenceServerException as e:\n    print(e.status(), e.message())',
    ].join('\n');
    const out = await new Promise((resolve) => {
      const child = require('node:child_process').spawn(PYTHON.grpc, ['-c', unary, `127.0.0.1:${live.grpcPort}`]);
      let text = '';
      child.stdout.on('data', (d) => (text += d));
      child.on('exit', () => resolve(text.trim()));
    });
    expect(out).toBe('StatusCode.INVALID_ARGUMENT model "gen" is decoupled (several responses a request): ModelInfer cannot answer it; use ModelStreamInfer');
    const config = (await request(`${live.server.url}/v2/models/gen/config`, { method: 'GET' })).json;
    expect(config.model_transaction_policy).toEqual({ decoupled: true });
    expect(config.parameters).toMatchObject({ 'decoupled.max_steps': { string_value: '6' }, 'decoupled.stop_output': { string_value: 'output_2' } });
  });
});
