#!/usr/bin/env node
'use strict';

// Makes .venv-ref with the Python reference runtime from PyPI, for the differential tests
// and the benchmarks. Does nothing when it is already there.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const VENV = path.join(__dirname, '..', '.venv-ref');
const PYTHON = path.join(VENV, 'bin', 'python');
const PIN = 'zgc-runtime==0.1.0';
// The client the server's tests talk through (http only: no gRPC stack).
const CLIENT = 'tritonclient[http]==2.73.0';

function installed() {
  try {
    execFileSync(PYTHON, ['-c', 'import zgc, tritonclient.http'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

if (!installed()) {
  const python = process.env.PYTHON || 'python3';
  if (!fs.existsSync(PYTHON)) execFileSync(python, ['-m', 'venv', VENV], { stdio: 'inherit' });
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', PIN, CLIENT], { stdio: 'inherit' });
}
console.log(`reference runtime ${PIN} and ${CLIENT} in ${path.relative(process.cwd(), VENV)}`);

module.exports = { PYTHON };
