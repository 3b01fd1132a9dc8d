#!/usr/bin/env node
'use strict';

// npm run pack [-- DEST] [--targets all|T1,T2]: the tarballs a release publishes, the napi-rs way.
// - zgc-runtime-<platform>, one per target: npm/<platform>/package.json (os, cpu, libc), the
//   addon and, on Linux, the host program of isolated instances;
// - zgc-runtime: with `optionalDependencies` on the platform packages at the same version,
//   which `napi pre-publish` adds at release time. The checkout's package.json has none,
//   because an unpublished optional dependency cannot be in its lockfile.
// Without --targets, this machine's platform only (built by `npm run build`). Other targets
// are cross-built first when their binaries are missing (scripts/cross-build.js), so that a
// fresh clone packs every platform. Prints the tarball paths as JSON.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { platformName, isolates, TARGET_PLATFORMS: PLATFORMS } = require('../lib/platform');

const root = path.join(__dirname, '..');
const manifestPath = path.join(root, 'package.json');

function parseArgs(argv) {
  const at = argv.indexOf('--targets');
  const dest = argv.find((a, i) => !a.startsWith('--') && argv[i - 1] !== '--targets');
  return { dest: path.resolve(dest || root), targets: at < 0 ? null : argv[at + 1] };
}

function pack({ dest, targets }) {
  const original = fs.readFileSync(manifestPath, 'utf8');
  const manifest = JSON.parse(original);
  const host = Object.keys(PLATFORMS).find((t) => PLATFORMS[t] === platformName());
  // `all`: every target this machine builds, itself and those with a cross toolchain here
  // (macOS's come from the release workflow's Mac runners).
  const buildable = (t) => t === host || Object.hasOwn(require('./toolchain').TARGETS, t);
  const chosen = targets === null ? [host] : targets === 'all' ? manifest.napi.targets.filter(buildable) : targets.split(',');
  for (const t of chosen) {
    if (!manifest.napi.targets.includes(t) || !PLATFORMS[t]) throw new Error(`--targets: ${t} is not a target of this package (targets: ${manifest.napi.targets.join(', ')})`);
  }
  const npmPack = (cwd) => {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dest], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    return path.join(dest, JSON.parse(out)[0].filename);
  };
  fs.mkdirSync(dest, { recursive: true });
  const tarballs = { platforms: {} };
  for (const target of chosen) {
    const platform = PLATFORMS[target];
    const binary = path.join(root, `${manifest.napi.binaryName}.${platform}.node`);
    // Isolation, and so its host program, is Linux's only.
    const hostProgram = isolates(platform) ? path.join(root, `zgc-runtime-host.${platform}`) : null;
    if (!fs.existsSync(binary) || (hostProgram !== null && !fs.existsSync(hostProgram))) {
      if (target === host) throw new Error(`${binary} or ${hostProgram} is missing: run npm run build first`);
      require('./cross-build').crossBuild(target);
    }
    const stage = fs.mkdtempSync(path.join(dest, `.stage-${platform}-`));
    try {
      fs.copyFileSync(path.join(root, 'npm', platform, 'package.json'), path.join(stage, 'package.json'));
      fs.copyFileSync(binary, path.join(stage, path.basename(binary)));
      if (hostProgram !== null) {
        fs.copyFileSync(hostProgram, path.join(stage, path.basename(hostProgram)));
        fs.chmodSync(path.join(stage, path.basename(hostProgram)), 0o755);
      }
      tarballs.platforms[platform] = npmPack(stage);
    } finally {
      fs.rmSync(stage, { recursive: true, force: true });
    }
  }
  manifest.optionalDependencies = Object.fromEntries(manifest.napi.targets.map((t) => [`${manifest.name}-${PLATFORMS[t]}`, manifest.version]));
  try {
    fs.writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
    tarballs.main = npmPack(root);
  } finally {
    fs.writeFileSync(manifestPath, original);
  }
  return tarballs;
}

module.exports = { pack, PLATFORMS };

if (require.main === module) console.log(JSON.stringify(pack(parseArgs(process.argv.slice(2)))));
