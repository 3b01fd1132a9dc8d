'use strict';

// The server under HTTP load (autocannon), side by side in one run with its floors: a bare
// node:http server answering the same bodies with no model, and the hand glue of
// examples/service.js. Each server is its own process (the load generator has the other core);
// rounds alternate between contenders and each figure is the median of its rounds.
//   node bench/serving.js [--quick] [--tiny] [--no-build] [--baseline REF [--baseline-own-addon]]
// --baseline REF also serves the JavaScript of git REF (with this checkout's addon, or, with
// --baseline-own-addon, the addon built from REF's own Rust by its own `npm run build`), and
// --tiny runs only the tiny REST and gRPC loads: together, a change's cost side by side.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');
const { load } = require('..');
const { fixture } = require('../__test__/fixtures/manifest');
const { formatNpy } = require('../lib/npy');
const { buildMlp, weights } = require('../examples/build');
const { median } = require('./measure');
const { baselineCheckout } = require('./baseline');

const root = path.join(__dirname, '..');
const N1M = 1 << 20;

/** A bare node:http server: reads the body, then answers `reply` (JSON) or echoes it (binary). */
const BARE = `
const http = require('node:http');
const [mode, reply] = [process.argv[1], process.argv[2]];
http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    if (mode === 'json') {
      JSON.parse(body.toString());
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(reply) });
      res.end(reply);
    } else {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'inference-header-content-length': req.headers['inference-header-content-length'], 'content-length': body.length });
      res.end(body);
    }
  });
}).listen(0, '127.0.0.1', function () { console.log('listening on http://127.0.0.1:' + this.address().port); });
`;

const GLUE = `
const { startService } = require(${JSON.stringify(path.join(root, 'examples', 'service.js'))});
startService({ port: 0, size: 1 }).then(({ port }) => console.log('listening on http://127.0.0.1:' + port));
`;

/**
 * Regions for the 1M add in /dev/shm, registered with the server at `url`, and checked once:
 * `{ body, remove }`, the request body that names them.
 */
async function shmCase(url, a, b) {
  const tag = `zgc-bench-${process.pid}`;
  const inFile = `/dev/shm/${tag}-in`;
  const outFile = `/dev/shm/${tag}-out`;
  fs.writeFileSync(inFile, Buffer.concat([Buffer.from(a.buffer), Buffer.from(b.buffer)]));
  fs.writeFileSync(outFile, Buffer.alloc(4 * N1M));
  for (const [name, file, size] of [['in', inFile, 8 * N1M], ['out', outFile, 4 * N1M]]) {
    await post(`${url}/v2/systemsharedmemory/region/${name}/register`, JSON.stringify({ key: `/${path.basename(file)}`, offset: 0, byte_size: size }));
  }
  const at = (region, offset, size) => ({ shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: size });
  const body = JSON.stringify({
    inputs: [
      { name: 'a', datatype: 'FP32', shape: [N1M], parameters: at('in', 0, 4 * N1M) },
      { name: 'b', datatype: 'FP32', shape: [N1M], parameters: at('in', 4 * N1M, 4 * N1M) },
    ],
    outputs: [{ name: 'output_0', parameters: at('out', 0, 4 * N1M) }],
  });
  await post(`${url}/v2/models/big/infer`, body);
  const got = new Float32Array(fs.readFileSync(outFile).buffer.slice(0));
  for (let k = 0; k < N1M; k += 4099) if (got[k] !== a[k] + b[k]) throw new Error(`big over shared memory: element ${k} is ${got[k]}, expected ${a[k] + b[k]}`);
  return { body, remove: () => [inFile, outFile].forEach((f) => fs.rmSync(f, { force: true })) };
}

/** Every server this run started: ended with it, however it ends (an error, a signal, Ctrl-C). */
const started = new Set();
process.on('exit', () => {
  for (const child of started) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(130));

function start(args) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], cwd: root });
  started.add(child);
  child.once('exit', () => started.delete(child));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      // With --grpc-port, both lines come together once both listen.
      const wantGrpc = args.includes('--grpc-port');
      const g = /gRPC listening on [\d.]+:(\d+)/.exec(out);
      if (m && (!wantGrpc || g)) resolve({ url: m[1], grpc: g ? `127.0.0.1:${g[1]}` : null, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) });
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${out}`)));
  });
}

function repository() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-bench-serve-'));
  const model = (name, so, config = {}, files = {}) => {
    fs.mkdirSync(path.join(repo, name, '1'), { recursive: true });
    fs.copyFileSync(so, path.join(repo, name, '1', 'model.so'));
    fs.writeFileSync(path.join(repo, name, 'config.json'), JSON.stringify({ instances: 1, ...config }));
    for (const [f, bytes] of Object.entries(files)) fs.writeFileSync(path.join(repo, name, f), bytes);
  };
  model('tiny', fixture('add'));
  model('big', fixture('add-1m'));
  const mlp = buildMlp();
  const rt = load(mlp);
  const files = {};
  for (const name of Object.keys(weights)) {
    const s = rt.sources.find((x) => x.name === name);
    files[`${name}.npy`] = formatNpy('f32', s.shape, Float32Array.from(weights[name]));
  }
  rt.close();
  model('mlp', mlp, { parameters: Object.fromEntries(Object.keys(weights).map((n) => [n, `${n}.npy`])), outputs: ['logits', 'probs'] }, files);
  return repo;
}

function cannon(url, { body, headers, duration, connections = 32 }) {
  return new Promise((resolve, reject) => {
    autocannon({ url, method: 'POST', body, headers, connections, duration, pipelining: 1 }, (err, r) => {
      if (err) return reject(err);
      if (r.non2xx || r.errors) return reject(new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`));
      // Answers over the whole round: a server taking seconds a request has few one-second buckets.
      resolve({ rps: r.requests.total / r.duration, p50: r.latency.p50, p99: r.latency.p99 });
    });
  });
}

async function post(url, body, headers) {
  const r = await fetch(url, { method: 'POST', body, headers });
  if (r.status !== 200) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  return Buffer.from(await r.arrayBuffer());
}

// A bare @grpc/grpc-js server answering ModelInfer with fixed bytes (the zgc server's own
// response to the same request): what gRPC itself costs, with no model and no decoding.
const BARE_GRPC = `
const grpc = require(${JSON.stringify(path.join(root, 'node_modules', '@grpc', 'grpc-js'))});
const reply = Buffer.from(process.argv[1], 'base64');
const id = (b) => b;
const server = new grpc.Server();
server.addService({ ModelInfer: { path: '/inference.GRPCInferenceService/ModelInfer', requestStream: false, responseStream: false,
  requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id } },
  { ModelInfer: (call, cb) => cb(null, reply) });
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, port) => console.log('listening on http://127.0.0.1:' + port));
`;

const { grpcLoad, generator: grpcGenerator, INFER_PATH } = require('./grpc-load');
const TINY_EXPECTED = '1.5,2.5,3.5,4.5';

/**
 * The same workloads against MLServer and the KServe model server (opt-in: they need PyPI
 * installs): tiny JSON, 1M JSON, 1M binary, tiny gRPC. A workload a server does not take
 * (its answer is wrong or an error) is reported as null.
 */
async function pythonServers({ duration, rounds, tinyBody, bigJsonBody, bigBody, bigHeaders, tinyGrpc, expectBig }) {
  const { startMlserver, startKserve, startTriton } = require('./python-servers');
  const models = { tiny: fixture('add'), big: fixture('add-1m') };
  const out = {};
  const servers = [['mlserver', () => startMlserver(models, [18090, 18091, 18092])], ['kserve', () => startKserve(models, [18080, 18081])], ['triton', () => startTriton({ tiny: 4, big: N1M })]];
  for (const [name, startIt] of servers) {
    process.stderr.write(`serving: starting ${name}\n`);
    const srv = await startIt();
    if (srv === null) {
      process.stderr.write(`serving: no ${name} here, left out\n`);
      continue;
    }
    const works = {};
    // Each workload once, checked, before it is timed.
    const tinyReply = JSON.parse((await post(`${srv.url}/v2/models/tiny/infer`, tinyBody, { 'content-type': 'application/json' })).toString());
    works.tinyJson = tinyReply.outputs && tinyReply.outputs[0].data.flat().join() === TINY_EXPECTED;
    const bigJson = JSON.parse((await post(`${srv.url}/v2/models/big/infer`, bigJsonBody, { 'content-type': 'application/json' })).toString());
    works.bigJson = Boolean(bigJson.outputs) && expectBig(bigJson.outputs[0].data.flat());
    const binary = await post(`${srv.url}/v2/models/big/infer`, bigBody, bigHeaders).catch(() => null);
    works.bigBinary = binary !== null && binary.length > 4 * N1M && expectBig(new Float32Array(binary.buffer.slice(binary.byteOffset + binary.length - 4 * N1M, binary.byteOffset + binary.length)));
    // The length of its reply, which the load generator checks each call against.
    works.tinyGrpc = await new Promise((resolve) => {
      const grpc = require('@grpc/grpc-js');
      const c = new grpc.Client(srv.grpc, grpc.credentials.createInsecure());
      c.makeUnaryRequest(INFER_PATH, (b) => b, (b) => b, tinyGrpc, (err, reply) => {
        c.close();
        try {
          resolve(!err && Array.from(require('./grpc-messages').decodeInferResponse(reply)).join() === TINY_EXPECTED && reply.length);
        } catch {
          resolve(false);
        }
      });
    });
    const cases = {
      tinyJson: () => cannon(`${srv.url}/v2/models/tiny/infer`, { body: tinyBody, headers: { 'content-type': 'application/json' }, duration }),
      // Rounds twice as long for the 1M workloads: these servers take a second or more a request.
      bigJson: () => cannon(`${srv.url}/v2/models/big/infer`, { body: bigJsonBody, headers: { 'content-type': 'application/json' }, duration: 2 * duration, connections: 4 }),
      bigBinary: () => cannon(`${srv.url}/v2/models/big/infer`, { body: bigBody, headers: bigHeaders, duration: 2 * duration, connections: 4 }),
      tinyGrpc: () => grpcLoad(srv.grpc, tinyGrpc, { expected: TINY_EXPECTED, replyBytes: works.tinyGrpc, duration }),
    };
    const runs = {};
    for (let r = 0; r < rounds; r++) {
      for (const [k, fn] of Object.entries(cases)) {
        if (!works[k]) continue;
        process.stderr.write(`serving ${name} round ${r + 1}/${rounds}: ${k}\n`);
        (runs[k] = runs[k] || []).push(await fn());
      }
    }
    await srv.stop();
    out[name] = Object.fromEntries(Object.keys(cases).map((k) => [k, runs[k] ? { rps: median(runs[k].map((x) => x.rps)), p50: median(runs[k].map((x) => x.p50)), p99: median(runs[k].map((x) => x.p99)) } : null]));
  }
  return out;
}

async function serving({ quick = false, python = false, baseline = null, baselineOwnAddon = false, tinyOnly = false } = {}) {
  const rounds = quick ? 2 : 3;
  // Read by the cases when they run: the warm-up shortens it.
  let duration = quick ? 3 : 5;
  const repo = repository();
  const serveArgs = [repo, '--port', '0', '--poll-ms', '0', '--max-body', '64m', '--grpc-port', '0'];
  // Client shared memory is off by default; only this server's (a baseline may predate it).
  const zgc = await start([path.join(root, 'bin', 'zgc-runtime.js'), 'serve', ...serveArgs, ...(process.platform === 'linux' ? ['--allow-client-shm'] : [])]);
  const base = baseline === null ? null : await start([path.join(baselineCheckout(baseline, baselineOwnAddon), 'bin', 'zgc-runtime.js'), 'serve', ...serveArgs]);
  // The tiny model over gRPC (raw contents, as tritonclient sends them), checked once.
  const { encodeInferRequest, decodeInferResponse } = require('./grpc-messages');
  const tinyGrpc = encodeInferRequest('tiny', [['a', 'FP32', [4], Float32Array.of(1, 2, 3, 4)], ['b', 'FP32', [4], Float32Array.of(0.5, 0.5, 0.5, 0.5)]]);
  const tinyGrpcReply = await new Promise((resolve, reject) => {
    const grpc = require('@grpc/grpc-js');
    const c = new grpc.Client(zgc.grpc, grpc.credentials.createInsecure());
    c.makeUnaryRequest(INFER_PATH, (b) => b, (b) => b, tinyGrpc, (err, reply) => (c.close(), err ? reject(err) : resolve(reply)));
  });
  if (Array.from(decodeInferResponse(tinyGrpcReply)).join() !== TINY_EXPECTED) throw new Error('tiny gRPC: wrong answer');

  // The tiny model over JSON.
  const tinyBody = JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }, { name: 'b', datatype: 'FP32', shape: [4], data: [0.5, 0.5, 0.5, 0.5] }] });
  const tinyReply = (await post(`${zgc.url}/v2/models/tiny/infer`, tinyBody)).toString();
  if (JSON.parse(tinyReply).outputs[0].data.join() !== TINY_EXPECTED) throw new Error(`tiny: wrong answer ${tinyReply}`);
  // The 1M-element model over binary data.
  const a = Float32Array.from({ length: N1M }, (_, k) => (k % 1000) * 0.5);
  const b = new Float32Array(N1M).fill(1);
  const head = Buffer.from(JSON.stringify({
    inputs: [
      { name: 'a', datatype: 'FP32', shape: [N1M], parameters: { binary_data_size: 4 * N1M } },
      { name: 'b', datatype: 'FP32', shape: [N1M], parameters: { binary_data_size: 4 * N1M } },
    ],
    outputs: [{ name: 'output_0', parameters: { binary_data: true } }],
  }));
  const bigBody = Buffer.concat([head, Buffer.from(a.buffer), Buffer.from(b.buffer)]);
  const bigHeaders = { 'inference-header-content-length': String(head.length), 'content-type': 'application/octet-stream' };
  const bigReply = await post(`${zgc.url}/v2/models/big/infer`, bigBody, bigHeaders);
  const n = bigReply.length - 4 * N1M;
  const got = new Float32Array(bigReply.buffer.slice(bigReply.byteOffset + n, bigReply.byteOffset + bigReply.length));
  for (let k = 0; k < N1M; k += 4099) if (got[k] !== a[k] + 1) throw new Error(`big: element ${k} is ${got[k]}, expected ${a[k] + 1}`);
  // The same 1M add over client shared memory: inputs written once into a region, a few
  // hundred bytes of JSON a request, the output written into another region.
  const shm = process.platform === 'linux' ? await shmCase(zgc.url, a, b) : null;
  // The 1M-element model over JSON both ways (the issue-27 workload, a 22 MB body): its
  // response bytes against what writing each f32 as a double would give.
  const bJson = Float32Array.from({ length: N1M }, (_, k) => (k % 7) / 10);
  const bigJsonBody = JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [N1M], data: Array.from(a) }, { name: 'b', datatype: 'FP32', shape: [N1M], data: Array.from(bJson) }] });
  const bigJsonReply = (await post(`${zgc.url}/v2/models/big/infer`, bigJsonBody)).toString();
  const bigJsonData = JSON.parse(bigJsonReply).outputs[0].data;
  const bigJsonExpected = Float32Array.from(a, (v, k) => v + bJson[k]);
  for (let k = 0; k < N1M; k += 4099) if (Math.fround(bigJsonData[k]) !== bigJsonExpected[k]) throw new Error(`big JSON: element ${k} is ${bigJsonData[k]}, expected ${bigJsonExpected[k]}`);
  const jsonBytes = { response: Buffer.byteLength(bigJsonReply), asDoubles: Buffer.byteLength(bigJsonReply.replace(/"data":\[[^\]]*\]/, `"data":${JSON.stringify(Array.from(bigJsonExpected))}`)) };
  // The bare server echoes the request body: the same bytes as the model's input, twice its output.
  const bareJson = await start(['-e', BARE, 'json', tinyReply]);
  const bareEcho = await start(['-e', BARE, 'binary']);
  const bareGrpc = await start(['-e', BARE_GRPC, tinyGrpcReply.toString('base64')]);
  // The MLP through examples/service.js and through the server.
  const glue = await start(['-e', GLUE]);
  const x = [0.5, -1, 2, 0.25];
  const glueBody = JSON.stringify({ x });
  const mlpBody = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: x }] });
  const viaGlue = JSON.parse((await post(`${glue.url}/predict`, glueBody, { 'content-type': 'application/json' })).toString());
  const viaZgc = JSON.parse((await post(`${zgc.url}/v2/models/mlp/infer`, mlpBody)).toString());
  // The server writes each f32 as its shortest decimal, the glue as a double: same f32 values.
  if (viaZgc.outputs[1].data.map(Math.fround).join() !== viaGlue.probs.join()) throw new Error(`mlp: ${viaZgc.outputs[1].data} vs ${viaGlue.probs}`);

  const cases = {
    tinyZgc: () => cannon(`${zgc.url}/v2/models/tiny/infer`, { body: tinyBody, duration }),
    tinyBare: () => cannon(bareJson.url, { body: tinyBody, duration }),
    tinyGrpcZgc: () => grpcLoad(zgc.grpc, tinyGrpc, { expected: TINY_EXPECTED, replyBytes: tinyGrpcReply.length, duration }),
    tinyGrpcBare: () => grpcLoad(bareGrpc.url.replace('http://', ''), tinyGrpc, { expected: TINY_EXPECTED, replyBytes: tinyGrpcReply.length, duration }),
    bigZgc: () => cannon(`${zgc.url}/v2/models/big/infer`, { body: bigBody, headers: bigHeaders, duration, connections: 4 }),
    bigBare: () => cannon(bareEcho.url, { body: bigBody, headers: bigHeaders, duration, connections: 4 }),
    ...(shm ? { bigShmZgc: () => cannon(`${zgc.url}/v2/models/big/infer`, { body: shm.body, duration, connections: 4 }) } : {}),
    bigJsonZgc: () => cannon(`${zgc.url}/v2/models/big/infer`, { body: bigJsonBody, duration, connections: 4 }),
    // A fifth client sends tiny infers while four send 1M JSON ones: its latency.
    tinyBesideBigJson: async () => {
      const [, tiny] = await Promise.all([
        cannon(`${zgc.url}/v2/models/big/infer`, { body: bigJsonBody, duration, connections: 4 }),
        cannon(`${zgc.url}/v2/models/tiny/infer`, { body: tinyBody, duration, connections: 1 }),
      ]);
      return tiny;
    },
    mlpZgc: () => cannon(`${zgc.url}/v2/models/mlp/infer`, { body: mlpBody, duration }),
    mlpGlue: () => cannon(`${glue.url}/predict`, { body: glueBody, headers: { 'content-type': 'application/json' }, duration }),
  };
  if (base !== null) {
    cases.tinyBaseline = () => cannon(`${base.url}/v2/models/tiny/infer`, { body: tinyBody, duration });
    cases.tinyGrpcBaseline = () => grpcLoad(base.grpc, tinyGrpc, { expected: TINY_EXPECTED, replyBytes: tinyGrpcReply.length, duration });
  }
  if (tinyOnly) for (const k of Object.keys(cases)) if (!/^tiny(Grpc)?(Zgc|Baseline)$/.test(k)) delete cases[k];
  const runs = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
  // One short load each first, so that no contender's first round is also its JIT's warm-up.
  const measured = duration;
  duration = 1;
  for (const [k, fn] of Object.entries(cases)) {
    process.stderr.write(`serving warm-up: ${k}\n`);
    await fn();
  }
  duration = measured;
  for (let r = 0; r < rounds; r++) {
    // Every other round in reverse, so that no contender always follows the same one.
    const order = r % 2 === 0 ? Object.entries(cases) : Object.entries(cases).reverse();
    for (const [k, fn] of order) {
      process.stderr.write(`serving round ${r + 1}/${rounds}: ${k}\n`);
      runs[k].push(await fn());
    }
  }
  await Promise.all([zgc, bareJson, bareEcho, bareGrpc, glue, ...(base ? [base] : [])].map((s) => s.stop()));
  if (shm) shm.remove();
  if (tinyOnly) {
    fs.rmSync(repo, { recursive: true, force: true });
    const fig = (k) => ({ rps: median(runs[k].map((x) => x.rps)), p50: median(runs[k].map((x) => x.p50)), p99: median(runs[k].map((x) => x.p99)) });
    const out = Object.fromEntries(Object.keys(cases).map((k) => [k, fig(k)]));
    if (base) out.ratios = { tinyVsBaseline: out.tinyZgc.rps / out.tinyBaseline.rps, tinyGrpcVsBaseline: out.tinyGrpcZgc.rps / out.tinyGrpcBaseline.rps };
    return out;
  }
  const expectBig = (data) => {
    for (let k = 0; k < N1M; k += 4099) if (Math.fround(data[k]) !== bigJsonExpected[k] && Math.fround(data[k]) !== a[k] + 1) return false;
    return data.length === N1M;
  };
  const peers = python ? await pythonServers({ duration, rounds, tinyBody, bigJsonBody, bigBody, bigHeaders, tinyGrpc, expectBig }) : null;
  fs.rmSync(repo, { recursive: true, force: true });
  const fig = (k) => ({ rps: median(runs[k].map((x) => x.rps)), p50: median(runs[k].map((x) => x.p50)), p99: median(runs[k].map((x) => x.p99)) });
  const out = Object.fromEntries(Object.keys(cases).map((k) => [k, fig(k)]));
  out.ratios = {
    tinyVsBare: out.tinyZgc.rps / out.tinyBare.rps,
    tinyGrpcVsBare: out.tinyGrpcZgc.rps / out.tinyGrpcBare.rps,
    bigVsBareEcho: out.bigZgc.rps / out.bigBare.rps,
    ...(out.bigShmZgc ? { bigShmVsBinary: out.bigShmZgc.rps / out.bigZgc.rps } : {}),
    mlpVsGlue: out.mlpZgc.rps / out.mlpGlue.rps,
    bigJsonResponseVsDoubles: jsonBytes.response / jsonBytes.asDoubles,
  };
  out.bigJsonBytes = jsonBytes;
  if (peers) {
    out.python = peers;
    // The Python servers proper (Triton, a C++ server, has a ratio of its own below).
    const best = (k) => Math.max(...Object.entries(peers).filter(([n]) => n !== 'triton').map(([, p]) => (p[k] ? p[k].rps : 0)));
    const vs = (mine, k) => (best(k) > 0 ? out[mine].rps / best(k) : null);
    out.ratios.tinyJsonVsBestPython = vs('tinyZgc', 'tinyJson');
    out.ratios.bigJsonVsMlserver = peers.mlserver.bigJson ? out.bigJsonZgc.rps / peers.mlserver.bigJson.rps : null;
    out.ratios.bigBinaryVsBestPython = vs('bigZgc', 'bigBinary');
    out.ratios.tinyGrpcVsMlserver = peers.mlserver.tinyGrpc ? out.tinyGrpcZgc.rps / peers.mlserver.tinyGrpc.rps : null;
    if (peers.triton) {
      const t = (mine, k) => (peers.triton[k] ? out[mine].rps / peers.triton[k].rps : null);
      out.ratios.vsTriton = { tinyJson: t('tinyZgc', 'tinyJson'), bigJson: t('bigJsonZgc', 'bigJson'), bigBinary: t('bigZgc', 'bigBinary'), tinyGrpc: t('tinyGrpcZgc', 'tinyGrpc') };
    }
  }
  out.method = `autocannon, 32 connections (4 for the 8 MB bodies); gRPC: ${grpcGenerator()}, 32 calls in flight; ${duration} s a round, ${rounds} rounds alternating, medians`;
  return out;
}

const fx = (v) => (v === null || v === undefined ? '—' : `${v.toFixed(1)}x`);

function reportServing(s) {
  const row = (name, k) => `| ${name} | ${s[k].rps.toFixed(0)} | ${s[k].p50} ms | ${s[k].p99} ms |`;
  return [
    `HTTP serving (${s.method})`,
    '| server, workload | req/s | p50 | p99 |',
    '|---|---|---|---|',
    row('zgc serve, tiny add, JSON', 'tinyZgc'),
    row('bare node:http, same bodies, no model', 'tinyBare'),
    ...(s.tinyGrpcZgc ? [row('zgc serve, tiny add, gRPC (raw contents)', 'tinyGrpcZgc'), row('bare @grpc/grpc-js answering the same bytes, no model', 'tinyGrpcBare')] : []),
    row('zgc serve, 1M add, binary', 'bigZgc'),
    row('bare node:http echoing the same bytes', 'bigBare'),
    ...(s.bigShmZgc ? [row('zgc serve, 1M add, client shared memory', 'bigShmZgc')] : []),
    ...(s.bigJsonZgc ? [row('zgc serve, 1M add, JSON both ways', 'bigJsonZgc'), row('a fifth client, tiny JSON, beside 4 sending 1M JSON', 'tinyBesideBigJson')] : []),
    row('zgc serve, MLP, JSON', 'mlpZgc'),
    row('examples/service.js, MLP, JSON', 'mlpGlue'),
    '',
    ...(s.python ? ['', 'The Python servers (same artifacts through the Python reference runtime, same bodies and load):', '| server | tiny JSON req/s | 1M JSON req/s | 1M binary req/s | tiny gRPC req/s |', '|---|---|---|---|---|',
      `| zgc serve | ${s.tinyZgc.rps.toFixed(0)} | ${s.bigJsonZgc.rps.toFixed(1)} | ${s.bigZgc.rps.toFixed(1)} | ${s.tinyGrpcZgc.rps.toFixed(0)} |`,
      ...Object.entries(s.python).map(([n, p]) => `| ${n} | ${p.tinyJson ? p.tinyJson.rps.toFixed(0) : '—'} | ${p.bigJson ? p.bigJson.rps.toFixed(1) : '—'} | ${p.bigBinary ? p.bigBinary.rps.toFixed(1) : '— (not offered)'} | ${p.tinyGrpc ? p.tinyGrpc.rps.toFixed(0) : '—'} |`),
      `zgc serve: tiny JSON ${fx(s.ratios.tinyJsonVsBestPython)} the best Python server (target >= 10x); 1M JSON ${fx(s.ratios.bigJsonVsMlserver)} MLServer (target >= 3x); 1M binary ${fx(s.ratios.bigBinaryVsBestPython)} the best (target >= 3x); tiny gRPC ${fx(s.ratios.tinyGrpcVsMlserver)} MLServer (target >= 10x).`,
      ...(s.ratios.vsTriton ? [`zgc serve against Triton 2.51 (python backend): tiny JSON ${fx(s.ratios.vsTriton.tinyJson)}, 1M JSON ${fx(s.ratios.vsTriton.bigJson)}, 1M binary ${fx(s.ratios.vsTriton.bigBinary)}, tiny gRPC ${fx(s.ratios.vsTriton.tinyGrpc)}.`] : []), ''] : []),
    `tiny: ${s.ratios.tinyVsBare.toFixed(2)}x the bare server (target >= 0.7x);${s.ratios.tinyGrpcVsBare ? ` tiny gRPC: ${s.ratios.tinyGrpcVsBare.toFixed(2)}x the bare gRPC server (target >= 0.7x);` : ''} 1M binary: ${s.ratios.bigVsBareEcho.toFixed(2)}x the bare echo (target >= 0.5x);${s.ratios.bigShmVsBinary ? ` 1M over client shared memory: ${s.ratios.bigShmVsBinary.toFixed(1)}x binary data (target >= 5x);` : ''} MLP: ${s.ratios.mlpVsGlue.toFixed(2)}x the hand glue${s.bigJsonBytes ? `; 1M JSON response ${s.bigJsonBytes.response} bytes, ${s.ratios.bigJsonResponseVsDoubles.toFixed(2)}x the ${s.bigJsonBytes.asDoubles} of f32 values written as doubles` : ''}.`,
  ].join('\n');
}

module.exports = { serving, reportServing };

if (require.main === module) {
  // Run on its own (npm run bench builds them first): the fixtures it serves, built if missing
  // (scripts/build-fixtures.js builds only what is stale).
  if (!process.argv.includes('--no-build')) require('node:child_process').execFileSync(process.execPath, [path.join(root, 'scripts', 'build-fixtures.js')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  const at = process.argv.indexOf('--baseline');
  serving({ quick: process.argv.includes('--quick'), python: process.argv.includes('--python-servers'), baseline: at > 0 ? process.argv[at + 1] : null, baselineOwnAddon: process.argv.includes('--baseline-own-addon'), tinyOnly: process.argv.includes('--tiny') }).then(
    (s) => console.log(process.argv.includes('--tiny') ? JSON.stringify(s, null, 1) : reportServing(s)),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
