#!/usr/bin/env node
'use strict';

// npm run test:platforms [-- --targets all|T1,T2 | --here] [SPEC...]: the package on the platforms this
// machine emulates. For each target: cross-builds it (scripts/cross-build.js), packs the tarballs, installs them into a fresh project with npm
// (--force: npm refuses a package of another cpu), copies the test suite into the installed
// package, and runs the platform's specs there with that platform's own Node under its
// emulator, so that what is tested is what a user of that platform installs. Prints a table
// and ends with "N passed, N failed".
//   ZGC_PLATFORMS_DIR=dir   where the projects go (default target/platforms)
const { spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { ensure } = require('./toolchain');
const { runBounded } = require('./bounded');

/** An emulated platform's Jest run takes 3 to 12 minutes here; past this it is stuck. */
const JEST_MINUTES = 25;
const { pack, PLATFORMS } = require('./pack');
const { crossBuild } = require('./cross-build');
const { extension } = require('../__test__/fixtures/manifest');
const { isolates } = require('../lib/platform');

const root = path.join(__dirname, '..');
const work = process.env.ZGC_PLATFORMS_DIR || path.join(root, 'target', 'platforms');

/** What runs on every emulated platform: the core's conformance, dtypes, errors, async, pools, lifetimes and isolation, the batcher and sequences, and serve's smoke. */
const SPECS = [
  'runtime/load.spec.js',
  'runtime/run.spec.js',
  'runtime/values.spec.js',
  'runtime/status.spec.js',
  'runtime/async.spec.js',
  'pool/pool.spec.js',
  'runtime/lifetime.spec.js',
  'isolate/isolate.spec.js',
  'isolate/engine.spec.js',
  'isolate/processes.spec.js',
  'platform/smoke.spec.js',
  'batch/batcher.spec.js',
  'pool/sequence.spec.js',
];
/** Isolation runs on Linux only; elsewhere platform-smoke checks that it is refused. */
const LINUX_ONLY = new Set(['isolate/isolate.spec.js', 'isolate/engine.spec.js', 'isolate/processes.spec.js']);
const specsFor = (platform, specs) => specs.filter((s) => isolates(platform) || !LINUX_ONLY.has(s));

/**
 * A launcher for `cross`'s Node: a shell wrapper that runs it under the emulator, and a preload
 * that points process.execPath at the wrapper, so that the tests' child processes (workers run
 * in-process) are emulated too. The host program of isolated instances gets a wrapper of its own.
 */
function launcher(cross, dir, hostProgram) {
  fs.mkdirSync(dir, { recursive: true });
  const q = (s) => `'${s.replaceAll("'", "'\\''")}'`;
  const node = path.join(dir, 'node');
  fs.writeFileSync(node, `#!/bin/sh\nexec ${[...cross.run, cross.node].map(q).join(' ')} "$@"\n`, { mode: 0o755 });
  const host = path.join(dir, 'zgc-runtime-host');
  fs.writeFileSync(host, `#!/bin/sh\nexec ${[...cross.run, hostProgram].map(q).join(' ')} "$@"\n`, { mode: 0o755 });
  const preload = path.join(dir, 'preload.js');
  fs.writeFileSync(preload, `// There is no binfmt_misc here: children must be started through the emulator.\nprocess.execPath = ${JSON.stringify(node)};\n`);
  return { node, host, preload };
}

/**
 * Jest's module resolver (unrs-resolver) is a napi-rs addon too, and its loader tells musl from
 * glibc by the machine's /usr/bin/ldd: under an emulated platform it would pick this machine's
 * binding. The platform's own, of the checkout's version, fetched beside its Node and given
 * through napi-rs's override variable.
 */
function resolverBinding(cross) {
  const { version } = require('unrs-resolver/package.json');
  // Its Windows build is Microsoft's compiler's.
  const pkg = `@unrs/resolver-binding-${cross.platform.replace(/^win32-x64-gnu$/, 'win32-x64-msvc')}`;
  const dir = path.join(require('./toolchain').cache, 'nodes', cross.platform, 'jest-resolver');
  const find = () => {
    const at = path.join(dir, 'node_modules', ...pkg.split('/'));
    const node = fs.existsSync(at) ? fs.readdirSync(at).find((f) => f.endsWith('.node')) : undefined;
    return node && path.join(at, node);
  };
  const found = find();
  if (found) return found;
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"zgc-platform-jest-resolver","private":true}\n');
  execFileSync('npm', ['install', '--force', '--no-audit', '--no-fund', '--loglevel=error', `${pkg}@${version}`], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  const installed = find();
  if (!installed) throw new Error(`npm did not install ${pkg}@${version}`);
  return installed;
}

function testTarget(target, specs, tarballs) {
  const cross = ensure(target);
  const platform = cross.platform;
  const dir = path.join(work, platform);
  fs.rmSync(dir, { recursive: true, force: true });
  const app = path.join(dir, 'app');
  fs.mkdirSync(app, { recursive: true });
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: `zgc-platform-${platform}`, private: true }));
  execFileSync('npm', ['install', '--force', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarballs.main, tarballs.platforms[platform]], { cwd: app, stdio: ['ignore', 'ignore', 'inherit'] });
  const pkg = path.join(app, 'node_modules', 'zgc-runtime');
  const platformPkg = path.join(app, 'node_modules', `zgc-runtime-${platform}`);
  if (!fs.existsSync(platformPkg)) throw new Error(`npm did not install zgc-runtime-${platform}`);
  // The suite and this platform's fixtures, inside the installed package: `require('..')` in a spec is the package as installed.
  const builds = path.join(root, '__test__', 'fixtures', 'build');
  const otherPlatform = (src) => {
    const first = path.relative(builds, src).split(path.sep)[0];
    return first !== '' && first !== '..' && first !== platform;
  };
  fs.cpSync(path.join(root, '__test__'), path.join(pkg, '__test__'), { recursive: true, filter: (src) => !otherPlatform(src) });
  fs.mkdirSync(path.join(pkg, 'examples', 'build'), { recursive: true });
  // The README's name for it, whatever the platform's own extension.
  fs.copyFileSync(path.join(root, 'examples', 'build', platform, `mlp${extension(platform)}`), path.join(pkg, 'examples', 'build', 'mlp.so'));
  const report = path.join(dir, 'jest.json');
  const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
  const started = Date.now();
  // The package's own Jest settings, but for node_modules, where the installed package lives: not ignored.
  const config = { ...require('../package.json').jest, testPathIgnorePatterns: [], haste: { retainAllFiles: true }, testTimeout: 180000 };
  const args = [jest, '--forceExit', '--runInBand', '--silent', '--json', `--outputFile=${report}`, '--config', JSON.stringify(config), '--rootDir', pkg, ...specsFor(platform, specs).map((s) => `__test__/${s}`)];
  const env = {
    ...process.env,
    // The suite's own devDependencies (Jest's helpers, grpc-js for serve) come from this checkout.
    NODE_PATH: path.join(root, 'node_modules'),
    NAPI_RS_NATIVE_LIBRARY_PATH: resolverBinding(cross),
    ZGC_TEST_PLATFORM: platform,
  };
  let ran;
  if (platform.startsWith('win32-')) {
    // Wine starts Windows children itself, and maps / to Z:, so Linux paths resolve as they
    // are. Its Node cannot write to a pipe (EBADF): its output goes to a file.
    const log = path.join(dir, 'wine.log');
    const out = fs.openSync(log, 'w');
    ran = runBounded(cross.run[0], [...cross.run.slice(1), cross.node, ...args], { cwd: pkg, stdio: ['ignore', out, out], env: { ...env, ...cross.env } }, JEST_MINUTES, `Jest on ${platform}`);
    fs.closeSync(out);
  } else {
    const run = launcher(cross, path.join(dir, 'bin'), path.join(platformPkg, `zgc-runtime-host.${platform}`));
    ran = runBounded(run.node, args, { cwd: pkg, stdio: ['ignore', 'ignore', 'inherit'], env: { ...env, NODE_OPTIONS: `--require ${run.preload}`, ZGC_RUNTIME_HOST: run.host } }, JEST_MINUTES, `Jest on ${platform}`);
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  try {
    const r = JSON.parse(fs.readFileSync(report, 'utf8'));
    const failures = r.testResults.flatMap((f) => f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${path.basename(f.name)}: ${a.fullName}`));
    const broken = r.testResults.filter((f) => f.status === 'failed' && f.assertionResults.length === 0).map((f) => `${path.basename(f.name)}: ${f.message.split('\n').find((l) => l.trim()) || 'did not run'}`);
    return { platform, passed: r.numPassedTests, failed: r.numFailedTests + r.numRuntimeErrorTestSuites, skipped: r.numPendingTests, seconds, failures: [...failures, ...broken] };
  } catch (err) {
    const why = ran.timedOut ? `Jest did not finish within ${JEST_MINUTES} min (killed)` : `no Jest report: ${err.message}`;
    return { platform, passed: 0, failed: 1, skipped: 0, seconds, failures: [why] };
  }
}

/**
 * `--here`: the same specs on this machine's own platform, in the checkout (what the release
 * workflow runs on its macOS runners after `npm run build` and `npm run demo`).
 */
function here(specs) {
  const { platformName } = require('../lib/platform');
  const chosen = specsFor(platformName(), specs.length ? specs : SPECS);
  const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
  const r = spawnSync(process.execPath, [jest, ...chosen.map((s) => `__test__/${s}`)], { cwd: root, stdio: 'inherit' });
  return r.status === 0 ? 0 : 1;
}

function main(argv) {
  const at = argv.indexOf('--targets');
  const manifest = require('../package.json');
  const foreign = manifest.napi.targets.filter((t) => PLATFORMS[t] !== require('../lib/platform').platformName() && Object.hasOwn(require('./toolchain').TARGETS, t));
  const targets = at < 0 || argv[at + 1] === 'all' ? foreign : argv[at + 1].split(',');
  const specs = argv.filter((a, i) => !a.startsWith('--') && argv[i - 1] !== '--targets');
  const dest = path.join(work, 'tarballs');
  fs.rmSync(dest, { recursive: true, force: true });
  // Always built (cargo and the fixtures are quick when nothing changed): stale binaries would test old code.
  for (const t of targets) crossBuild(t);
  const tarballs = pack({ dest, targets: targets.join(',') });
  const rows = targets.map((t) => testTarget(t, specs.length ? specs : SPECS, tarballs));
  for (const r of rows) {
    console.log(`${r.platform.padEnd(18)} ${String(r.passed).padStart(5)} passed ${String(r.failed).padStart(3)} failed ${String(r.skipped).padStart(3)} skipped  ${r.seconds} s`);
    for (const f of r.failures) console.log(`    ${f}`);
  }
  return { passed: rows.reduce((n, r) => n + r.passed, 0), failed: rows.reduce((n, r) => n + r.failed, 0) };
}

/** The emulated platform `npm test` runs too (the others only in npm run test:platforms, for CI's time). */
const IN_NPM_TEST = 'aarch64-unknown-linux-gnu';

module.exports = { SPECS, main, IN_NPM_TEST };

if (require.main === module && process.argv.includes('--here')) {
  process.exit(here(process.argv.slice(2).filter((a) => a !== '--here')));
} else if (require.main === module) {
  const { passed, failed } = main(process.argv.slice(2));
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}
