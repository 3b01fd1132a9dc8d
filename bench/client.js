'use strict';

// zgc-runtime/client against serve on loopback, side by side in one run: tiny runs (4 + 4
// floats) one at a time, by the client over REST and gRPC, by a bare fetch loop sending the
// same binary request, and by Python's tritonclient (HTTP and gRPC); and a 1M-float run over
// binary REST (and shared memory, where the server takes it) against a memcpy floor: the same
// bytes copied once each way in this process. Serve runs in its own process; rounds alternate
// between contenders and each figure is the median of its rounds.
//   node bench/client.js [--quick] [--rounds N]   (npm run bench runs it too)
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { fixture } = require('../__test__/fixtures/manifest');
const { connect } = require('../lib/client');
const { median } = require('./measure');

const root = path.join(__dirname, '..');
const N1M = 1 << 20;
const quick = process.argv.includes('--quick');
const roundsArg = process.argv.indexOf('--rounds');
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : quick ? 3 : 5;
const SECONDS = quick ? 0.5 : 1.5;

function startServe(repo, extra = []) {
  const child = spawn(process.execPath, [path.join(root, 'bin', 'zgc-runtime.js'), 'serve', repo, '--port', '0', '--grpc-port', '0', ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      const g = /gRPC listening on [\d.]+:(\d+)/.exec(out);
      if (m && g) resolve({ url: m[1], grpc: `grpc://127.0.0.1:${g[1]}`, grpcHost: `127.0.0.1:${g[1]}`, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) });
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
  });
}

function repository() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-bench-client-'));
  for (const [name, so] of [['tiny', fixture('add')], ['big', fixture('add-1m')]]) {
    fs.mkdirSync(path.join(repo, name, '1'), { recursive: true });
    fs.copyFileSync(so, path.join(repo, name, '1', 'model.so'));
    fs.writeFileSync(path.join(repo, name, 'config.json'), JSON.stringify({ instances: 1 }));
  }
  return repo;
}

/** Requests a second by `op` (one at a time) over `seconds`. */
async function rate(op, seconds = SECONDS) {
  for (let i = 0; i < 20; i++) await op(); // warm
  const until = performance.now() + seconds * 1000;
  let n = 0;
  const t0 = performance.now();
  while (performance.now() < until) {
    await op();
    n++;
  }
  return n / ((performance.now() - t0) / 1000);
}

/** Milliseconds per `op`, the median of `n`. */
async function perRun(op, n) {
  await op();
  const times = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await op();
    times.push(performance.now() - t0);
  }
  return median(times);
}

const PY_LOOP = `
import json, sys, time
import numpy as np
kind, url, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
if kind == 'http':
    import tritonclient.http as tc
else:
    import tritonclient.grpc as tc
client = tc.InferenceServerClient(url)
a = tc.InferInput('a', [4], 'FP32'); b = tc.InferInput('b', [4], 'FP32')
if kind == 'http':
    a.set_data_from_numpy(np.arange(4, dtype=np.float32), binary_data=True); b.set_data_from_numpy(np.ones(4, np.float32), binary_data=True)
    outputs = [tc.InferRequestedOutput('output_0', binary_data=True)]
else:
    a.set_data_from_numpy(np.arange(4, dtype=np.float32)); b.set_data_from_numpy(np.ones(4, np.float32))
    outputs = [tc.InferRequestedOutput('output_0')]
for _ in range(20): client.infer('tiny', [a, b], outputs=outputs)
n = 0; t0 = time.perf_counter(); until = t0 + seconds
while time.perf_counter() < until:
    client.infer('tiny', [a, b], outputs=outputs); n += 1
print(json.dumps({'rps': n / (time.perf_counter() - t0)}))
`;

function python(kind, url) {
  const venv = path.join(root, kind === 'http' ? '.venv-ref' : '.venv-grpc', 'bin', 'python');
  if (!fs.existsSync(venv)) return null;
  const r = spawnSync(venv, ['-c', PY_LOOP, kind, url, String(SECONDS)], { encoding: 'utf8', timeout: 120000 });
  if (r.status !== 0) throw new Error(`tritonclient ${kind} loop failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()).rps;
}

async function main() {
  const repo = repository();
  const server = await startServe(repo, ['--allow-client-shm']);
  const rest = await connect(server.url);
  const grpc = await connect(server.grpc);
  const shared = await connect(server.url, { sharedMemory: 'auto' });
  if (!shared.sharedMemory) throw new Error('the shared memory client did not turn it on');
  try {
    const [tinyRest, tinyGrpc, bigRest, bigGrpc, bigShm] = [await rest.model('tiny'), await grpc.model('tiny'), await rest.model('big'), await grpc.model('big'), await shared.model('big')];
    const a = Float32Array.of(0, 1, 2, 3);
    const b = Float32Array.of(1, 1, 1, 1);
    // The same binary request the client sends, by a bare fetch.
    const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'a', shape: [4], datatype: 'FP32', parameters: { binary_data_size: 16 } }, { name: 'b', shape: [4], datatype: 'FP32', parameters: { binary_data_size: 16 } }], parameters: { binary_data_output: true } }));
    const body = Buffer.concat([head, Buffer.from(a.buffer), Buffer.from(b.buffer)]);
    const fetchOnce = async () => {
      const res = await fetch(`${server.url}/v2/models/tiny/infer`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(head.length) } });
      const bytes = new Uint8Array(await res.arrayBuffer());
      const n = Number(res.headers.get('inference-header-content-length'));
      return new Float32Array(bytes.slice(n).buffer);
    };
    const check = Array.from((await fetchOnce()));
    if (String(check) !== '1,2,3,4') throw new Error(`the bare fetch got ${check}`);

    const big = { a: new Float32Array(N1M).fill(1), b: new Float32Array(N1M).fill(2) };
    const out = new Float32Array(N1M);
    const scratch = Buffer.allocUnsafe(8 * N1M);
    const memcpy = async () => {
      // The floor: the request's 8 MiB and the answer's 4 MiB, each copied once.
      Buffer.from(big.a.buffer).copy(scratch, 0);
      Buffer.from(big.b.buffer).copy(scratch, 4 * N1M);
      Buffer.from(scratch.buffer, scratch.byteOffset, 4 * N1M).copy(Buffer.from(out.buffer));
    };

    const rows = { 'client REST': [], 'client gRPC': [], 'bare fetch': [], 'tritonclient HTTP': [], 'tritonclient gRPC': [], '1M client REST (ms)': [], '1M client gRPC (ms)': [], '1M client shared memory (ms)': [], '1M memcpy floor (ms)': [] };
    for (let r = 0; r < ROUNDS; r++) {
      rows['client REST'].push(await rate(() => tinyRest.runAsync({ a, b })));
      rows['client gRPC'].push(await rate(() => tinyGrpc.runAsync({ a, b })));
      rows['bare fetch'].push(await rate(fetchOnce));
      rows['tritonclient HTTP'].push(python('http', server.url.replace('http://', '')));
      rows['tritonclient gRPC'].push(python('grpc', server.grpcHost));
      rows['1M client REST (ms)'].push(await perRun(() => bigRest.runAsync(big, { into: [out] }), quick ? 5 : 15));
      rows['1M client gRPC (ms)'].push(await perRun(() => bigGrpc.runAsync(big, { into: [out] }), quick ? 5 : 15));
      rows['1M client shared memory (ms)'].push(await perRun(() => bigShm.runAsync(big, { into: [out] }), quick ? 5 : 15));
      rows['1M memcpy floor (ms)'].push(await perRun(memcpy, 15));
    }
    const result = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, v.some((x) => x === null) ? null : median(v)]));
    const line = (k, v, unit) => console.log(`${k.padEnd(24)} ${v === null ? '—' : v.toFixed(unit === 'ms' ? 2 : 0).padStart(8)} ${unit}`);
    console.log(`\nzgc-runtime/client against serve on loopback (${ROUNDS} rounds, medians; one request in flight)`);
    for (const k of ['client REST', 'client gRPC', 'bare fetch', 'tritonclient HTTP', 'tritonclient gRPC']) line(k, result[k], 'req/s');
    line('1M client REST', result['1M client REST (ms)'], 'ms');
    line('1M client gRPC', result['1M client gRPC (ms)'], 'ms');
    line('1M shared memory', result['1M client shared memory (ms)'], 'ms');
    line('1M memcpy floor', result['1M memcpy floor (ms)'], 'ms');
    const ratio = (x, y) => (x === null || y === null ? '—' : `${(x / y).toFixed(2)}x`);
    console.log(`client REST / bare fetch ${ratio(result['client REST'], result['bare fetch'])}; client REST / tritonclient HTTP ${ratio(result['client REST'], result['tritonclient HTTP'])}; client gRPC / tritonclient gRPC ${ratio(result['client gRPC'], result['tritonclient gRPC'])}; 1M REST / memcpy ${ratio(result['1M client REST (ms)'], result['1M memcpy floor (ms)'])}; 1M gRPC / memcpy ${ratio(result['1M client gRPC (ms)'], result['1M memcpy floor (ms)'])}; 1M shared memory / memcpy ${ratio(result['1M client shared memory (ms)'], result['1M memcpy floor (ms)'])}`);
    fs.mkdirSync(path.join(root, 'target'), { recursive: true });
    fs.writeFileSync(path.join(root, 'target', 'bench-client.json'), `${JSON.stringify({ date: new Date().toISOString(), rounds: ROUNDS, rows, result }, null, 2)}\n`);
    return result;
  } finally {
    rest.close();
    grpc.close();
    await shared.close();
    await server.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

module.exports = { clientBench: main };
