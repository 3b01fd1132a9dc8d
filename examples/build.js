'use strict';

// Builds the bundled examples from C: examples/build/mlp.so (a 4->8->3 MLP) and add.so, and
// a model repository for `zgc-runtime serve` in examples/build/models. `npm run demo` runs
// this; so do the doc tests, which run the docs against these files.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { formatNpy } = require('../lib/npy');

const build = path.join(__dirname, 'build');
const fixtures = path.join(__dirname, '..', '__test__', 'fixtures');

/** `cross`: another platform's compiler (scripts/toolchain.js), for its tests. */
function compile(source, artifact, cross = null, libs = ['-lm'], defines = []) {
  fs.mkdirSync(path.dirname(artifact), { recursive: true });
  const cc = cross === null ? process.env.CC || 'cc' : cross.cc;
  execFileSync(cc, ['-shared', '-fPIC', '-O2', ...(cross === null ? [] : cross.cflags), ...defines.map((d) => `-D${d}`), '-I', fixtures, '-o', artifact, source, ...libs], { env: cross === null ? process.env : { ...process.env, ...cross.env } });
  return artifact;
}

/** Compiles the MLP artifact (examples/mlp.c) to `artifact`, for `batch` rows a run; returns its path. */
function buildMlp(artifact = path.join(build, 'mlp.so'), cross = null, batch = 1) {
  return compile(path.join(__dirname, 'mlp.c'), artifact, cross, ['-lm'], [`BATCH=${batch}`]);
}

/** The MLP's weights, in logical (row-major) order, as the demo and the service use them. */
const weights = {
  w1: Array.from({ length: 32 }, (_, k) => Math.fround(Math.sin(k + 1) * 0.8)),
  b1: Array.from({ length: 8 }, (_, k) => Math.fround((k - 4) * 0.05)),
  w2: Array.from({ length: 24 }, (_, k) => Math.fround(Math.cos(k * 1.7) * 0.6)),
};

/** w2's physical storage: [8, 3] in rows padded to 4 (mlp.c's layout), 32 elements. */
function w2Storage() {
  const storage = new Float32Array(32);
  for (let j = 0; j < 8; j++) for (let k = 0; k < 3; k++) storage[j * 4 + k] = weights.w2[j * 3 + k];
  return storage;
}

/**
 * mlp.so (and mlp-b4.so, mlp-b8.so: the same MLP for 4 and 8 rows a run, the batcher's
 * variants), add.so, accum.so (a running sum in a STATE source), pto-host.so (a PTO host library that runs on the CPU, for docs/pto.md), and
 * the repository examples/build/models: add/1/model.so, and mlp with
 * examples/models/mlp/config.json and the .npy files it names.
 */
function buildExamples() {
  const mlp = buildMlp();
  const mlpB4 = buildMlp(path.join(build, 'mlp-b4.so'), null, 4);
  const mlpB8 = buildMlp(path.join(build, 'mlp-b8.so'), null, 8);
  const add = compile(path.join(fixtures, 'add.c'), path.join(build, 'add.so'));
  // A running sum in a BOUND STATE source, for the sequences of docs/services.md.
  const accum = compile(path.join(fixtures, 'accum.c'), path.join(build, 'accum.so'));
  const ptoHost = compile(path.join(fixtures, 'pto_host.c'), path.join(build, 'pto-host.so'), null, ['-lpthread']);
  const models = path.join(build, 'models');
  fs.rmSync(models, { recursive: true, force: true });
  fs.mkdirSync(path.join(models, 'add', '1'), { recursive: true });
  fs.mkdirSync(path.join(models, 'mlp', '1'), { recursive: true });
  fs.copyFileSync(add, path.join(models, 'add', '1', 'model.so'));
  fs.copyFileSync(mlp, path.join(models, 'mlp', '1', 'model.so'));
  fs.copyFileSync(path.join(__dirname, 'models', 'mlp', 'config.json'), path.join(models, 'mlp', 'config.json'));
  const npy = (name, shape, data) => fs.writeFileSync(path.join(models, 'mlp', name), formatNpy('f32', shape, Float32Array.from(data)));
  npy('w1.npy', [4, 8], weights.w1);
  npy('b1.npy', [8], weights.b1);
  npy('w2_storage.npy', [32], w2Storage());
  return { mlp, mlpB4, mlpB8, add, accum, ptoHost, models };
}

module.exports = { buildMlp, buildExamples, weights, w2Storage };

if (require.main === module) {
  const built = buildExamples();
  for (const file of Object.values(built)) console.log(path.relative(process.cwd(), file));
}
