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
// The GitHub Actions auditor the release workflow's test runs (a static binary in a wheel).
const ZIZMOR = 'zizmor==1.33.1';

function installed() {
  try {
    execFileSync(PYTHON, ['-c', 'import zgc, tritonclient.http, kubernetes_validate, kubernetes.client, importlib.util as u; assert u.find_spec("kserve")'], { stdio: 'ignore' });
    return fs.existsSync(path.join(VENV, 'bin', 'zizmor'));
  } catch {
    return false;
  }
}

if (!installed()) {
  const python = process.env.PYTHON || 'python3';
  if (!fs.existsSync(PYTHON)) execFileSync(python, ['-m', 'venv', VENV], { stdio: 'inherit' });
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', PIN, CLIENT, ...VALIDATORS, ZIZMOR], { stdio: 'inherit' });
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', KSERVE], { stdio: 'inherit' });
}
console.log(`reference runtime ${PIN}, ${CLIENT}, ${[...VALIDATORS, KSERVE, ZIZMOR].join(', ')} in ${path.relative(process.cwd(), VENV)}`);

// The gRPC clients, in a venv of their own: grpcio and its protobuf pin apart from the kserve
// models the manifest checks read above.
const GRPC_VENV = path.join(__dirname, '..', '.venv-grpc');
const GRPC_PYTHON = path.join(GRPC_VENV, 'bin', 'python');
const GRPC_CLIENT = 'tritonclient[grpc]==2.73.0';
// The kserve SDK with its dependencies here (its InferenceGRPCClient), unlike .venv-ref's models-only copy.
const GRPC_KSERVE = 'kserve==0.21.0';
// grpc.health.v1's own client stubs, without their dependencies: 1.76 is the newest whose
// generated code the protobuf runtime that tritonclient pins (6.x) still loads.
const GRPC_HEALTH = 'grpcio-health-checking==1.76.0';
try {
  execFileSync(GRPC_PYTHON, ['-c', 'import tritonclient.grpc, numpy, kserve, grpc_health.v1.health_pb2'], { stdio: 'ignore' });
} catch {
  const python = process.env.PYTHON || 'python3';
  if (!fs.existsSync(GRPC_PYTHON)) execFileSync(python, ['-m', 'venv', GRPC_VENV], { stdio: 'inherit' });
  execFileSync(GRPC_PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', GRPC_CLIENT, GRPC_KSERVE], { stdio: 'inherit' });
  execFileSync(GRPC_PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', GRPC_HEALTH], { stdio: 'inherit' });
}
console.log(`${GRPC_CLIENT}, ${GRPC_KSERVE}, ${GRPC_HEALTH} in ${path.relative(process.cwd(), GRPC_VENV)}`);

// The real Triton (2.51, CPU-only: nvidia-pytriton's wheel holds the server, its python backend
// and tritonclient), for the side-by-side tests in __test__/triton. Its python backend's stub
// links the system Python's libpython, so the venv is made from /usr/bin/python3. The wheel is
// for x86-64 Linux (manylinux_2_35).
const TRITON_VENV = path.join(__dirname, '..', '.venv-triton');
const TRITON_PYTHON = path.join(TRITON_VENV, 'bin', 'python');
const TRITON = 'nvidia-pytriton==0.7.0';
if (process.platform === 'linux' && process.arch === 'x64') {
  try {
    execFileSync(TRITON_PYTHON, ['-c', 'import pytriton, tritonclient.http, tritonclient.grpc, grpc_health.v1.health_pb2'], { stdio: 'ignore' });
  } catch {
    if (!fs.existsSync(TRITON_PYTHON)) execFileSync('/usr/bin/python3', ['-m', 'venv', TRITON_VENV], { stdio: 'inherit' });
    execFileSync(TRITON_PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', TRITON], { stdio: 'inherit' });
    execFileSync(TRITON_PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', GRPC_HEALTH], { stdio: 'inherit' });
  }
  console.log(`${TRITON} (Triton 2.51), ${GRPC_HEALTH} in ${path.relative(process.cwd(), TRITON_VENV)}`);
}

// MLServer 1.7 (with the reference runtime it serves the artifacts through), for the client's
// tests and the serving benchmark: in the machine's cache, made once (it takes a minute).
const { venv } = require('../bench/python-servers');
console.log(`mlserver in ${venv('mlserver')}`);

module.exports = { PYTHON, GRPC_PYTHON };
