'use strict';

// Issue 13: Float16Array where the host has one (Node 24+, Bun, Deno; Node 22 behind
// --js-float16array), taken for f16 everywhere values are taken, as f16 storage for bind()
// and into, and given back with { f16: 'float16' }; refused by its own name everywhere else.
// Elsewhere (Node 20, Node 22 without the flag) 'float16' is refused with the host's name.
const { load, createPool } = require('../..');
const { fixture, f16Bits, f16Round, toPhysical } = require('../helpers');
const { expectDtypes, randomDtypeValues } = require('../dtypes-model');

const HAS_F16 = typeof Float16Array === 'function';
const withF16 = HAS_F16 ? describe : describe.skip;
const tag = (array) => Object.prototype.toString.call(array).slice(8, -1);
const plain = (tensor) => Array.from(tensor.data, Number);

function source(rt, name) {
  return rt.sources.find((s) => s.name === name);
}

/** dtypes with every BOUND source bound; f16 ones (`hb`) from `hb` if given. */
function dtypesRuntime(v, options, hb) {
  const rt = load(fixture('dtypes'), options);
  rt.bind('wt', toPhysical(source(rt, 'wt'), v.wt, Float32Array));
  rt.bind('wp', toPhysical(source(rt, 'wp'), v.wp, Float32Array));
  rt.bind('wn', toPhysical(source(rt, 'wn'), v.wn, Float32Array));
  rt.bind('hb', hb || toPhysical(source(rt, 'hb'), v.hb.map(f16Bits), Uint16Array));
  rt.bind('qb', toPhysical(source(rt, 'qb'), v.qb, Int8Array));
  rt.bind('mb', toPhysical(source(rt, 'mb'), v.mb.map(Number), Uint8Array));
  rt.set('g', v.g);
  return rt;
}

withF16('Float16Array in: values, inputs and zero-copy bound storage', () => {
  const v = randomDtypeValues(31);
  const want = expectDtypes(v, 0).outputs;

  test('set, run, runAsync and pool.run take a Float16Array for an f16 source', async () => {
    const h = Float16Array.from(v.h);
    const others = { x: v.x, q: v.q, m: v.m };
    const viaSet = dtypesRuntime(v);
    viaSet.set('h', h);
    expect(plain(viaSet.run(others)[1])).toEqual(want[1]);
    expect(plain(dtypesRuntime(v).run({ ...others, h })[1])).toEqual(want[1]);
    expect(plain((await dtypesRuntime(v).runAsync({ ...others, h }))[1])).toEqual(want[1]);
    const pool = createPool(fixture('half'), { size: 1 });
    const x = Float16Array.from({ length: 1 << 20 }, (_, k) => (k % 2048) - 1024);
    const [y] = await pool.run({ x });
    expect(Array.from(y.data.subarray(0, 4096))).toEqual(Array.from(x.subarray(0, 4096)));
    await pool.close();
  });

  test('an input given as a Float16Array is taken at call time, like any other', async () => {
    const rt = load(fixture('half'));
    const x = new Float16Array(1 << 20).fill(1.5);
    const pending = rt.runAsync({ x });
    x.fill(-2);
    expect((await pending)[0].data[77]).toBe(1.5);
    rt.close();
  });

  test('bind() of a Float16Array is zero-copy: writes to it change the next run', () => {
    const rt0 = load(fixture('dtypes'));
    const hb = toPhysical(source(rt0, 'hb'), v.hb.map(f16Round), Float16Array);
    rt0.close();
    const rt = dtypesRuntime(v, undefined, hb);
    const inputs = { x: v.x, h: v.h, q: v.q, m: v.m };
    expect(plain(rt.run(inputs)[1])).toEqual(want[1]);
    hb.fill(0); // every physical element, so the logical ones are 0 too
    expect(plain(rt.run(inputs)[1])).toEqual(expectDtypes({ ...v, hb: [0, 0, 0] }, 0).outputs[1]);
    rt.close();
  });

  test('into takes a Float16Array for an f16 output, and gives back the same Tensor objects', () => {
    const rt = dtypesRuntime(v);
    const into = rt.outputs.map((o) => (o.dtype === 'f16' ? new Float16Array(o.elementCount) : new (o.dtype === 'i8' ? Int8Array : o.dtype === 'bool' ? Uint8Array : Float32Array)(o.elementCount)));
    const inputs = { x: v.x, h: v.h, q: v.q, m: v.m };
    const first = rt.run(inputs, { into });
    expect(first[1].data).toBe(into[1]);
    expect(Array.from(into[1])).toEqual(want[1]);
    into[1].fill(0);
    expect(rt.run(inputs, { into })).toBe(first);
    expect(Array.from(into[1])).toEqual(want[1]);
    rt.close();
  });
});

withF16("{ f16: 'float16' }: f16 outputs and storage as Float16Array", () => {
  const v = randomDtypeValues(32);
  const want = expectDtypes(v, 0).outputs;
  const inputs = { x: v.x, h: v.h, q: v.q, m: v.m };

  test('run, runAsync, output() and pool.run give f16 outputs as Float16Array of the exact values', async () => {
    const rt = dtypesRuntime(v, { f16: 'float16' });
    const outputs = rt.run(inputs);
    expect(tag(outputs[1].data)).toBe('Float16Array');
    expect(tag(outputs[0].data)).toBe('Float32Array'); // other dtypes as always
    expect(plain(outputs[1])).toEqual(want[1]);
    expect(tag(rt.output(1).data)).toBe('Float16Array');
    expect(plain(rt.output(1))).toEqual(want[1]);
    const later = await rt.runAsync(inputs);
    expect(tag(later[1].data)).toBe('Float16Array');
    expect(plain(later[1])).toEqual(expectDtypes(v, want[4][0]).outputs[1]);
    rt.close();
    const pool = createPool(fixture('half'), { size: 1, f16: 'float16' });
    const [y] = await pool.run({ x: Float32Array.from({ length: 1 << 20 }, (_, k) => k / 8) });
    expect(tag(y.data)).toBe('Float16Array');
    expect(y.data[1000]).toBe(f16Round(125));
    expect(y.data[9999]).toBe(f16Round(9999 / 8));
    await pool.close();
  });

  test('storage() of an f16 source is a Float16Array over the runtime-owned memory', () => {
    const rt = dtypesRuntime(v, { f16: 'float16' });
    const hb = rt.storage('hb');
    expect(tag(hb)).toBe('Float16Array');
    expect(hb.length).toBe(source(rt, 'hb').elementCount);
    hb.set(toPhysical(source(rt, 'hb'), v.hb.map(f16Round), Float16Array));
    expect(plain(rt.run(inputs)[1])).toEqual(want[1]);
    rt.close();
  });
});

withF16('a Float16Array is refused by its name wherever f16 is not the dtype', () => {
  const refused = (code) => expect.objectContaining({ code: 'ERR_ZGC_DTYPE', message: expect.stringMatching(code) });

  test('set, bind, run inputs, into and runAsync staging: ERR_ZGC_DTYPE "got Float16Array", never read', async () => {
    const v = randomDtypeValues(33);
    const rt = dtypesRuntime(v);
    const f16 = (n) => new Float16Array(n).fill(1);
    expect(() => rt.set('x', f16(6))).toThrow(refused(/source "x" \(f32\) expects a Float32Array, got Float16Array/));
    expect(() => rt.set('q', f16(5))).toThrow(refused(/source "q" \(i8\) expects an Int8Array, got Float16Array/));
    expect(() => rt.set('m', f16(5))).toThrow(refused(/source "m" \(bool\) expects a Uint8Array of 0 and 1, got Float16Array/));
    expect(() => rt.bind('qb', f16(4))).toThrow(refused(/source "qb" \(i8\) expects an Int8Array of physical storage, got Float16Array/));
    expect(() => rt.bind('wt', f16(6))).toThrow(refused(/source "wt" \(f32\) expects a Float32Array of physical storage, got Float16Array/));
    expect(() => rt.bind('mb', f16(3))).toThrow(refused(/source "mb" \(bool\) expects a Uint8Array of physical storage, got Float16Array/));
    expect(() => rt.run({ q: f16(5) })).toThrow(refused(/source "q" \(i8\) expects an Int8Array, got Float16Array/));
    expect(() => rt.run({ qb: f16(4) })).toThrow(refused(/source "qb" \(i8\) expects an Int8Array, got Float16Array/));
    const into = rt.outputs.map((o) => new Float16Array(o.elementCount));
    expect(() => rt.run({ x: v.x, h: v.h, q: v.q, m: v.m }, { into })).toThrow(refused(/output 0" \(f32\) expects a Float32Array, got Float16Array/));
    await expect(rt.runAsync({ q: f16(5) })).rejects.toEqual(refused(/source "q" \(i8\) expects an Int8Array, got Float16Array/));
    // Nothing was taken: the runtime still computes from what it had.
    expect(plain(rt.run({ x: v.x, h: v.h, q: v.q, m: v.m })[2])).toEqual(expectDtypes(v, 0).outputs[2]);
    rt.close();
  });
});

describe('hosts without Float16Array (where the host has one, it is hidden for these tests) (issue 13)', () => {
  const saved = globalThis.Float16Array;
  beforeAll(() => {
    delete globalThis.Float16Array;
  });
  afterAll(() => {
    if (saved !== undefined) globalThis.Float16Array = saved;
  });

  test("{ f16: 'float16' } is refused, naming the host and what has it", () => {
    expect(() => load(fixture('half'), { f16: 'float16' })).toThrow(TypeError);
    expect(() => load(fixture('half'), { f16: 'float16' })).toThrow(new RegExp(`needs a global Float16Array, and Node ${process.version.replace(/\./g, '\\.')} has none`));
    expect(() => createPool(fixture('half'), { f16: 'float16' })).toThrow(/Node 24 and later, Bun and Deno have it/);
  });
});

describe('messages that name every array an f16 output takes (issue 13)', () => {
  test('a wrong into array for an f16 output lists Float32Array, Uint16Array and Float16Array', () => {
    const rt = load(fixture('half'));
    expect(() => rt.run({ x: new Float32Array(1 << 20) }, { into: [new Int8Array(1 << 20)] })).toThrow(
      expect.objectContaining({ code: 'ERR_ZGC_DTYPE', message: 'source "output 0" (f16) expects a Float32Array (values), a Uint16Array (f16 bits) or a Float16Array, got Int8Array' }),
    );
    rt.close();
  });
});
