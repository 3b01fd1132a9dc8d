#!/usr/bin/env node
'use strict';

// npm run build [-- --debug] [-- --target TRIPLE]: the addon (the root crate, src/) with napi's CLI,
// as zgc-runtime.<platform>.node at the root with its raw interface in lib/native.d.ts, then, where
// isolation runs, the host program (crates/host) as zgc-runtime-host.<platform> beside it. The
// one place these builds are spelled: npm test, the benchmarks, the cross builds and the
// release workflow all come here.
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { buildHost } = require('../lib/build-from-source');
const { isolates, platformName, TARGET_PLATFORMS } = require('../lib/platform');

const root = path.join(__dirname, '..');

/**
 * Builds the addon, and the host program where isolation runs. `cross` is a toolchain of
 * scripts/toolchain.js (its target, compiler and linker), or null for this machine. Throws
 * when a build fails.
 */
function build({ profile = 'release', cross = null, target = cross && cross.target, log = console.error } = {}) {
  const napi = path.join(root, 'node_modules', '.bin', 'napi');
  const args = ['build', '--platform', '--manifest-path', 'Cargo.toml', '--package', 'zgc-runtime-node', '--output-dir', '.', '--no-js', '--dts', 'lib/native.d.ts'];
  if (profile === 'release') args.push('--release');
  if (target) args.push('--target', target);
  const env = { ...process.env, ...(cross === null ? {} : cross.env) };
  const r = spawnSync(napi, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env, shell: process.platform === 'win32' });
  if (r.status !== 0) throw new Error(`napi ${args.join(' ')} failed (exit ${r.status})`);
  const platform = cross !== null ? cross.platform : target ? TARGET_PLATFORMS[target] : platformName();
  // Isolation runs on Linux only: elsewhere there is no host program to build.
  if (isolates(platform) && buildHost({ profile, cross, log }) !== 0) throw new Error(`the host program did not build for ${platform}`);
}

module.exports = { build };

if (require.main === module) {
  const argv = process.argv.slice(2);
  const at = argv.indexOf('--target');
  try {
    build({ profile: argv.includes('--debug') ? 'debug' : 'release', target: at === -1 ? null : argv[at + 1] });
  } catch (err) {
    console.error(`build: ${err.message}`);
    process.exit(1);
  }
}
