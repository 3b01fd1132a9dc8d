#!/usr/bin/env node
'use strict';

// npm run test:hostile [-- --json] [-- --only TEXT]: every attack of issue 34 on `zgc-runtime serve`, on
// 127.0.0.1 only, one after another, each bounded in time and count. Meanwhile a probe infer
// runs every 100 ms (HTTP, on a fresh connection each time, and gRPC), checked against a + b.
// For each attack it asserts: every probe answered correctly within 2 s during the attack and
// the second after it, the server's RSS under its bound, the process alive, and the attack's
// own outcome (the status it must get). Prints a table (docs/robustness.md has one) and exits
// 1 on any breach.
const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const grpc = require('@grpc/grpc-js');
const { writeModel } = require('../__test__/serve/setup');
const { field, streamBody } = require('../__test__/serve/wire');

const BIN = path.join(__dirname, '..', 'bin', 'zgc-runtime.js');
const MB = 1 << 20;
// 2 s: the freezes these attacks caused before their fixes lasted 4 s and more, and a loaded
// 2-core machine answers a probe in up to 1.3 s by itself.
const PROBE_MS = 2000;
// The server runs with a 256 MB in-flight budget. Bodies take up to that much, and their text
// once more while a parser thread reads it (or, for gRPC, grpc-js's received chunks beside the
// whole message): RSS must stay under twice the budget over the server's RSS at start, plus 300 MB.
const BUDGET_MB = 256;
const BUDGET = `${BUDGET_MB}m`;
let RSS_BOUND_MB = 0;
const json = process.argv.includes('--json');
// --only TEXT: the attacks whose name holds TEXT.
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : null;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function startServer(repo) {
  // At a 1024 open-file limit, as the attack on connections was first made.
  const args = [BIN, 'serve', repo, '--port', '0', '--grpc-port', '0', '--pool-size', '1', '--max-inflight-bytes', BUDGET, '--max-body', '64m', '--headers-timeout-ms', '2000', '--grpc-handshake-timeout-ms', '2000'];
  const child = spawn('sh', ['-c', `ulimit -n 1024 && exec "${process.execPath}" ${args.map((a) => `'${a}'`).join(' ')}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      const http_ = /listening on http:\/\/[^\s]+:(\d+)/.exec(out);
      const g = /gRPC listening on [^\s]+:(\d+)/.exec(out);
      if (http_ && g) resolve({ child, port: Number(http_[1]), grpcPort: Number(g[1]), stderr: () => err });
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}: ${err}`)));
  });
}

function memory(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return { rss: Number(/VmRSS:\s+(\d+)/.exec(s)[1]) / 1024, vm: Number(/VmSize:\s+(\d+)/.exec(s)[1]) / 1024 };
  } catch {
    return null;
  }
}

function post(port, route, body, headers = {}) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: route, method: 'POST', agent: false, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', () => resolve({ status: 'error' }));
    });
    req.on('error', (e) => resolve({ status: e.code || 'error' }));
    req.end(body);
  });
}

/** Streams `total` bytes as one body to `route`: see __test__/serve/wire.js. */
const stream = (port, route, total, { declare = true } = {}) => streamBody(`http://127.0.0.1:${port}${route}`, total, { declare });

/** Raw sockets: each writes `head` (then `drip` every `dripMs`), and is kept until `holdMs`. Resolves how each ended. */
function sockets(port, count, { head = '', drip = null, dripMs = 1000, holdMs = 3000 } = {}) {
  return Promise.all(
    Array.from({ length: count }, () =>
      new Promise((resolve) => {
        // Timed from the connection's start: on a loaded machine 500 connects take seconds.
        let started = Date.now();
        const s = net.connect(port, '127.0.0.1');
        let got = '';
        let timer = null;
        const end = (how) => {
          clearInterval(timer);
          s.destroy();
          resolve({ how, ms: Date.now() - started, got });
        };
        s.on('connect', () => {
          started = Date.now();
          if (head) s.write(head);
          if (drip) timer = setInterval(() => s.write(drip), dripMs);
        });
        s.on('data', (d) => (got += d));
        s.on('close', () => end('closed by server'));
        // A reset is the server closing too: it does so when our last drip byte is still unread.
        s.on('error', (e) => end(e.code === 'ECONNRESET' || e.code === 'EPIPE' ? 'reset by server' : `error ${e.code}`));
        setTimeout(() => end('held'), holdMs);
      }),
    ),
  );
}

const grpcInfer = (() => {
  const Client = grpc.makeGenericClientConstructor({
    ModelInfer: { path: '/inference.GRPCInferenceService/ModelInfer', requestStream: false, responseStream: false, requestSerialize: (b) => b, responseDeserialize: (b) => b },
  });
  return (port) => {
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': -1, 'grpc.max_receive_message_length': -1 });
    const call = (bytes, deadlineMs = 60000) => new Promise((resolve) => client.ModelInfer(bytes, { deadline: Date.now() + deadlineMs }, (err, res) => resolve(err ? { code: err.code, details: err.details } : { ok: res })));
    return { call, close: () => client.close() };
  };
})();

const str = (s) => Buffer.from(s);

/** A ModelInferRequest for add: a and b as raw FP32 contents; the reply's output 0 is a + b. */
function addRequest(a, b) {
  const input = (name) => Buffer.concat([field(1, str(name)), field(2, str('FP32')), Buffer.from([0x1a, 0x01, 0x04])]);
  return Buffer.concat([field(1, str('add')), field(5, input('a')), field(5, input('b')), field(7, Buffer.from(Float32Array.from(a).buffer)), field(7, Buffer.from(Float32Array.from(b).buffer))]);
}

/** The probe: every 100 ms one HTTP infer on a fresh connection and one gRPC infer; each must be right within PROBE_MS. */
function probeLoop(port, grpcPort) {
  const g = grpcInfer(grpcPort);
  let k = 0;
  (async () => {
    for (;;) {
      const a = [k, k + 1, k + 2, k + 3];
      const b = [0.5, 0.25, -1, 2];
      const want = a.map((v, i) => Math.fround(v + b[i]));
      k++;
      const t0 = performance.now();
      const [h, r] = await Promise.all([
        Promise.race([post(port, '/v2/models/add/infer', JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: a }, { name: 'b', datatype: 'FP32', shape: [4], data: b }] })), sleep(PROBE_MS * 3).then(() => ({ status: 'no answer' }))]),
        g.call(addRequest(a, b), PROBE_MS * 3),
      ]);
      const ms = performance.now() - t0;
      let ok = h.status === 200;
      if (ok) {
        const got = JSON.parse(h.text).outputs[0].data;
        ok = got.every((v, i) => v === want[i]);
      }
      let gok = r.ok !== undefined;
      if (gok) {
        // The reply's last field (6) holds output 0's raw bytes: its last 16 bytes are the four floats.
        const bytes = r.ok.subarray(r.ok.length - 16);
        const got = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + 16));
        gok = Array.from(got).every((v, i) => v === want[i]);
      }
      process.stdout.write(`${JSON.stringify({ ok: ok && gok && ms <= PROBE_MS, ms: Math.round(ms), http: ok ? 'ok' : h.status, grpc: gok ? 'ok' : r.code })}\n`);
      await sleep(100);
    }
  })();
}

/**
 * The probe in a process of its own (so that the attacks' own sockets cannot slow its clock):
 * `node scripts/hostile.js --probe PORT GRPCPORT` prints a JSON line per probe.
 */
function probeChild(port, grpcPort) {
  const child = spawn(process.execPath, [__filename, '--probe', String(port), String(grpcPort)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const seen = { count: 0, worstMs: 0, failures: [] };
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const r = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      seen.count++;
      seen.worstMs = Math.max(seen.worstMs, r.ms);
      if (!r.ok) seen.failures.push(r);
    }
  });
  return {
    seen,
    reset() {
      seen.count = 0;
      seen.worstMs = 0;
      seen.failures = [];
    },
    stop() {
      child.kill();
      return new Promise((r) => child.once('exit', r));
    },
  };
}

/**
 * The 60 MB ModelInfer for a model that does not exist, made once: the attacker builds no
 * new copy for each call (on two cores, its own copying slowed the server it attacks).
 */
let big = null;
const bigMessage = () => (big ||= Buffer.concat([field(1, str('big')), field(7, Buffer.alloc(60 * MB, 1))]));

/** Each attack: what it does, and a check of what it got back (a string when wrong). */
function attacks(port, grpcPort) {
  const g = grpcInfer(grpcPort);
  const bodyStatuses = (rs) => rs.reduce((m, r) => ({ ...m, [r.status]: (m[r.status] || 0) + 1 }), {});
  const escapes = (bytes) => `{"inputs":"${'\\"'.repeat(Math.floor(bytes / 2) - 16)} NaN`;
  return [
    {
      name: 'a 540 MB body to /v2/repository/index',
      run: () => stream(port, '/v2/repository/index', 540 * MB, { declare: false }),
      // The 413 goes out and the connection is closed: a client still writing may see its pipe break first.
      check: (r) => ([413, 'EPIPE', 'ECONNRESET'].includes(r.status) ? null : `got ${r.status}`),
    },
    {
      name: 'a 200 MB declared body to /v2/repository/index',
      run: () => stream(port, '/v2/repository/index', 200 * MB),
      check: (r) => ([413, 'EPIPE', 'ECONNRESET'].includes(r.status) ? null : `got ${r.status}`),
    },
    {
      name: '20 bodies of 128 KB of \\" pairs then NaN (the old regex: 8 s each)',
      run: () => Promise.all(Array.from({ length: 20 }, () => post(port, '/v2/models/add/infer', escapes(128 * 1024)))),
      check: (rs) => (rs.every((r) => r.status === 400) ? null : JSON.stringify(bodyStatuses(rs))),
    },
    {
      name: '8 bodies of 1 MB of \\" pairs then NaN (the old regex: parser threads pinned for good)',
      run: () => Promise.all(Array.from({ length: 8 }, () => post(port, '/v2/models/big/infer', escapes(MB)))),
      check: (rs) => (rs.every((r) => r.status === 400) ? null : JSON.stringify(bodyStatuses(rs))),
    },
    {
      name: 'deep nesting with NaN, 1 MB',
      run: () => post(port, '/v2/models/add/infer', `${'['.repeat(MB)}NaN`),
      check: (r) => (r.status === 400 && /deeper than 256 levels/.test(r.text) ? null : `got ${r.status} ${r.text.slice(0, 100)}`),
    },
    {
      name: '40 connections each sending a 50 MB body (2 GB)',
      run: () => Promise.all(Array.from({ length: 40 }, () => stream(port, '/v2/models/big/infer', 50 * MB))),
      // Those that fit in the 256 MB budget get a 400 (spaces are not JSON); the rest a 503
      // (or their connection closed on them mid-send).
      check: (rs) => {
        const s = bodyStatuses(rs);
        return (s[503] || 0) + (s.EPIPE || 0) + (s.ECONNRESET || 0) >= 30 && rs.every((r) => [503, 400, 'EPIPE', 'ECONNRESET'].includes(r.status)) ? null : JSON.stringify(s);
      },
    },
    {
      name: '2,000 idle connections each declaring 64 MB',
      run: () => sockets(port, 2000, { head: `POST /v2/models/big/infer HTTP/1.1\r\nhost: x\r\ncontent-length: ${64 * MB}\r\n\r\n`, holdMs: 3000 }),
      // Nothing is reserved for a declared length: they hold no memory, and those past the
      // connection limit (768 at this file limit) are refused.
      check: () => null,
    },
    {
      name: '500 slowloris connections (a header byte a second)',
      run: () => sockets(port, 500, { head: 'POST /v2/models/add/infer HTTP/1.1\r\n', drip: 'x', dripMs: 1000, holdMs: 12000 }),
      // --headers-timeout-ms 2000 here (Node checks every 500 ms). Without it each connection
      // would last the whole 12 s hold; a loaded machine makes the close late, never absent.
      check: (rs) => {
        const late = rs.filter((r) => !['closed by server', 'reset by server'].includes(r.how) || r.ms >= 10000);
        return late.length === 0 ? null : `${late.length} not closed by the server within 10 s of connecting (${late[0].how}, ${late[0].ms} ms)`;
      },
    },
    {
      name: '1,100 silent connections at a 1,024 open-file limit',
      run: () => sockets(port, 1100, { holdMs: 4000 }),
      check: () => null,
    },
    {
      name: 'a 60 MB gRPC ModelInfer',
      run: () => g.call(bigMessage()),
      check: (r) => (r.code === grpc.status.INVALID_ARGUMENT ? null : `got ${JSON.stringify(r).slice(0, 200)}`),
    },
    {
      name: 'four 60 MB gRPC ModelInfers at once',
      run: () => Promise.all(Array.from({ length: 4 }, () => g.call(bigMessage()))),
      check: (rs) => (rs.every((r) => r.code === grpc.status.INVALID_ARGUMENT) ? null : JSON.stringify(rs.map((r) => r.code))),
    },
    {
      name: 'a gRPC shape of 62,914,560 entries',
      run: () => g.call(Buffer.concat([field(1, str('add')), field(5, Buffer.concat([field(1, str('a')), field(2, str('FP32')), field(3, Buffer.alloc(62914560, 4))]))])),
      check: (r) => (r.code === grpc.status.INVALID_ARGUMENT && r.details.length <= 1024 ? null : `got ${r.code}, ${r.details && r.details.length} characters`),
    },
    {
      name: 'malformed gRPC bytes',
      run: () => g.call(Buffer.from([0x0a, 0x03, 0x61, 0x64, 0x64, 0x9b, 0x06])),
      check: (r) => (r.code === grpc.status.INVALID_ARGUMENT && /at byte 5$/.test(r.details) ? null : `got ${r.code} ${r.details}`),
    },
    {
      name: '10,000 gRPC streams on one connection',
      run: async () => {
        const session = http2.connect(`http://127.0.0.1:${grpcPort}`);
        session.on('error', () => {});
        // As a client should: streams opened once the server's SETTINGS (its stream limit) are known.
        await new Promise((r) => session.once('remoteSettings', r));
        const body = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), addRequest([1, 2, 3, 4], [1, 1, 1, 1])]);
        body.writeUInt32BE(body.length - 5, 1);
        const one = () =>
          new Promise((resolve) => {
            const s = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' });
            let status = null;
            s.on('trailers', (t) => (status = t['grpc-status']));
            s.on('response', (h) => {
              if (h['grpc-status'] !== undefined) status = h['grpc-status'];
            });
            s.on('error', (e) => resolve(`error ${e.code} ${s.rstCode}`));
            s.on('close', () => resolve(status));
            s.resume();
            s.end(body);
          });
        const rs = await Promise.all(Array.from({ length: 10000 }, one));
        session.close();
        return rs;
      },
      // Streams past the connection's limit of 100 may be refused at once (node:http2 resets
      // them with ENHANCE_YOUR_CALM; how many depends on the client's pace): every stream is
      // answered OK or refused, none is left hanging or answered wrong.
      check: (rs) => {
        const ok = rs.filter((s) => s === '0').length;
        const refused = rs.filter((s) => s === 'error ERR_HTTP2_STREAM_ERROR 11').length;
        return ok + refused === 10000 && ok > 0 ? null : `${ok} of 10,000 answered OK (${JSON.stringify(rs.reduce((m, s) => ({ ...m, [s]: (m[s] || 0) + 1 }), {}))})`;
      },
      note: (rs) => `${rs.filter((s) => s === '0').length} OK, the rest refused`,
    },
    {
      name: 'an unload by a client',
      run: async () => ({ unload: await post(port, '/v2/repository/models/add/unload', ''), ready: await new Promise((resolve) => http.get({ host: '127.0.0.1', port, path: '/v2/health/ready', agent: false }, (res) => (res.resume(), resolve(res.statusCode)))) }),
      check: (r) => (r.unload.status === 403 && r.ready === 200 ? null : `unload ${r.unload.status}, ready ${r.ready}`),
    },
  ].map((a) => ({ ...a, close: () => g.close() }));
}

async function main() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-hostile-'));
  writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
  writeModel(repo, 'big', { 1: 'add-1m' }, { instances: 1 });
  const server = await startServer(repo);
  const pid = server.child.pid;
  await sleep(300);
  const base = memory(pid);
  RSS_BOUND_MB = Math.round(base.rss) + 2 * BUDGET_MB + 300;
  const probe = probeChild(server.port, server.grpcPort);
  // A real attacker has machines of its own; here it shares the server's two cores. At a lower
  // priority (the server and the probe, started above, keep theirs) its own work of making
  // and sending gigabytes does not count against the server's answers to the probe.
  os.setPriority(10);
  await sleep(500);
  const rows = [];
  let breaches = 0;
  const all = attacks(server.port, server.grpcPort);
  const list = only === null ? all : all.filter((a) => a.name.includes(only));
  // One attack, measured: what it got, the probes during it and the second after, peak memory.
  const measure = async (attack) => {
    probe.reset();
    let peak = memory(pid);
    const sampler = setInterval(() => {
      const m = memory(pid);
      if (m && peak && (m.rss > peak.rss || m.vm > peak.vm)) peak = { rss: Math.max(m.rss, peak.rss), vm: Math.max(m.vm, peak.vm) };
    }, 20);
    const t0 = performance.now();
    let result;
    let error = null;
    try {
      result = await attack.run();
    } catch (err) {
      error = err.message;
    }
    const seconds = (performance.now() - t0) / 1000;
    // The second after: the server must be itself again.
    await sleep(1000);
    clearInterval(sampler);
    const alive = server.child.exitCode === null && memory(pid) !== null;
    const outcome = error ?? attack.check(result);
    const problems = [];
    if (outcome) problems.push(`outcome: ${outcome}`);
    if (!alive) problems.push('the server died');
    if (probe.seen.failures.length > 0) problems.push(`${probe.seen.failures.length} probes failed or slow (first: ${JSON.stringify(probe.seen.failures[0])})`);
    if (probe.seen.count < 3) problems.push(`only ${probe.seen.count} probes answered`);
    if (peak.rss > RSS_BOUND_MB) problems.push(`RSS ${Math.round(peak.rss)} MB over ${RSS_BOUND_MB} MB`);
    // Right answers, only late: on a shared machine a stall of the machine itself looks the same.
    const lateOnly = problems.length === 1 && probe.seen.failures.length > 0 && probe.seen.failures.every((f) => f.http === 'ok' && f.grpc === 'ok');
    return { result, seconds, alive, problems, lateOnly, probes: probe.seen.count, worstMs: probe.seen.worstMs, peak };
  };
  for (const attack of list) {
    let m = await measure(attack);
    // An attack whose only breach is late (but right) probes is made once more: a freeze the
    // attack causes comes again, a stall of the shared machine does not. Both are reported.
    let retried = null;
    if (m.lateOnly) {
      retried = m.problems[0];
      m = await measure(attack);
    }
    if (m.problems.length > 0) breaches++;
    rows.push({ attack: attack.name, note: attack.note && m.result !== undefined ? attack.note(m.result) : undefined, seconds: +m.seconds.toFixed(1), probes: m.probes, worstProbeMs: Math.round(m.worstMs), peakRssMb: Math.round(m.peak.rss), peakVmMb: Math.round(m.peak.vm), ok: m.problems.length === 0, problems: m.problems, retried });
    if (!m.alive) break;
  }
  all[0].close();
  await probe.stop();
  server.child.kill('SIGTERM');
  fs.rmSync(repo, { recursive: true, force: true });
  if (json) console.log(JSON.stringify({ baseRssMb: Math.round(base.rss), baseVmMb: Math.round(base.vm), rows }));
  else {
    console.log(`server at start: RSS ${Math.round(base.rss)} MB, virtual ${Math.round(base.vm)} MB; bounds: probes right within ${PROBE_MS} ms, RSS under ${RSS_BOUND_MB} MB (in-flight budget ${BUDGET})\n`);
    console.log('| attack | s | probes | worst probe ms | peak RSS MB | peak virtual MB | held |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(`| ${r.attack}${r.note ? ` (${r.note})` : ''}${r.retried ? ` (made twice: the first time ${r.retried})` : ''} | ${r.seconds} | ${r.probes} | ${r.worstProbeMs} | ${r.peakRssMb} | ${r.peakVmMb} | ${r.ok ? 'yes' : `**no**: ${r.problems.join('; ')}`} |`);
  }
  console.log(`${rows.length - breaches} attacks held, ${breaches} breached`);
  process.exit(breaches === 0 && rows.length === list.length ? 0 : 1);
}

if (process.argv[2] === '--probe') probeLoop(Number(process.argv[3]), Number(process.argv[4]));
else main().catch((err) => {
  console.error(err);
  process.exit(1);
});
