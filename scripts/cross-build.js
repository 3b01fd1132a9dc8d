#!/usr/bin/env node
'use strict';

// node scripts/cross-build.js TARGET...: builds, for each Rust target, what the platform
// package holds and what its tests need, with the toolchain of scripts/toolchain.js:
// zgc-runtime.<platform>.node, zgc-runtime-host.<platform> on Linux (next to the package, as
// `npm run build` puts this platform's), the fixtures in __test__/fixtures/build/<platform>
// and the README's example artifact in examples/build/<platform>/mlp.so (mlp.dll on Windows).
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { ensure } = require('./toolchain');
const { build } = require('./build');
const { buildMlp } = require('../examples/build');
const { extension } = require('../__test__/fixtures/manifest');

const root = path.join(__dirname, '..');

function crossBuild(target) {
  const cross = ensure(target);
  const env = { ...process.env, ...cross.env };
  const step = (cmd, args) => {
    const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env });
    if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${args.join(' ')} failed for ${target} (exit ${r.status})`);
  };
  console.error(`cross-build: ${target} (${cross.platform})`);
  build({ cross });
  step(process.execPath, [path.join(__dirname, 'build-fixtures.js'), '--target', target]);
  // The README's quick start artifact, for the platform's smoke test.
  buildMlp(path.join(root, 'examples', 'build', cross.platform, `mlp${extension(cross.platform)}`), cross);
  return cross;
}

module.exports = { crossBuild };

if (require.main === module) {
  const targets = process.argv.slice(2);
  if (targets.length === 0) {
    console.error(`usage: node scripts/cross-build.js TARGET... (known: ${Object.keys(require('./toolchain').TARGETS).join(', ')})`);
    process.exit(2);
  }
  for (const t of targets) crossBuild(t);
}
