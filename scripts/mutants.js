#!/usr/bin/env node
'use strict';

// npm run mutants [-- --file crates/core/src/x.rs ...]: mutation testing of the Rust core with
// cargo-mutants (installed on first use, pinned), configured by .cargo/mutants.toml (which
// files, and the survivors known to be equivalent, each with its reason). Extra arguments go
// to cargo mutants. Not part of npm test: a full run takes the better part of an hour on 2 cores.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const os = require('node:os');

const root = path.join(__dirname, '..');
const VERSION = '27.1.0';
const STRYKER = '9.6.1'; // the last to run on Node 20
const strykerHome = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'zgc-runtime', 'stryker');

// --js [FILE...]: Stryker over the JavaScript facade instead (stryker.config.json; FILEs
// replace its `mutate` list). Installed on first use into a cache outside the checkout, as
// the test hosts are, so that `npm ci` never needs it. It mutates files in place and puts
// the whole tree back as it was when it started: edit nothing while it runs.
if (process.argv.includes('--js')) {
  const bin = path.join(strykerHome, 'node_modules', '.bin', 'stryker');
  if (!fs.existsSync(bin)) {
    fs.mkdirSync(strykerHome, { recursive: true });
    fs.writeFileSync(path.join(strykerHome, 'package.json'), '{"name":"zgc-stryker","private":true}\n');
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', `@stryker-mutator/core@${STRYKER}`, `@stryker-mutator/jest-runner@${STRYKER}`], { cwd: strykerHome, stdio: 'inherit' });
    if (r.status !== 0) process.exit(1);
  }
  if (typeof globalThis.Float16Array !== 'function') {
    // lib/runtime.js's Float16Array paths are mutated either way; their tests skip on this host.
    console.warn(`${process.version} has no Float16Array: run this under Node 24 or later to test the f16 paths too`);
  }
  // --specs A,B: only these specs run (a file every test reaches, such as lib/options.js,
  // would otherwise run the whole suite for each mutant), and static mutants are skipped.
  const at = process.argv.indexOf('--specs');
  const specs = at > 0 ? process.argv[at + 1].split(',') : null;
  // --timeout-ms N: Stryker's slack over a mutant's usual test time (10 s by default). Lower
  // it for code whose mutants can hang (a batch that never goes): each such mutant waits it out.
  const tat = process.argv.indexOf('--timeout-ms');
  const withValue = new Set(['--specs', '--timeout-ms']);
  const files = process.argv.slice(2).filter((a, i, all) => a !== '--js' && !withValue.has(a) && a !== '--every-test' && !withValue.has(all[i - 1]));
  const args = ['run', ...(files.length ? ['--mutate', files.join(',')] : []), ...(tat > 0 ? ['--timeoutMS', process.argv[tat + 1]] : [])];
  let narrowed = null;
  if (specs) {
    const config = JSON.parse(fs.readFileSync(path.join(root, 'stryker.config.json'), 'utf8'));
    config.jest.config.testMatch = specs.map((s) => `<rootDir>/${s}`);
    config.ignoreStatic = true;
    // --every-test: each mutant runs every narrowed spec. Per-test coverage under Jest can
    // credit a file's lines to one test only (serve-pb.spec's codec: the last test).
    if (process.argv.includes('--every-test')) {
      config.coverageAnalysis = 'all';
      config.ignoreStatic = false; // Stryker takes it with per-test coverage only
    }
    narrowed = path.join(root, 'stryker.narrow.json');
    fs.writeFileSync(narrowed, JSON.stringify(config));
    args.splice(1, 0, narrowed);
  }
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: root, stdio: 'inherit' });
  if (narrowed) fs.rmSync(narrowed, { force: true });
  process.exit(r.status === null ? 1 : r.status);
}

function installed() {
  const r = spawnSync('cargo', ['mutants', '--version'], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.includes(VERSION);
}

if (!installed()) {
  console.log(`installing cargo-mutants ${VERSION} (a few minutes, once)`);
  const r = spawnSync('cargo', ['install', 'cargo-mutants', '--locked', '--version', VERSION], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(1);
}
const started = Date.now();
// --workspace: the root crate is the binding (excluded), so without it cargo mutants finds nothing to mutate.
const run = spawnSync('cargo', ['mutants', '--workspace', '--jobs', '2', '--timeout', '120', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
const outcomes = path.join(root, 'mutants.out', 'outcomes.json');
if (fs.existsSync(outcomes)) {
  const { outcomes: list } = JSON.parse(fs.readFileSync(outcomes, 'utf8'));
  const byFile = new Map();
  for (const o of list) {
    const file = o.scenario && o.scenario.Mutant ? o.scenario.Mutant.source_file || o.scenario.Mutant.file : null;
    if (!file) continue;
    const summary = o.summary;
    const row = byFile.get(file) || { caught: 0, missed: 0, timeout: 0, unviable: 0 };
    if (summary === 'CaughtMutant') row.caught += 1;
    else if (summary === 'MissedMutant') row.missed += 1;
    else if (summary === 'Timeout') row.timeout += 1;
    else if (summary === 'Unviable') row.unviable += 1;
    byFile.set(file, row);
  }
  console.log('\n| file | caught | missed | timeout | unviable | score |\n|---|---|---|---|---|---|');
  for (const [file, r] of [...byFile].sort()) {
    const viable = r.caught + r.missed + r.timeout;
    console.log(`| ${file} | ${r.caught} | ${r.missed} | ${r.timeout} | ${r.unviable} | ${viable ? (((r.caught + r.timeout) / viable) * 100).toFixed(0) : '—'}% |`);
  }
  console.log(`\n${((Date.now() - started) / 60000).toFixed(1)} minutes; survivors in mutants.out/missed.txt`);
}
// cargo mutants: 0 all caught, 2 survivors, 3 timeouts.
process.exitCode = run.status;
