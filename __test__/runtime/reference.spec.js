'use strict';

// Differential tests: the same steps through this runtime and through the Python reference
// runtime (zgc-runtime 0.1.0 from PyPI, in .venv-ref made by scripts/prepare-reference.js)
// must give identical outputs, value for value.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { load } = require('../..');
const { PYTHON, fixture, rng, randomF32, randomInts } = require('../helpers');

const SCRIPT = path.join(testDir, 'reference', 'run_reference.py');

function reference(artifact, steps) {
  if (!fs.existsSync(PYTHON)) throw new Error('the Python reference is not installed: run `node scripts/prepare-reference.js`');
  const out = execFileSync(PYTHON, [SCRIPT], { input: JSON.stringify({ artifact, steps }), encoding: 'utf8', maxBuffer: 1 << 26 });
  return JSON.parse(out);
}

function ours(artifact, steps) {
  const rt = load(artifact);
  const results = [];
  for (const step of steps) {
    if (step.set) for (const [name, values] of Object.entries(step.set)) rt.set(name, values);
    else results.push(rt.run(step.run).map((t) => ({ dtype: t.dtype, shape: [...t.shape], values: Array.from(t.data, Number) })));
  }
  rt.close();
  return results;
}

function same(artifact, steps) {
  const mine = ours(artifact, steps);
  const theirs = reference(artifact, steps);
  expect(mine.length).toBe(steps.filter((s) => s.run).length);
  expect(mine).toEqual(theirs);
}

describe('identical outputs to the Python reference runtime', () => {
  test('add, 40 random runs', () => {
    const next = rng(100);
    const steps = Array.from({ length: 40 }, () => ({
      run: { a: Array.from(randomF32(next, 4, 1e6)), b: Array.from({ length: 4 }, () => (next() - 0.5) * 1e3) },
    }));
    same(fixture('add'), steps);
  });

  test('dtypes: every dtype and binding, bound layouts packed, state carried over 8 runs', () => {
    const next = rng(200);
    // f16 inputs as arbitrary doubles: both runtimes must round each straight to f16.
    const halfs = (n) => Array.from({ length: n }, () => (next() * 2 - 1) * 60000);
    const steps = [
      {
        set: {
          wt: Array.from(randomF32(next, 6)),
          wp: Array.from(randomF32(next, 6)),
          wn: Array.from(randomF32(next, 6)),
          hb: halfs(3).map((v) => v / 4),
          qb: randomInts(next, 4, -128, 127),
          mb: randomInts(next, 3, 0, 1).map(Boolean),
          g: [next() * 10],
          s: [next()],
        },
      },
    ];
    for (let i = 0; i < 8; i++) {
      steps.push({
        run: {
          x: Array.from(randomF32(next, 6, 100)),
          h: halfs(4).map((v) => v / 4),
          q: randomInts(next, 5, -128, 127),
          m: randomInts(next, 5, 0, 1).map(Boolean),
        },
      });
      if (i === 4) steps.push({ set: { wn: Array.from(randomF32(next, 6)), qb: randomInts(next, 4, -128, 127) } });
    }
    same(fixture('dtypes'), steps);
  });

  test('a transposed bound parameter set once and reused', () => {
    const next = rng(300);
    const steps = [{ set: { w: Array.from(randomF32(next, 4)) } }];
    for (let i = 0; i < 10; i++) steps.push({ run: { a: Array.from(randomF32(next, 4)) } });
    same(fixture('malformed-base'), steps);
  });

  test('status fixture with a bound buffer given logically', () => {
    const steps = [{ set: { run_status: [0], copy_status: [0], bind_status: [0] } }, { run: { buf: [1.25, -3] } }, { run: { buf: [1e30, 1e30] } }];
    same(fixture('status'), steps);
  });
});
