'use strict';

// Compiles the bundled MLP artifact (examples/mlp.c) and returns its path.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

function buildMlp() {
  const artifact = path.join(__dirname, 'build', 'mlp.so');
  fs.mkdirSync(path.dirname(artifact), { recursive: true });
  const fixtures = path.join(__dirname, '..', '__test__', 'fixtures');
  execFileSync(process.env.CC || 'cc', ['-shared', '-fPIC', '-O2', '-I', fixtures, '-o', artifact, path.join(__dirname, 'mlp.c'), '-lm']);
  return artifact;
}

/** The MLP's weights, in logical (row-major) order, as the demo and the service use them. */
const weights = {
  w1: Array.from({ length: 32 }, (_, k) => Math.fround(Math.sin(k + 1) * 0.8)),
  b1: Array.from({ length: 8 }, (_, k) => Math.fround((k - 4) * 0.05)),
  w2: Array.from({ length: 24 }, (_, k) => Math.fround(Math.cos(k * 1.7) * 0.6)),
};

module.exports = { buildMlp, weights };
