'use strict';

// `npx zgc-runtime build-from-source`: builds the addon from the Rust sources the package
// ships (the workspace under crates/), for platforms without a prebuilt package (or installs that omitted it). An explicit
// command rather than an install script: npm runs no lifecycle script of ours, so installs
// print no install-script warning, and a build happens only when someone asks for one.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { platformName } = require('./platform');

const ROOT = path.join(__dirname, '..');

/** Whether the addon loads, tried in a child so that a failed load leaves this process clean. */
function addonLoads(root = ROOT) {
  const r = spawnSync(process.execPath, ['-e', "require('./lib/native')"], { cwd: root, encoding: 'utf8' });
  return r.status === 0;
}

/**
 * Builds `zgc-runtime.<platform>.node` next to the package's loader with cargo. Returns a
 * process exit code; `log` takes progress lines.
 */
function buildFromSource({ root = ROOT, log = console.log, force = false } = {}) {
  if (!force && addonLoads(root)) {
    log('zgc-runtime: the native addon already loads here; nothing to build (--force builds anyway).');
    return 0;
  }
  const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
  if (cargo.status !== 0) {
    log("zgc-runtime: building from source needs Rust's cargo (https://rustup.rs) and a C compiler; cargo was not found.");
    return 1;
  }
  log(`zgc-runtime: building the addon for ${platformName()} with ${cargo.stdout.trim()} (a minute or two)...`);
  const target = path.join(root, 'target');
  const hadTarget = fs.existsSync(target); // a development checkout keeps its own
  const built = spawnSync('cargo', ['build', '--release', '--package', 'zgc-runtime-node', '--locked'], { cwd: root, stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: target } });
  if (built.status !== 0) {
    log('zgc-runtime: cargo build failed (its output is above).');
    return 1;
  }
  const file = { darwin: 'libzgc_runtime_node.dylib', win32: 'zgc_runtime_node.dll' }[process.platform] || 'libzgc_runtime_node.so';
  fs.copyFileSync(path.join(target, 'release', file), path.join(root, `zgc-runtime.${platformName()}.node`));
  // Isolation runs on Linux only: elsewhere there is no host program.
  if (process.platform === 'linux' && buildHost({ root, log, targetDir: target }) !== 0) return 1;
  if (!hadTarget) fs.rmSync(target, { recursive: true, force: true });
  if (!addonLoads(root)) {
    log('zgc-runtime: the addon was built but does not load; require("zgc-runtime") says why.');
    return 1;
  }
  log('zgc-runtime: addon built from source.');
  return 0;
}

/**
 * Builds the host program of isolated instances and copies it to
 * `zgc-runtime-host.<platform>` next to the addon. Returns a process exit code.
 */
function buildHost({ root = ROOT, log = console.log, targetDir = path.join(root, 'target'), profile = 'release', cross = null } = {}) {
  const args = ['build', '--package', 'zgc-runtime-host', '--locked'];
  if (profile === 'release') args.splice(1, 0, '--release');
  // Another platform's (scripts/toolchain.js): its target, compiler and linker.
  if (cross !== null) args.push('--target', cross.target);
  const env = { ...process.env, ...(cross === null ? {} : cross.env), CARGO_TARGET_DIR: targetDir };
  const built = spawnSync('cargo', args, { cwd: root, stdio: 'inherit', env });
  if (built.status !== 0) {
    log('zgc-runtime: cargo build of the host program failed (its output is above).');
    return 1;
  }
  const out = path.join(root, `zgc-runtime-host.${cross === null ? platformName() : cross.platform}`);
  // Copied beside it, then renamed over it: a host program running now (ETXTBSY for a write
  // in place) keeps its own file.
  const part = `${out}.${process.pid}.part`;
  fs.copyFileSync(path.join(targetDir, ...(cross === null ? [] : [cross.target]), profile, 'zgc-runtime-host'), part);
  fs.chmodSync(part, 0o755);
  fs.renameSync(part, out);
  return 0;
}

module.exports = { buildFromSource, buildHost, addonLoads };
