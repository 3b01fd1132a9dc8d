'use strict';

// gRPC load for unary ModelInfer calls: the encoded message in gRPC's length-prefixed framing
// on HTTP/2 streams. With h2load (nghttp2's load generator, Debian's nghttp2-client) when it
// is installed, else node:http2 streams in two processes of their own. A @grpc/grpc-js client
// costs ~130 µs a call in JavaScript and tops out near 7,500 calls/s on this machine, so it
// measured itself more than the servers; node:http2 streams reach ~9,000, h2load 17,000.
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const http2 = require('node:http2');
const os = require('node:os');
const path = require('node:path');
const { decodeInferResponse } = require('./grpc-messages');

const INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

/** `body` in gRPC's framing: an uncompressed flag byte and a big-endian length. */
function framed(body) {
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return frame;
}

/** One process's part: `inFlight` calls outstanding on one HTTP/2 connection from `start` to `until` (epoch ms). */
async function drive({ target, body, expected, inFlight, start, until }) {
  const session = http2.connect(`http://${target}`);
  session.on('error', () => {});
  const frame = framed(body);
  const headers = { ':method': 'POST', ':path': INFER_PATH, 'content-type': 'application/grpc', te: 'trailers' };
  const call = () => new Promise((resolve, reject) => {
    const stream = session.request(headers);
    const chunks = [];
    let status;
    stream.on('response', (h) => (status = h['grpc-status'] ?? status));
    stream.on('trailers', (t) => (status = t['grpc-status']));
    stream.on('data', (c) => chunks.push(c));
    stream.on('error', reject);
    stream.on('end', () => {
      if (status !== '0') return reject(new Error(`grpc-status ${status}`));
      const reply = Buffer.concat(chunks);
      const values = Array.from(decodeInferResponse(reply.subarray(5))).join();
      return values === expected ? resolve() : reject(new Error(`answered ${values}, expected ${expected}`));
    });
    stream.end(frame);
  });
  await call();
  await new Promise((r) => setTimeout(r, Math.max(0, start - Date.now())));
  const latencies = [];
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (Date.now() < until) {
      const t0 = performance.now();
      await call();
      latencies.push(performance.now() - t0);
    }
  }));
  session.close();
  return latencies;
}

/** The node:http2 generator: `inFlight` calls over `processes` processes, every answer checked. */
async function nodeLoad(target, body, { expected, duration, inFlight, processes = 2 }) {
  const start = Date.now() + 500;
  const job = { target, body: body.toString('base64'), expected, inFlight: inFlight / processes, start, until: start + duration * 1000 };
  const parts = await Promise.all(Array.from({ length: processes }, () => new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [__filename, JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`gRPC load generator exited ${code}: ${err}`))));
  })));
  const latencies = parts.flat().sort((x, y) => x - y);
  // A server that answered no call in the round (a slow one on a loaded machine): 0 calls/s.
  if (latencies.length === 0) return { rps: 0, p50: null, p99: null };
  const at = (q) => Number(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(2));
  return { rps: latencies.length / duration, p50: at(0.5), p99: at(0.99) };
}

const hasH2load = () => spawnSync('h2load', ['--version'], { stdio: 'ignore' }).status === 0;

/**
 * h2load: two connections, `inFlight` streams in all, for `duration` s. It reads no gRPC
 * status, so each call must have carried a whole reply of `replyBytes` (a call that fails
 * answers with trailers only): its data bytes are checked against that.
 */
function h2Load(target, body, { duration, inFlight, replyBytes }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-h2load-'));
  try {
    fs.writeFileSync(path.join(dir, 'frame'), framed(body));
    const log = path.join(dir, 'log');
    const r = spawnSync('h2load', ['-D', String(duration), '-c', '2', '-m', String(inFlight / 2), '-t', '1', '-d', path.join(dir, 'frame'), '-H', 'content-type: application/grpc', '-H', 'te: trailers', `--log-file=${log}`, `http://${target}${INFER_PATH}`], { encoding: 'utf8' });
    const done = /(\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(r.stdout);
    const data = /\((\d+)\) data/.exec(r.stdout);
    if (r.status !== 0 || !done || !data) throw new Error(`h2load failed (${r.status}): ${r.stdout}${r.stderr}`);
    const [, , succeeded, failed, errored] = done.map(Number);
    if (failed || errored || Number(data[1]) < succeeded * (5 + replyBytes)) throw new Error(`gRPC load on ${target}: ${failed} failed, ${errored} errored, ${data[1]} data bytes for ${succeeded} calls of ${5 + replyBytes}: not every call answered`);
    const latencies = fs.readFileSync(log, 'utf8').trim().split('\n').map((line) => Number(line.split('\t')[2]) / 1000).sort((x, y) => x - y);
    const at = (q) => Number(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(2));
    return { rps: succeeded / duration, p50: at(0.5), p99: at(0.99) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Which generator `grpcLoad` uses here. */
const generator = () => (hasH2load() ? 'h2load (nghttp2), 2 connections' : 'node:http2 streams in 2 processes');

/**
 * Unary ModelInfer calls of `body` (encoded message bytes), `inFlight` outstanding, for
 * `duration` s: calls/s and latency quantiles in ms. `expected` (the first output's f32
 * values joined by commas) and `replyBytes` (the length of the server's reply) check answers.
 */
function grpcLoad(target, body, { expected, replyBytes, duration, inFlight = 32 }) {
  return hasH2load() ? h2Load(target, body, { duration, inFlight, replyBytes }) : nodeLoad(target, body, { expected, duration, inFlight });
}

if (require.main === module) {
  const job = JSON.parse(process.argv[2]);
  drive({ ...job, body: Buffer.from(job.body, 'base64') }).then(
    (latencies) => process.stdout.write(JSON.stringify(latencies)),
    (err) => {
      process.stderr.write(`${err.stack}\n`);
      process.exit(1);
    },
  );
}

module.exports = { grpcLoad, generator, INFER_PATH };
