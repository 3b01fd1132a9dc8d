'use strict';

// A model repository in Triton's layout built from the fixtures, the dtypes model's PARAMETER
// values (written as .npy), and a server started through the real CLI.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { fixture } = require('../fixtures/manifest');
const { formatNpy } = require('../../lib/npy');
const { rng, f16Bits } = require('../helpers');

const BIN = path.join(__dirname, '..', '..', 'bin', 'zgc-runtime.js');

/** The dtypes fixture's parameters: logical values, except wp given as its physical storage (bound). */
function dtypesParameters(seed = 7) {
  const next = rng(seed);
  const f32 = (n) => Float32Array.from({ length: n }, () => Math.round((next() * 8 - 4) * 4) / 4);
  return {
    wt: { dtype: 'f32', shape: [2, 3], data: f32(6) },
    wp: { dtype: 'f32', shape: [9], data: f32(9), bind: true },
    wn: { dtype: 'f32', shape: [2, 3], data: f32(6) },
    hb: { dtype: 'f16', shape: [3], data: Uint16Array.from([0.5, -2, 3.25], f16Bits) },
    qb: { dtype: 'i8', shape: [2, 2], data: Int8Array.from([100, -100, 7, -7]) },
    mb: { dtype: 'bool', shape: [3], data: Uint8Array.from([1, 0, 1]) },
    g: { dtype: 'f32', shape: [], data: Float32Array.of(1.5) },
  };
}

function writeModel(repo, name, versions, config, files = {}) {
  const dir = path.join(repo, name);
  for (const [version, so] of Object.entries(versions)) {
    fs.mkdirSync(path.join(dir, version), { recursive: true });
    fs.copyFileSync(fixture(so), path.join(dir, version, 'model.so'));
  }
  if (config) fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  for (const [file, bytes] of Object.entries(files)) fs.writeFileSync(path.join(dir, file), bytes);
  return dir;
}

/** Every model the serve tests use, in a fresh temporary repository. */
function makeRepository() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-serve-'));
  const params = dtypesParameters();
  const files = {};
  const parameters = {};
  for (const [name, p] of Object.entries(params)) {
    files[`${name}.npy`] = formatNpy(p.dtype, p.shape, p.data);
    parameters[name] = p.bind ? { file: `${name}.npy`, bind: true } : `${name}.npy`;
  }
  writeModel(repo, 'dtypes', { 1: 'dtypes' }, { instances: 1, parameters, outputs: ['o0', 'o1', 'o2', 'o3', 'o4', 'o5'] }, files);
  writeModel(repo, 'add', { 1: 'add', 2: 'add' }, { instances: 2, versionPolicy: 'all' });
  writeModel(repo, 'add1m', { 1: 'add-1m' }, { instances: 1 });
  writeModel(repo, 'status', { 1: 'status' }, { instances: 1 });
  const sleep = (ms) => ({ 'sleep.npy': formatNpy('f32', [], Float32Array.of(ms)) });
  writeModel(repo, 'slow', { 1: 'slow' }, { instances: 1, maxQueue: 1, parameters: { sleep_ms: 'sleep.npy' } }, sleep(300));
  writeModel(repo, 'slowtimeout', { 1: 'slow' }, { instances: 1, timeoutMs: 100, parameters: { sleep_ms: 'sleep.npy' } }, sleep(400));
  return { repo, params };
}

/** Starts `zgc-runtime serve` on a free port; resolves once it listens. */
function startServer(args, { env } = {}) {
  const child = spawn(process.execPath, [BIN, 'serve', ...args, '--port', '0'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = /listening on http:\/\/([^\s]+):(\d+)/.exec(stdout);
      if (m) resolve({ child, host: m[1], port: Number(m[2]), url: `http://${m[1]}:${m[2]}`, stderr: () => stderr, stdout: () => stdout });
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code} before listening: ${stderr}`)));
  });
}

/**
 * The same command line served in this process (lib/cli-args.js, then createServer, as the
 * CLI does): for the tests that need no process of their own, so that what they cover is
 * visible to coverage and to mutation testing. `stop()` drains as SIGTERM would.
 */
async function listenInProcess(args) {
  const { createServer } = require('../../lib/serve');
  const { parseServeArgs } = require('../../lib/cli-args');
  const { command, port, host, ...options } = parseServeArgs(args);
  let stderr = '';
  const server = createServer({ ...options, log: (line) => (stderr += `zgc-runtime serve: ${line}\n`) });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { server, host: '127.0.0.1', port: server.address().port, url, stderr: () => stderr, stop: () => server.shutdown({ deadlineMs: 10000 }) };
}

/**
 * A describe block's server: before its tests, the repository `makeRepo()` writes, served in
 * this process over HTTP and gRPC (with `args` on the command line); after them, stopped and
 * removed. Returns `{ server, grpcPort, repo }`, filled in before the first test.
 */
function servedRepo(makeRepo, args = []) {
  const live = {};
  beforeAll(async () => {
    live.repo = makeRepo();
    live.server = await listenInProcess([live.repo, ...args]);
    live.grpcPort = await live.server.server.listenGrpc(0, '127.0.0.1');
  });
  afterAll(async () => {
    if (live.server) await live.server.stop();
    if (live.repo) fs.rmSync(live.repo, { recursive: true, force: true });
  });
  return live;
}

/** The message a server's load throws for the models `fill(repo)` writes into a new repository; null when they load. */
async function loadFailure(fill) {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-load-'));
  try {
    fill(repo);
    const { createServer } = require('../../lib/serve');
    try {
      const s = createServer({ models: [repo], log: () => {} });
      await s.shutdown();
      return null;
    } catch (err) {
      return err.message;
    }
  } finally {
    fs.rmSync(repo, { recursive: true, force: true });
  }
}

/** Resolves with the exit code once the child ends. */
function exited(child) {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
}

/** The Python clients' venvs: tritonclient[http] (and the reference) in .venv-ref, tritonclient[grpc] and kserve in .venv-grpc. */
const PYTHON = { http: path.join(__dirname, '..', '..', '.venv-ref', 'bin', 'python'), grpc: path.join(__dirname, '..', '..', '.venv-grpc', 'bin', 'python') };
const hasClients = fs.existsSync(PYTHON.http) && fs.existsSync(PYTHON.grpc);

/**
 * Runs `script` (a Python client in this folder) with the venv of `protocol` ('http' or
 * 'grpc'), `args` after it and `input` on its stdin; resolves the JSON it prints.
 */
function pythonClient(script, protocol, args, input = '') {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON[protocol], [path.join(__dirname, script), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (status) => (status === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`${script} ${protocol} failed (${status}): ${stderr}`))));
    child.stdin.end(input);
  });
}

module.exports = { loadFailure, servedRepo, makeRepository, writeModel, dtypesParameters, startServer, listenInProcess, exited, pythonClient, hasClients, PYTHON, BIN };
