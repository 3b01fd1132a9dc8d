'use strict';

// Issue 16: every path reads the same inputs from an object: its own enumerable string keys,
// as Object.keys gives them. Inherited names (a prototype, or a polluted Object.prototype)
// and non-enumerable or symbol keys are not inputs.
const { spawnSync } = require('node:child_process');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { load, createPool } = require('../..');
const { fixture } = require('../helpers');

const BIN = path.join(testDir, '..', 'bin', 'zgc-runtime.js');
const data = (outputs) => Array.from(outputs[0].data);
const B = [1, 2, 3, 4];
// `a` stays at the ones set beforehand unless an input replaces it: a + b = b + 1.
const expected = B.map((v) => v + 1);

function inheriting() {
  const inputs = Object.create({ a: [100, 100, 100, 100] });
  inputs.b = B;
  return inputs;
}

function withHidden() {
  const inputs = { b: B };
  Object.defineProperty(inputs, 'a', { value: [100, 100, 100, 100], enumerable: false });
  inputs[Symbol('a')] = [100, 100, 100, 100];
  return inputs;
}

function addWithOnes() {
  const rt = load(fixture('add'));
  rt.set('a', [1, 1, 1, 1]);
  return rt;
}

/** Every way of running, each giving the first output's values. */
const paths = {
  run: async (rt, inputs) => data(rt.run(inputs)),
  'run with into': async (rt, inputs) => {
    const out = new Float32Array(4);
    rt.run(inputs, { into: [out] });
    return Array.from(out);
  },
  runAsync: async (rt, inputs) => data(await rt.runAsync(inputs)),
  'pool.run': async (_rt, inputs) => {
    const pool = createPool(fixture('add'), { size: 1, setup: (r) => r.set('a', [1, 1, 1, 1]) });
    try {
      return data(await pool.run(inputs));
    } finally {
      await pool.close();
    }
  },
};

describe('run inputs are own enumerable string keys on every path (issue 16)', () => {
  for (const [name, runWith] of Object.entries(paths)) {
    test(`${name}: inherited names are not inputs`, async () => {
      const rt = addWithOnes();
      expect(await runWith(rt, inheriting())).toEqual(expected);
      rt.close();
    });

    test(`${name}: non-enumerable and symbol keys are not inputs`, async () => {
      const rt = addWithOnes();
      expect(await runWith(rt, withHidden())).toEqual(expected);
      rt.close();
    });

    test(`${name}: a polluted Object.prototype feeds no run`, async () => {
      const rt = addWithOnes();
      // eslint-disable-next-line no-extend-native
      Object.prototype.a = [100, 100, 100, 100];
      try {
        expect(await runWith(rt, { b: B })).toEqual(expected);
      } finally {
        delete Object.prototype.a;
      }
      rt.close();
    });
  }

  test('own keys are still taken, in every path, with the values they give', async () => {
    for (const runWith of Object.values(paths)) {
      const rt = addWithOnes();
      const inputs = Object.create({ a: [100, 100, 100, 100] });
      inputs.a = [10, 20, 30, 40]; // an own key shadows the inherited one
      inputs.b = B;
      expect(await runWith(rt, inputs)).toEqual([11, 22, 33, 44]);
      rt.close();
    }
  });

  test('the CLI: a polluted Object.prototype in its process changes nothing', () => {
    // -r runs before the CLI: every object it makes inherits `a` and `polluted`.
    const preload = path.join(testDir, 'children', 'pollute-prototype.js');
    const r = spawnSync(process.execPath, ['-r', preload, BIN, 'run', fixture('add'), '--input', 'a=1,1,1,1', '--input', 'b=1,2,3,4', '--json'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)[0].data).toEqual(expected);
  });
});
