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
// Schema checkers for deploy/'s manifests; the kserve SDK without its server stack (only its models are read).
const VALIDATORS = ['kubernetes-validate==1.37.0', 'kubernetes==35.0.0'];
const KSERVE = 'kserve==0.21.0';

function installed() {
  try {
    execFileSync(PYTHON, ['-c', 'import zgc, tritonclient.http, kubernetes_validate, kubernetes.client, importlib.util as u; assert u.find_spec("kserve")'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

if (!installed()) {
  const python = process.env.PYTHON || 'python3';
  if (!fs.existsSync(PYTHON)) execFileSync(python, ['-m', 'venv', VENV], { stdio: 'inherit' });
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', PIN, CLIENT, ...VALIDATORS], { stdio: 'inherit' });
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', KSERVE], { stdio: 'inherit' });
}
console.log(`reference runtime ${PIN}, ${CLIENT}, ${[...VALIDATORS, KSERVE].join(', ')} in ${path.relative(process.cwd(), VENV)}`);

module.exports = { PYTHON };
