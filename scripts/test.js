#!/usr/bin/env node
'use strict';

// The whole test suite, from a fresh checkout after `npm ci`: Rust unit tests, the release
// addon, the C fixtures, the Python reference venv, Jest, then the other hosts (Node 22, 24,
// 26 with Jest, Bun and Deno with the smoke suite), then linux-arm64-gnu under emulation. Ends with one plain line, "N passed, N
// failed", summed from the JSON reports, so that a run of no test cannot pass.
const { runBounded, jestBounded } = require('./bounded');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const report = path.join(root, 'target', 'jest-results.json');

/** Runs one step, ended after `minutes` (scripts/bounded.js): a hung step fails, named. */
function step(cmd, args, minutes, opts = {}) {
  console.log(`\n$ ${cmd} ${args.join(' ')}`);
  const r = runBounded(cmd, args, { cwd: root, stdio: 'inherit', ...opts }, minutes);
  if (r.status !== 0 && !opts.allowFail) {
    console.error(`\`${cmd} ${args.join(' ')}\` failed (exit ${r.status}${r.signal ? `, ${r.signal}` : ''})`);
    process.exit(1);
  }
  return r.status;
}

const npx = path.join(root, 'node_modules', '.bin');
// The PTO fixture logs each step as the real library does, and the tests fail its validation
// on purpose: a "[pto] validation FAILED" in a passing run would alarm its reader. (A test that
// shows the log, as the docs' example does, sets it back to empty.) Jest gives each test file
// a copy of process.env, which the fixture's getenv does not see: set here, for every child.
process.env.PTO_FIXTURE_QUIET = '1';
// The core's and the host program's tests (the workspace's default members: not the binding,
// whose test binary could not link Node's napi_* symbols).
step('cargo', ['test', '--quiet'], 20);
step(process.execPath, ['scripts/build.js'], 20);
step(process.execPath, ['scripts/build-fixtures.js'], 5);
step(process.execPath, ['scripts/prepare-reference.js'], 15);
fs.rmSync(report, { force: true });
const jestStatus = step(path.join(npx, 'jest'), jestBounded(['--runInBand', '--json', `--outputFile=${report}`, ...process.argv.slice(2)]), 25, { allowFail: true });

let results;
try {
  results = JSON.parse(fs.readFileSync(report, 'utf8'));
} catch (err) {
  console.error(`no Jest report at ${report}: ${err.message}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}
const { numPassedTests: passed, numPendingTests: skipped, numTotalTests: total } = results;
// A file that failed outside its tests (an afterAll, such as __test__/leftovers.js) counts too.
const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
console.log(`Jest on Node ${process.version}: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
let ok = jestStatus === 0 && failed === 0 && total > 0 && results.success;
let sum = { passed, failed };
// Every other current host (scripts/hosts.js); ZGC_TEST_HOSTS=0 skips them for a quick local run.
if (process.env.ZGC_TEST_HOSTS !== '0') {
  console.log('\n$ node scripts/hosts.js');
  const hosts = require('./hosts').main(process.argv.slice(2));
  console.log(`other hosts: ${hosts.passed} passed, ${hosts.failed} failed`);
  ok = ok && hosts.failed === 0 && hosts.passed > 0;
  sum = { passed: sum.passed + hosts.passed, failed: sum.failed + hosts.failed };
}
// One emulated platform (scripts/platforms.js): its tarballs installed and tested under its own
// Node; ZGC_TEST_PLATFORMS=0 skips it. `npm run test:platforms` runs every one.
if (process.env.ZGC_TEST_PLATFORMS !== '0') {
  const platforms = require('./platforms');
  console.log(`\n$ node scripts/platforms.js --targets ${platforms.IN_NPM_TEST}`);
  const r = platforms.main(['--targets', platforms.IN_NPM_TEST]);
  console.log(`emulated platforms: ${r.passed} passed, ${r.failed} failed`);
  ok = ok && r.failed === 0 && r.passed > 0;
  sum = { passed: sum.passed + r.passed, failed: sum.failed + r.failed };
}
console.log(`${sum.passed} passed, ${sum.failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
if (!ok) process.exit(1);
