#!/usr/bin/env node
'use strict';

// npx zgc-runtime inspect|run|bench <artifact> ... | build-from-source: see `zgc-runtime --help`.
const fs = require('node:fs');
const path = require('node:path');
const { formatNpy, NpyError, ARRAYS } = require('../lib/npy');
const { ZgcError } = require('../lib/errors');
const { shortestF32s, f16Value } = require('../lib/numbers');
const { helpLines } = require('../lib/serve/limits');

const USAGE = `usage: zgc-runtime <command> <artifact> [options]

commands:
  inspect <artifact> [--json]          ABI version, fingerprint, memory sizes, sources and outputs
  run <artifact> [--input name=VALUES]... [--save DIR] [--json]
                                       run once and print the outputs (or save them as .npy)
                                       VALUES: a .npy file, or a comma list (1,2.5,-3; true,false for bool)
  bench <artifact> [--runs N] [--seconds S] [--progress]
                                       time runs with random inputs (default: 3 s, at most 1e6 runs)
  build-from-source [--force]          build the native addon with cargo where no prebuilt one loads
  --version                            the package's version
  serve <model>... [options]           an Open Inference Protocol (KServe v2) server; each <model> is
                                         models/            a repository: models/<name>/<version>/model.so
                                         name=models/mlp    one model directory (config.json, .npy parameters)
                                         name=add.so        one artifact whose parameters are all OWNED
                                         add.so             the same, named after the file
    --port N              (8000; 0 picks a free one)   --host H (127.0.0.1; 0.0.0.0 in a container)
    --pool-size N         instances per model version (a model's config.json "instances" wins; default: one per CPU)
    --max-queue N         waiting requests per model before 503 (1024)
    --timeout-ms N        a request not answered by then is a 504 (30000; 0: none)
    --model-control none|poll|explicit
                          who loads models after start: nobody (none, the default), polling of the
                          model files (poll), or clients, through the repository API (explicit)
    --poll-ms N           with --model-control poll: how often changed model files are looked for (2000)
    --restricted-api CATEGORIES:HEADER=VALUE
                          those API categories (health, metadata, inference, model-config, model-repository,
                          metrics, statistics, shared-memory, logging, trace) answer only requests with that
                          header (gRPC: metadata); repeatable
    --config FILE         server settings from a JSON file: the createServer options (flags win)
    --shutdown-timeout-ms N  on SIGTERM/SIGINT, how long accepted requests may take (30000)
    --isolate none|process   run each instance in a process of its own (a model's config.json "isolate" wins; none)
    --allow-client-shm    let local clients register POSIX shared memory regions for tensors (Linux; off)
    --grpc-port N         also serve the protocol's gRPC service there (Triton's is 8001; off unless given; needs @grpc/grpc-js)
  limits (SIZE: bytes, or k, m, g units; defaults in brackets):
${helpLines()}
`;

const { UsageError, parseArgs, readInput, checkInputsGiven } = require('../lib/cli-args');

/** Runs the server until SIGTERM or SIGINT, then drains it and exits (0 when every accepted request was answered). */
function serve(options) {
  const { createServer } = require('../lib/serve/server');
  const log = (line) => process.stderr.write(`zgc-runtime serve: ${line}\n`);
  let server;
  try {
    const { command, port, host, grpcPort, ...rest } = options;
    server = createServer({ ...rest, log });
  } catch (err) {
    process.stderr.write(`zgc-runtime serve: ${err.code ? `${err.code}: ` : ''}${err.message}\n`);
    return 1;
  }
  server.on('error', (err) => {
    log(`cannot listen on ${options.host}:${options.port}: ${err.code || err.message}`);
    process.exit(1);
  });
  // A listen queue of 4,096 (the kernel caps it at net.core.somaxconn) instead of Node's 511:
  // past the queue, a burst's connection attempts are dropped and retried by TCP after 1 s.
  server.listen({ port: options.port, host: options.host, backlog: 4096 }, () => {
    const { address, port } = server.address();
    const shown = address.includes(':') ? `[${address}]` : address;
    const ready = () => console.log(`zgc-runtime serve: listening on http://${shown}:${port} (models: ${[...server.zgc.repository.models.keys()].join(', ')})`);
    if (options.grpcPort === undefined) return ready();
    // Both listening before either is announced: a script that waits for the line can use both.
    server.listenGrpc(options.grpcPort, options.host).then(
      (bound) => {
        ready();
        console.log(`zgc-runtime serve: gRPC listening on ${shown}:${bound}`);
      },
      (err) => {
        log(`cannot serve gRPC on ${options.host}:${options.grpcPort}: ${err.message}`);
        process.exit(1);
      },
    );
  });
  const stop = (signal) => {
    log(`${signal}: draining ${server.zgc.active} requests`);
    server.shutdown().then(({ drained, unanswered }) => {
      log(drained ? 'every accepted request answered; pools closed' : `deadline reached with ${unanswered} requests unanswered`);
      process.exit(drained ? 0 : 1);
    });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return undefined;
}

/** An output's values as printed: f32 as f32 (its shortest decimal), f16 bits as their value. */
function valuesOf(dtype, data) {
  return dtype === 'f32' ? shortestF32s(data) : Array.from(data, dtype === 'f16' ? f16Value : Number);
}

function formatValues(dtype, data) {
  const values = valuesOf(dtype, data);
  const show = values.length > 20 ? [...values.slice(0, 10), '…', ...values.slice(-5)] : values;
  return `[${show.join(', ')}]`;
}

/** `shownPath`: the artifact as the user named it (the absolute path is in --json). */
function inspect(rt, json, shownPath) {
  const info = {
    path: rt.path,
    abiVersion: rt.abiVersion,
    fingerprint: rt.fingerprintHex,
    runtimeSize: rt.runtimeSize,
    runtimeAlignment: rt.runtimeAlignment,
    mutableBytes: rt.mutableBytes,
    sources: rt.sources,
    outputs: rt.outputs,
  };
  if (json) return JSON.stringify(info, null, 2);
  const table = (rows, columns) => {
    const width = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
    const line = (cells) => cells.map((v, i) => String(v).padEnd(width[i])).join('  ').trimEnd();
    return [line(columns), line(width.map((w) => '-'.repeat(w))), ...rows.map((r) => line(columns.map((c) => r[c])))].join('\n');
  };
  const shape = (s) => `[${s.join(', ')}]`;
  return [
    `artifact     ${shownPath}`,
    `ABI version  ${rt.abiVersion}`,
    `fingerprint  ${rt.fingerprintHex}`,
    `runtime      ${rt.runtimeSize} bytes, aligned to ${rt.runtimeAlignment}; ${rt.mutableBytes} mutable bytes`,
    '',
    `sources (${rt.sources.length})`,
    table(rt.sources.map((s) => ({ key: s.key, name: s.name, kind: s.kind, binding: s.binding, dtype: s.dtype, shape: shape(s.shape), strides: shape(s.strides), offset: s.offset, elements: s.elementCount, bytes: s.byteCount })), ['key', 'name', 'kind', 'binding', 'dtype', 'shape', 'strides', 'offset', 'elements', 'bytes']),
    '',
    `outputs (${rt.outputs.length})`,
    table(rt.outputs.map((o, i) => ({ index: i, dtype: o.dtype, shape: shape(o.shape), elements: o.elementCount, bytes: o.byteCount })), ['index', 'dtype', 'shape', 'elements', 'bytes']),
  ].join('\n');
}

function run(rt, options) {
  const inputs = Object.fromEntries(options.inputs.map((spec) => readInput(rt, spec)));
  checkInputsGiven(rt, inputs);
  const outputs = rt.run(inputs);
  if (options.save) {
    fs.mkdirSync(options.save, { recursive: true });
    const files = outputs.map((o, i) => {
      const file = path.join(options.save, `output-${i}.npy`);
      fs.writeFileSync(file, formatNpy(o.dtype, o.shape, o.data));
      return file;
    });
    return options.json ? JSON.stringify({ saved: files }) : files.map((f, i) => `output ${i} -> ${f}`).join('\n');
  }
  if (options.json) {
    return JSON.stringify(outputs.map((o) => ({ dtype: o.dtype, shape: o.shape, data: valuesOf(o.dtype, o.data) })));
  }
  return outputs.map((o, i) => `output ${i}  ${o.dtype} [${o.shape.join(', ')}]  ${formatValues(o.dtype, o.data)}`).join('\n');
}

function randomValues(source, next) {
  const n = source.shape.reduce((a, b) => a * b, 1);
  const out = new ARRAYS[source.dtype === 'f16' ? 'f32' : source.dtype](n);
  for (let k = 0; k < n; k++) {
    const r = next();
    out[k] = source.dtype === 'bool' ? (r < 0.5 ? 0 : 1) : source.dtype === 'i8' ? Math.floor(r * 256) - 128 : r * 2 - 1;
  }
  return out;
}

function bench(rt, options, out) {
  let seed = 1;
  const next = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  for (const s of rt.sources) if (s.binding !== 'embedded') rt.set(s.name, randomValues(s, next));
  const into = rt.outputs.map((o) => new (o.dtype === 'f16' ? Uint16Array : ARRAYS[o.dtype])(o.elementCount));
  for (let i = 0; i < 10; i++) rt.run(undefined, { into });
  const maxRuns = options.runs || 1e6;
  const budget = options.runs ? Infinity : (options.seconds || 3) * 1e9;
  const showBar = options.progress || (process.stderr.isTTY && (options.runs === undefined || options.runs > 1000));
  const times = [];
  const start = process.hrtime.bigint();
  let lastDraw = 0;
  for (let i = 0; i < maxRuns; i++) {
    const t0 = process.hrtime.bigint();
    rt.run(undefined, { into });
    const t1 = process.hrtime.bigint();
    times.push(Number(t1 - t0));
    const elapsed = Number(t1 - start);
    if (elapsed >= budget) break;
    if (showBar && elapsed - lastDraw > 1e8) {
      lastDraw = elapsed;
      const done = Math.min(1, Math.max((i + 1) / maxRuns, elapsed / budget));
      const filled = Math.round(done * 30);
      process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(30 - filled)}] ${(done * 100).toFixed(0).padStart(3)}%  ${i + 1} runs`);
    }
  }
  if (showBar) process.stderr.write(`\r[${'#'.repeat(30)}] 100%  ${times.length} runs\n`);
  times.sort((a, b) => a - b);
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  const total = times.reduce((a, b) => a + b, 0);
  const fmt = (ns) => (ns >= 1e6 ? `${(ns / 1e6).toFixed(3)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} µs` : `${ns.toFixed(0)} ns`);
  const result = { runs: times.length, medianNs: at(0.5), p90Ns: at(0.9), minNs: times[0], runsPerSecond: times.length / (total / 1e9) };
  out(`${result.runs} runs: median ${fmt(result.medianNs)}, p90 ${fmt(result.p90Ns)}, min ${fmt(result.minNs)}, ${result.runsPerSecond.toFixed(0)} runs/s`);
}

function main(argv) {
  let options;
  try {
    options = parseArgs(argv);
  } catch (err) {
    process.stderr.write(`zgc-runtime: ${err.message}\n\n${USAGE}`);
    return 2;
  }
  if (options.command === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (options.command === 'version') {
    console.log(`zgc-runtime ${require('../package.json').version}`);
    return 0;
  }
  // Before anything loads the addon: this command is how a missing one is made.
  if (options.command === 'build-from-source') return require('../lib/build-from-source').buildFromSource({ force: options.force });
  if (options.command === 'serve') return serve(options);
  let rt;
  try {
    rt = require('..').load(options.artifact, { f16: 'bits' });
    if (options.command === 'inspect') console.log(inspect(rt, options.json, options.artifact));
    else if (options.command === 'run') console.log(run(rt, options));
    else bench(rt, options, console.log);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`zgc-runtime: ${err.message}\n`);
      return 2;
    }
    if (err instanceof ZgcError || err instanceof NpyError || err instanceof TypeError || err instanceof RangeError) {
      process.stderr.write(`zgc-runtime: ${err.code ? `${err.code}: ` : ''}${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    if (rt) rt.close();
  }
}

process.exitCode = main(process.argv.slice(2));
