#!/usr/bin/env node
'use strict';

// npm's install hook for users of the package: nothing to do when a prebuilt addon loads
// (the platform package, or a binary built before); otherwise build it from the bundled Rust
// sources when cargo is there, and otherwise leave the explanation for require() to give.
// In a development checkout the tests and `npm run build` build the addon instead.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { platformName } = require('../lib/platform');

const root = path.join(__dirname, '..');
if (fs.existsSync(path.join(root, '.git')) || fs.existsSync(path.join(root, '__test__'))) process.exit(0);

function loads() {
  const r = spawnSync(process.execPath, ['-e', "require('./lib/native')"], { cwd: root, encoding: 'utf8' });
  return r.status === 0;
}

if (loads()) process.exit(0);
if (process.env.ZGC_RUNTIME_SKIP_BUILD) process.exit(0);
const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
if (cargo.status !== 0) {
  console.warn('zgc-runtime: no prebuilt addon for this platform and no cargo to build one; require() will say how to fix it.');
  process.exit(0);
}
console.log('zgc-runtime: no prebuilt addon loads here; building it from source with cargo (a few minutes)...');
const build = spawnSync('cargo', ['build', '--release', '--features', 'node', '--locked'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) {
  console.warn('zgc-runtime: the source build failed; require() will say how to fix it.');
  process.exit(0);
}
const built = path.join(root, 'target', 'release', process.platform === 'darwin' ? 'libzgc_runtime.dylib' : 'libzgc_runtime.so');
fs.copyFileSync(built, path.join(root, `zgc-runtime.${platformName()}.node`));
fs.rmSync(path.join(root, 'target'), { recursive: true, force: true });
console.log(loads() ? 'zgc-runtime: addon built from source.' : 'zgc-runtime: the built addon does not load; require() will say why.');
