'use strict';

// Hostile JavaScript values for every public method: each call must either succeed or throw
// a TypeError, RangeError or ZgcError (a code, a message that says what was wrong), never
// crash, hang or corrupt; afterwards the runtime still computes what the model says.
const { load, createPool, ZgcError } = require('../..');
const { fixture, rng, randomF32, randomInts } = require('../helpers');
const { expectDtypes } = require('../dtypes-model');

const NAMES = ['x', 'h', 'q', 'm', 'wt', 'wp', 'wn', 'hb', 'qb', 'mb', 's', 'k', 'g'];
const getterError = new Error('thrown by a getter');

/** Everything a careless or malicious caller might pass. */
function hostileValues(next) {
  const n = 1 + Math.floor(next() * 10);
  const detached = new Float32Array(6);
  structuredClone(detached.buffer, { transfer: [detached.buffer] });
  const resizable = new ArrayBuffer(24, { maxByteLength: 64 });
  const shrunk = new Float32Array(resizable);
  resizable.resize(8);
  class Liar extends Float32Array {
    get length() {
      return 1e9;
    }
  }
  const sparse = [1, 2, 3, 4, 5];
  delete sparse[2];
  const values = [
    undefined, null, true, false, 0, -0, 1, -1, 0.5, NaN, Infinity, -Infinity, 2 ** 53, 1e308, -129, 128, 256,
    '', 'x', '1,2,3', Symbol('s'), 10n, () => 1, {}, [], [[1]], sparse, new Array(6), new Array(1e6),
    Array.from({ length: n }, () => next() * 1e6 - 5e5), Array.from({ length: n }, () => (next() < 0.5 ? true : 'true')),
    Array.from({ length: 6 }, () => NaN), [1, 2, 3, 4, 5, '6'], [1n, 2n],
    new Float32Array(n), new Float32Array(6), new Float32Array(24), new Float32Array(5), new Float32Array(7),
    new Float64Array(6), new Int8Array(n), new Int8Array(5), new Uint8Array(5), new Uint8Array(3).fill(2), new Uint8Array(n),
    new Uint16Array(n), new Uint16Array(6), new Int16Array(6), new Int32Array(6), new Uint32Array(6), new BigInt64Array(6),
    new Uint8ClampedArray(5), new DataView(new ArrayBuffer(24)), new ArrayBuffer(24),
    detached, shrunk, new Liar(6),
    new Float32Array(new SharedArrayBuffer(24)), new Int8Array(new SharedArrayBuffer(8), 1, 5), new Uint8Array(new SharedArrayBuffer(8), 3, 5),
    new Int8Array(new ArrayBuffer(16), 1, 5), new Uint8Array(new ArrayBuffer(16), 3, 3), new Float32Array(new ArrayBuffer(40), 4, 6),
    new Uint16Array(new ArrayBuffer(20), 2, 6), new Float32Array(new ArrayBuffer(28), 4, 6).subarray(1),
    new Proxy(new Float32Array(6), {}), new Proxy({}, { ownKeys() { throw getterError; } }), new Proxy([1, 2], { get() { throw getterError; } }),
    { get x() { throw getterError; } }, { length: 6 }, Object.create(null), new Map([['x', 1]]), new Date(0), /re/,
  ];
  return values;
}

function randomInputs(next, pick) {
  const inputs = {};
  const count = Math.floor(next() * 3);
  for (let i = 0; i < count; i++) inputs[next() < 0.9 ? NAMES[Math.floor(next() * NAMES.length)] : pick()] = pick();
  return inputs;
}

function isTolerated(err) {
  if (err === getterError) return true; // the caller's own error, passed through untouched
  if (!(err instanceof TypeError || err instanceof RangeError || err instanceof ZgcError)) return false;
  if (typeof err.message !== 'string' || err.message.length < 12) return false;
  return !(err instanceof ZgcError) || /^ERR_ZGC_[A-Z_]+$/.test(err.code);
}

function goodValues(seed) {
  const next = rng(seed);
  const halfs = (k) => randomInts(next, k, -8192, 8192).map((v) => v / 1024);
  return {
    x: randomF32(next, 6), wt: randomF32(next, 6), wp: randomF32(next, 6), wn: randomF32(next, 6),
    h: halfs(4), hb: halfs(3), q: randomInts(next, 5, -128, 127), qb: randomInts(next, 4, -128, 127),
    m: randomInts(next, 5, 0, 1).map(Boolean), mb: randomInts(next, 3, 0, 1).map(Boolean), g: Math.fround(next() * 100),
  };
}

/** Sets every parameter and the state afresh, runs, and compares with the model. */
function expectCorrect(rt, seed) {
  const v = goodValues(seed);
  for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
  rt.set('s', 0);
  const outputs = rt.run({ x: v.x, h: v.h, q: v.q, m: v.m, g: v.g });
  const want = expectDtypes(v, 0).outputs;
  outputs.forEach((o, i) => expect(Array.from(o.data, Number)).toEqual(want[i]));
}

describe('hostile inputs to every public method', () => {
  test('5,000 random calls: each succeeds or throws a useful TypeError/RangeError/ZgcError, and results stay correct', async () => {
    const next = rng(2024);
    const rt = load(fixture('dtypes'));
    expectCorrect(rt, 1);
    const values = hostileValues(next);
    const pick = () => values[Math.floor(next() * values.length)];
    const name = () => (next() < 0.85 ? NAMES[Math.floor(next() * NAMES.length)] : pick());
    const calls = [
      () => rt.set(name(), pick()),
      () => rt.bind(name(), pick()),
      () => rt.run(randomInputs(next, pick)),
      () => rt.run(pick()),
      () => rt.run({ x: new Float32Array(6) }, { into: next() < 0.5 ? pick() : [pick(), pick(), pick(), pick(), pick(), pick()] }),
      () => rt.run(undefined, pick()),
      () => rt.output(pick()),
      () => rt.storage(name()),
      () => load(pick()),
      () => load(fixture('add'), pick()),
    ];
    const tally = { ok: 0, refused: 0 };
    const bad = [];
    for (let i = 0; i < 5000; i++) {
      const which = Math.floor(next() * calls.length);
      try {
        const result = calls[which]();
        if (result && typeof result.close === 'function') result.close();
        tally.ok++;
      } catch (err) {
        tally.refused++;
        if (!isTolerated(err) && bad.length < 5) bad.push({ call: calls[which].toString(), err: String(err), type: err && err.constructor && err.constructor.name });
      }
      if (i % 1000 === 999) expectCorrect(rt, i);
    }
    // runAsync and a pool get the same treatment, through their promises.
    const pool = createPool(fixture('add'), { size: 2 });
    for (let i = 0; i < 300; i++) {
      const op = i % 2 ? rt.runAsync(randomInputs(next, pick), next() < 0.2 ? pick() : undefined) : pool.run(randomInputs(next, pick), next() < 0.2 ? pick() : undefined);
      await op.then(
        () => tally.ok++,
        (err) => {
          tally.refused++;
          if (!isTolerated(err) && bad.length < 5) bad.push({ call: 'async', err: String(err), type: err && err.constructor && err.constructor.name });
        },
      );
    }
    expect(bad).toEqual([]);
    expect(tally.refused).toBeGreaterThan(tally.ok); // most hostile calls must be refused, not coerced
    expectCorrect(rt, 99);
    const [sum] = await pool.run({ a: [1, 2, 3, 4], b: [10, 20, 30, 40] });
    expect(Array.from(sum.data)).toEqual([11, 22, 33, 44]);
    await pool.close();
    rt.close();
  });

  test('errors about a source name it and say what was expected and what was given', () => {
    const rt = load(fixture('dtypes'));
    const cases = [
      [() => rt.set('x', new Float64Array(6)), /"x".*Float32Array.*Float64Array/],
      [() => rt.set('q', [1, 2, 3, 4, 500]), /"q".*500/],
      [() => rt.set('x', [1, 2, 3]), /"x".*6.*3/],
      [() => rt.bind('wt', new Float32Array(5)), /"wt".*6.*5/],
      [() => rt.set('m', [1, 0, 2, 0, 1]), /"m".*2/],
      [() => rt.set('nope', [1]), /"nope"/],
    ];
    for (const [act, message] of cases) {
      let thrown;
      try {
        act();
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ZgcError);
      expect(thrown.message).toMatch(message);
    }
    expectCorrect(rt, 5);
    rt.close();
  });

  test('SharedArrayBuffer-backed and odd-offset views are valid input: copied or bound like any other', () => {
    const rt = load(fixture('dtypes'));
    const v = goodValues(8);
    const shared = new Float32Array(new SharedArrayBuffer(4 + 24), 4, 6);
    shared.set(v.x);
    const q = new Int8Array(new ArrayBuffer(9), 3, 5);
    q.set(v.q);
    for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
    const outputs = rt.run({ x: shared, h: v.h, q, m: v.m, g: v.g });
    const want = expectDtypes(v, 0).outputs;
    outputs.forEach((o, i) => expect(Array.from(o.data, Number)).toEqual(want[i]));
    rt.close();
  });
});
