#!/usr/bin/env node
'use strict';

// npm run pack [-- DEST]: the two tarballs a release publishes, the napi-rs way.
// - zgc-runtime-linux-x64-gnu: npm/linux-x64-gnu/package.json, the addon and the host program
//   of isolated instances that `npm run build` made (what `napi artifacts` collects);
// - zgc-runtime: with `optionalDependencies` on the platform package at the same version,
//   which `napi pre-publish` adds at release time. The checkout's package.json has none,
//   because an unpublished optional dependency cannot be in its lockfile.
// Prints the two tarball paths as JSON.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const dest = path.resolve(process.argv[2] || root);
const manifestPath = path.join(root, 'package.json');
const original = fs.readFileSync(manifestPath, 'utf8');
const manifest = JSON.parse(original);
// napi's platform names for the Rust targets in package.json's napi.targets.
const PLATFORMS = { 'x86_64-unknown-linux-gnu': 'linux-x64-gnu' };
const platforms = manifest.napi.targets.map((t) => {
  if (!PLATFORMS[t]) throw new Error(`no platform package name for target ${t}`);
  return PLATFORMS[t];
});
const pack = (cwd) => {
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dest], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return path.join(dest, JSON.parse(out)[0].filename);
};

fs.mkdirSync(dest, { recursive: true });
const tarballs = { platforms: {} };
for (const platform of platforms) {
  const binary = path.join(root, `${manifest.napi.binaryName}.${platform}.node`);
  if (!fs.existsSync(binary)) throw new Error(`${binary} is missing: run npm run build first`);
  const stage = fs.mkdtempSync(path.join(dest, `.stage-${platform}-`));
  try {
    fs.copyFileSync(path.join(root, 'npm', platform, 'package.json'), path.join(stage, 'package.json'));
    fs.copyFileSync(binary, path.join(stage, path.basename(binary)));
    // The host program of isolated instances (isolate: 'process'), built by npm run build.
    const host = path.join(root, `zgc-runtime-host.${platform}`);
    if (!fs.existsSync(host)) throw new Error(`${host} is missing: run npm run build first`);
    fs.copyFileSync(host, path.join(stage, path.basename(host)));
    fs.chmodSync(path.join(stage, path.basename(host)), 0o755);
    tarballs.platforms[platform] = pack(stage);
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}
manifest.optionalDependencies = Object.fromEntries(platforms.map((p) => [`${manifest.name}-${p}`, manifest.version]));
try {
  fs.writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  tarballs.main = pack(root);
} finally {
  fs.writeFileSync(manifestPath, original);
}
console.log(JSON.stringify(tarballs));
