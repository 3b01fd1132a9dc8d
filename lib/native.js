'use strict';

// The native addon, through napi-rs's generated loader (../native.js): a binary next to the
// package (built from source), else the per-platform package. When neither loads, say which
// platform package is missing and how to get it, instead of a bare "Cannot find module".
const path = require('node:path');
const { version } = require('../package.json');
const { platformName } = require('./platform');

const SUPPORTED = ['linux-x64-gnu'];

function loadError(cause) {
  const triple = platformName();
  const pkg = `zgc-runtime-${triple}`;
  const lines = [`zgc-runtime: cannot load the native addon for ${triple}.`];
  if (SUPPORTED.includes(triple)) {
    lines.push(
      `The prebuilt binary comes in the optional package ${pkg}@${version}, which is not installed`,
      '(npm skips optional dependencies with --omit=optional, or when the lockfile was made on another platform).',
      `Fix: npm install ${pkg}@${version}`,
    );
  } else {
    lines.push(`There is no prebuilt binary for ${triple} (prebuilt: ${SUPPORTED.join(', ')}).`);
  }
  lines.push(
    `Or build it from source (needs Rust's cargo and a C compiler): npx zgc-runtime build-from-source`,
    `Cause: ${cause && cause.message ? cause.message.split('\n')[0] : cause}`,
  );
  const err = new Error(lines.join('\n'));
  err.code = 'ERR_ZGC_NATIVE_MISSING';
  err.cause = cause;
  return err;
}

let binding;
try {
  binding = require(path.join(__dirname, '..', 'native.js'));
} catch (err) {
  throw loadError(err);
}

module.exports = binding;
