#!/usr/bin/env node
'use strict';

// npm run bench: builds what it needs, measures every workload for every contender side by
// side in one run, prints one table (medians, ratio to the C floor) and writes
// bench/results.json. Contenders: the C floor (bench/floor.c straight through the ABI),
// zgc-runtime (run, runAsync, run with { into }), the Python reference zgc-runtime 0.1.0,
// and the same ABI bound by hand with koffi. Then the service figures (bench/services.js):
// pools and async runs against onnxruntime-node on equivalent ONNX models, a libuv hop,
// and event-loop delay; isolation, serving, and the schedulers (bench/scheduling.js).
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
const build = path.join(__dirname, 'build');
const quick = process.argv.includes('--quick');

function sh(cmd, args) {
  execFileSync(cmd, args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
}

if (!process.argv.includes('--no-build')) {
  sh(process.execPath, ['scripts/build.js']);
  sh(process.execPath, ['scripts/build-fixtures.js']);
}
fs.mkdirSync(build, { recursive: true });
const floorBin = path.join(build, 'floor');
sh(process.env.CC || 'cc', ['-O2', '-march=native', '-o', floorBin, path.join(__dirname, 'floor.c'), '-ldl']);

const { load } = require('..');
const { fixture } = require('../__test__/fixtures/manifest');
const { measure, measureAsync, median } = require('./measure');
const { bindArtifact } = require('./koffi-binding');
const { setupOrt } = require('./ort');
const { services, report } = require('./services');
const { serving, reportServing } = require('./serving');
const { isolation, reportIsolation } = require('./isolation');
const { scheduling, reportScheduling } = require('./scheduling');
const { clientBench } = require('./client');

let python = null;
try {
  sh(process.execPath, ['scripts/prepare-reference.js']);
  python = path.join(root, '.venv-ref', 'bin', 'python');
} catch (err) {
  console.error(`Python reference skipped: ${err.message.split('\n')[0]}`);
}

function external(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8', timeout: 600000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

const N = 1 << 20;
const ramp = (n) => Float32Array.from({ length: n }, (_, k) => (k % 1000) * 0.5);
const ones = (n) => new Float32Array(n).fill(1);

// Each workload: its artifact, the floor's workload name, and one setup per contender that
// returns the operation to time (or null where the contender has no such operation).
const workloads = [
  {
    id: 'add-tiny',
    title: 'tiny f32[4] add (per-call overhead)',
    fixture: 'add',
    zgc(rt) {
      const a = ramp(4);
      const b = ones(4);
      const into = { into: [new Float32Array(4)] };
      return { run: () => rt.run({ a, b }), runAsync: () => rt.runAsync({ a, b }), into: () => rt.run({ a, b }, into) };
    },
    koffi({ api, rt, check }) {
      const a = ramp(4);
      const b = ones(4);
      return () => {
        check(api.copySource(rt, 1, a, 16), 'copy_source');
        check(api.copySource(rt, 2, b, 16), 'copy_source');
        check(api.run(rt), 'run');
        const out = new Float32Array(4);
        check(api.copyOutput(rt, 0, out, 16), 'copy_output');
        return out;
      };
    },
  },
  {
    id: 'add-owned-1m',
    title: '1M f32 add, OWNED inputs (copy throughput)',
    fixture: 'add-1m',
    zgc(rt) {
      const a = ramp(N);
      const b = ones(N);
      const into = { into: [new Float32Array(N)] };
      return { run: () => rt.run({ a, b }), runAsync: () => rt.runAsync({ a, b }), into: () => rt.run({ a, b }, into) };
    },
    koffi({ api, rt, check }) {
      const a = ramp(N);
      const b = ones(N);
      return () => {
        check(api.copySource(rt, 1, a, N * 4), 'copy_source');
        check(api.copySource(rt, 2, b, N * 4), 'copy_source');
        check(api.run(rt), 'run');
        const out = new Float32Array(N);
        check(api.copyOutput(rt, 0, out, N * 4), 'copy_output');
        return out;
      };
    },
  },
  {
    id: 'add-bound-1m',
    title: '1M f32 add, BOUND zero-copy inputs',
    fixture: 'add-bound-1m',
    zgc(rt) {
      rt.bind('a', ramp(N));
      rt.bind('b', ones(N));
      const into = { into: [new Float32Array(N)] };
      // Async runs read storage() in place (bind() storage is copied per async run).
      const asyncRt = load(fixture('add-bound-1m'));
      asyncRt.storage('a').set(ramp(N));
      asyncRt.storage('b').fill(1);
      return { run: () => rt.run(), runAsync: () => asyncRt.runAsync(), into: () => rt.run(undefined, into) };
    },
    koffi({ api, rt, check }) {
      const a = ramp(N);
      const b = ones(N);
      check(api.bindSource(rt, 1, a, N * 4), 'bind_source');
      check(api.bindSource(rt, 2, b, N * 4), 'bind_source');
      return () => {
        check(api.run(rt), 'run');
        const out = new Float32Array(N);
        check(api.copyOutput(rt, 0, out, N * 4), 'copy_output');
        return [out, a, b];
      };
    },
  },
  {
    id: 'pack',
    title: 'set() of a 1M transposed, padded BOUND source (packing)',
    fixture: 'pack',
    zgc(rt) {
      const w = ramp(N);
      return { run: () => rt.set('w', w) };
    },
    koffi({ api, rt, check }) {
      // What a user would write: pack in JavaScript, then bind.
      const w = ramp(N);
      const physical = new Float32Array(1040 * 1024);
      return () => {
        for (let i = 0; i < 1024; i++) for (let j = 0; j < 1024; j++) physical[j * 1040 + i] = w[i * 1024 + j];
        check(api.bindSource(rt, 1, physical, physical.byteLength), 'bind_source');
      };
    },
  },
  {
    id: 'half-1m',
    title: '1M f16 in and out (conversion)',
    fixture: 'half',
    zgc(rt) {
      const x = ramp(N);
      const into = { into: [new Float32Array(N)] };
      return { run: () => rt.run({ x }), runAsync: () => rt.runAsync({ x }), into: () => rt.run({ x }, into) };
    },
    koffi: null, // JavaScript has no f16 conversion to write by hand on Node 20
  },
  {
    id: 'matmul',
    title: '256x256x256 f32 matmul (compute-bound)',
    fixture: 'matmul',
    zgc(rt) {
      const a = ramp(256 * 256);
      rt.bind('b', ones(256 * 256));
      const into = { into: [new Float32Array(256 * 256)] };
      return { run: () => rt.run({ a }), runAsync: () => rt.runAsync({ a }), into: () => rt.run({ a }, into) };
    },
    koffi({ api, rt, check }) {
      const a = ramp(256 * 256);
      const b = ones(256 * 256);
      check(api.bindSource(rt, 2, b, b.byteLength), 'bind_source');
      return () => {
        check(api.copySource(rt, 1, a, a.byteLength), 'copy_source');
        check(api.run(rt), 'run');
        const out = new Float32Array(256 * 256);
        check(api.copyOutput(rt, 0, out, out.byteLength), 'copy_output');
        return [out, b];
      };
    },
  },
];

async function measureWorkloads() {
  const rows = [];
  for (const w of workloads) {
    if (quick && w.id !== 'add-tiny') continue;
    const so = fixture(w.fixture);
    process.stderr.write(`${w.id}: floor`);
    const row = { id: w.id, title: w.title, ns: {} };
    row.ns.floor = external(floorBin, [so, w.id]).median_ns;
    const rt = load(so);
    const ops = w.zgc(rt);
    process.stderr.write(', zgc');
    row.ns.run = measure(ops.run).median_ns;
    if (ops.into) row.ns.into = measure(ops.into).median_ns;
    if (ops.runAsync) row.ns.runAsync = (await measureAsync(ops.runAsync)).median_ns;
    rt.close();
    if (w.koffi) {
      process.stderr.write(', koffi');
      row.ns.koffi = measure(w.koffi(bindArtifact(so))).median_ns;
    }
    if (python) {
      process.stderr.write(', python');
      row.ns.python = external(python, [path.join(__dirname, 'reference_bench.py'), so, w.id]).median_ns;
    }
    process.stderr.write('\n');
    rows.push(row);
  }
  return rows;
}

function fmt(ns) {
  if (ns === undefined) return '—';
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(2)} µs`;
  return `${ns.toFixed(0)} ns`;
}

async function main() {
  const rows = await measureWorkloads();
  let ortSetup = null;
  try {
    ortSetup = setupOrt(python);
  } catch (err) {
    console.error(`onnxruntime-node skipped: ${err.message.split('\n')[0]}`);
  }
  process.stderr.write('services\n');
  const svc = await services({ quick, ortSetup });
  process.stderr.write('isolation\n');
  const iso = await isolation({ quick, ortSetup });
  process.stderr.write('serving\n');
  const http = await serving({ quick, python: process.argv.includes('--python-servers') });
  process.stderr.write('scheduling\n');
  const sched = await scheduling({ quick });
  const client = await clientBench();
  const cols = ['floor', 'run', 'into', 'runAsync', 'koffi', 'python'];
  const header = ['workload', ...cols.map((c) => (c === 'floor' ? 'C floor' : c === 'into' ? 'run {into}' : c))];
  const lines = [header];
  for (const row of rows) {
    lines.push([row.id, ...cols.map((c) => (row.ns[c] === undefined ? '—' : c === 'floor' ? fmt(row.ns[c]) : `${fmt(row.ns[c])} (${(row.ns[c] / row.ns.floor).toFixed(2)}x)`))]);
  }
  const widths = header.map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  const table = lines.map((l) => `| ${l.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`);
  table.splice(1, 0, `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  console.log(table.join('\n'));
  const tiny = rows.find((r) => r.id === 'add-tiny');
  const pack = rows.find((r) => r.id === 'pack');
  const ratios = {
    tinyRunVsPython: tiny && tiny.ns.python ? tiny.ns.python / tiny.ns.run : null,
    tinyRunVsKoffi: tiny ? tiny.ns.koffi / tiny.ns.run : null,
    packVsPython: pack && pack.ns.python ? pack.ns.python / pack.ns.run : null,
  };
  console.log(`\ntiny add: run() is ${ratios.tinyRunVsPython ? ratios.tinyRunVsPython.toFixed(1) : '—'}x faster than the Python reference, ${ratios.tinyRunVsKoffi.toFixed(2)}x faster than koffi`);
  if (ratios.packVsPython) console.log(`packing: set() is ${ratios.packVsPython.toFixed(0)}x faster than the Python reference`);
  console.log(`\n${report(svc)}`);
  console.log(`\n${reportIsolation(iso)}`);
  console.log(`\n${reportServing(http)}`);
  console.log(`\n${reportScheduling(sched)}`);
  const machine = { cpus: os.cpus().length, model: os.cpus()[0].model, node: process.version, platform: `${process.platform}-${process.arch}`, date: new Date().toISOString() };
  fs.writeFileSync(path.join(__dirname, 'results.json'), `${JSON.stringify({ machine, method: 'median ns per operation over 15 batches of >= 40 ms (Python: 3-15 batches)', workloads: rows, ratios, service: svc, isolation: iso, serving: http, scheduling: sched, client }, null, 2)}\n`);
  console.log(`\nwritten to bench/results.json (${machine.model}, ${machine.cpus} CPUs, Node ${machine.node})`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
