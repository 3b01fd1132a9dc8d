'use strict';

// The native addon: a binary next to the package (built from source), else the per-platform
// package. The platform comes from lib/platform.js, which tells musl from glibc by the running
// Node's own report rather than by the machine's files. When neither loads, say which platform
// package is missing and how to get it, instead of a bare "Cannot find module".
const fs = require('node:fs');
const path = require('node:path');
const { version, napi } = require('../package.json');
const { platformName, hostName, TARGET_PLATFORMS } = require('./platform');

/** The platforms with a prebuilt package: package.json's napi.targets, by napi's names. */
const PREBUILT = napi.targets.map((t) => TARGET_PLATFORMS[t]);

function loadError(cause) {
  const platform = platformName();
  const pkg = `zgc-runtime-${platform}`;
  const lines = [`zgc-runtime: cannot load the native addon for ${platform} (${process.platform} ${process.arch}, ${hostName()}).`];
  if (PREBUILT.includes(platform)) {
    lines.push(
      `The prebuilt binary comes in the optional package ${pkg}@${version}, which is not installed`,
      '(npm skips optional dependencies with --omit=optional, or when the lockfile was made on another platform).',
    );
  } else {
    lines.push(`There is no prebuilt binary for ${platform}.`);
  }
  lines.push(
    `Prebuilt packages: ${PREBUILT.map((p) => `zgc-runtime-${p}`).join(', ')}.`,
    'Fix: build it from the bundled sources (needs Rust\'s cargo and a C compiler): npx zgc-runtime build-from-source',
  );
  // Not "npm install <package>" while the packages are not on the registry: that would 404.
  if (PREBUILT.includes(platform)) lines.push(`Or install the platform package's tarball beside the package's: npm install zgc-runtime-${version}.tgz ${pkg}-${version}.tgz (\`npm run pack -- DIR --targets all\` in a checkout makes them).`);
  lines.push(`Cause: ${cause && cause.message ? cause.message.split('\n')[0] : cause}`);
  const err = new Error(lines.join('\n'));
  err.code = 'ERR_ZGC_NATIVE_MISSING';
  err.cause = cause;
  return err;
}

/** The addon of this platform: next to the package when built from source, else its package's. */
function loadAddon() {
  const platform = platformName();
  const file = `zgc-runtime.${platform}.node`;
  const local = path.join(__dirname, '..', file);
  if (fs.existsSync(local)) return require(local);
  return require(`zgc-runtime-${platform}/${file}`);
}

let binding;
try {
  binding = loadAddon();
} catch (err) {
  throw loadError(err);
}

module.exports = binding;
