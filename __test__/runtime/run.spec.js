'use strict';

const { load, ZgcError } = require('../..');
const { fixture, rng, f16Bits, f16Value, f16Round, toPhysical, randomF32, randomInts } = require('../helpers');
const { expectDtypes, randomDtypeValues } = require('../dtypes-model');

function source(rt, name) {
  return rt.sources.find((s) => s.name === name);
}

function plain(tensor) {
  return Array.from(tensor.data, Number);
}

describe('add: the smallest graph', () => {
  test('computes a + b for random inputs given as Float32Array and as plain arrays', () => {
    const rt = load(fixture('add'));
    const next = rng(1);
    for (let i = 0; i < 50; i++) {
      const a = randomF32(next, 4, 1000);
      const b = Array.from(randomF32(next, 4, 1000));
      const [out] = rt.run({ a, b });
      expect(out.dtype).toBe('f32');
      expect(out.shape).toEqual([4]);
      expect(out.data).toBeInstanceOf(Float32Array);
      expect(plain(out)).toEqual(Array.from(a, (v, k) => Math.fround(v + b[k])));
    }
    rt.close();
  });

  test('owned inputs are copied: reusing the caller buffer after set() changes nothing', () => {
    const rt = load(fixture('add'));
    const a = new Float32Array([1, 2, 3, 4]);
    rt.set('a', a);
    rt.set('b', [0, 0, 0, 0]);
    a.fill(100);
    expect(plain(rt.run()[0])).toEqual([1, 2, 3, 4]);
    expect(plain(rt.output(0))).toEqual([1, 2, 3, 4]);
    rt.close();
  });
});

describe('dtypes: every dtype, kind, binding and bound layout', () => {
  function bindAll(rt, v) {
    // Zero-copy physical storage for every BOUND source, built by the index formula.
    rt.bind('wt', toPhysical(source(rt, 'wt'), v.wt, Float32Array));
    rt.bind('wp', toPhysical(source(rt, 'wp'), v.wp, Float32Array));
    rt.bind('wn', toPhysical(source(rt, 'wn'), v.wn, Float32Array));
    rt.bind('hb', toPhysical(source(rt, 'hb'), v.hb.map(f16Bits), Uint16Array));
    rt.bind('qb', toPhysical(source(rt, 'qb'), v.qb, Int8Array));
    rt.bind('mb', toPhysical(source(rt, 'mb'), v.mb.map(Number), Uint8Array));
  }

  function check(outputs, want) {
    expect(outputs.map((o) => o.dtype)).toEqual(['f32', 'f16', 'i8', 'bool', 'f32', 'f32']);
    expect(outputs.map((o) => o.shape)).toEqual([[2, 3], [4], [5], [5], [], []]);
    expect(outputs[1].data).toBeInstanceOf(Float32Array);
    expect(outputs[2].data).toBeInstanceOf(Int8Array);
    expect(outputs[3].data).toBeInstanceOf(Uint8Array);
    outputs.forEach((o, i) => expect(plain(o)).toEqual(want[i]));
  }

  test('bound storage given zero-copy in transposed, padded, reversed and strided layouts', () => {
    const rt = load(fixture('dtypes'));
    let state = 0;
    for (let seed = 10; seed < 20; seed++) {
      const v = randomDtypeValues(seed);
      bindAll(rt, v);
      rt.set('g', v.g);
      const outputs = rt.run({ x: v.x, h: v.h, q: v.q, m: v.m });
      const want = expectDtypes(v, state);
      check(outputs, want.outputs);
      state = want.state;
    }
    rt.close();
  });

  test('the same values given logically (packed by the runtime) give the same outputs', () => {
    const rt = load(fixture('dtypes'));
    const v = randomDtypeValues(7);
    for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
    const outputs = rt.run({ x: v.x, h: v.h, q: v.q, m: v.m, g: v.g });
    check(outputs, expectDtypes(v, 0).outputs);
    rt.close();
  });

  test('bound storage is read in place: writing to the bound array changes the next run', () => {
    const rt = load(fixture('dtypes'));
    const v = randomDtypeValues(3);
    bindAll(rt, v);
    const wt = toPhysical(source(rt, 'wt'), v.wt, Float32Array);
    rt.bind('wt', wt);
    const inputs = { x: v.x, h: v.h, q: v.q, m: v.m, g: v.g };
    const first = rt.run(inputs);
    check(first, expectDtypes(v, 0).outputs);
    wt.fill(0);
    const second = rt.run(inputs);
    const zeroed = { ...v, wt: new Array(6).fill(0) };
    expect(plain(second[0])).toEqual(expectDtypes(zeroed, 0).outputs[0]);
    rt.close();
  });

  test('STATE persists across runs and starts over in a new instance', () => {
    const v = randomDtypeValues(5);
    const a = load(fixture('dtypes'));
    const b = load(fixture('dtypes'));
    for (const rt of [a, b]) for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
    const inputs = { x: v.x, h: v.h, q: v.q, m: v.m, g: v.g };
    let state = 0;
    for (let i = 0; i < 3; i++) {
      state = expectDtypes(v, state).state;
      expect(a.run(inputs)[4].data[0]).toBe(state);
    }
    // b shares the library with a, not its state.
    expect(b.run(inputs)[4].data[0]).toBe(expectDtypes(v, 0).state);
    a.close();
    const c = load(fixture('dtypes'));
    for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) c.set(name, v[name]);
    expect(c.run(inputs)[4].data[0]).toBe(expectDtypes(v, 0).state);
    b.close();
    c.close();
  });

  test('the state source can be set to a chosen starting value', () => {
    const rt = load(fixture('dtypes'));
    const v = randomDtypeValues(6);
    for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
    rt.set('s', 1000);
    const out = rt.run({ x: v.x, h: v.h, q: v.q, m: v.m, g: v.g });
    expect(out[4].data[0]).toBe(expectDtypes(v, 1000).state);
    rt.close();
  });

  test('run() inputs bind a BOUND source zero-copy when the array is its physical storage', () => {
    const rt = load(fixture('dtypes'));
    const v = randomDtypeValues(8);
    for (const name of ['wt', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
    // wp is padded: 9 physical elements against 6 logical, so a 9-element array is storage.
    const wp = toPhysical(source(rt, 'wp'), v.wp, Float32Array);
    const inputs = { x: v.x, h: v.h, q: v.q, m: v.m, g: v.g, wp };
    check(rt.run(inputs), expectDtypes(v, 0).outputs);
    wp.fill(0);
    const zeroed = { ...v, wp: new Array(6).fill(0) };
    const { wp: _dropped, ...rest } = inputs;
    expect(plain(rt.run(rest)[0])).toEqual(expectDtypes(zeroed, expectDtypes(v, 0).state).outputs[0]);
    rt.close();
  });

  test('f16 outputs as raw bits with { f16: "bits" }, and f16 inputs as bits', () => {
    const rt = load(fixture('dtypes'), { f16: 'bits' });
    const v = randomDtypeValues(9);
    for (const name of ['wt', 'wp', 'wn', 'qb', 'mb']) rt.set(name, v[name]);
    rt.set('hb', Uint16Array.from(v.hb, f16Bits));
    const out = rt.run({ x: v.x, h: Uint16Array.from(v.h, f16Bits), q: v.q, m: v.m, g: v.g });
    expect(out[1].data).toBeInstanceOf(Uint16Array);
    expect(Array.from(out[1].data)).toEqual(expectDtypes(v, 0).outputs[1].map(f16Bits));
    rt.close();
  });

  test('f32 values are rounded to f16 to nearest even, including ties, subnormals and overflow', () => {
    const rt = load(fixture('dtypes'), { f16: 'bits' });
    const v = randomDtypeValues(11);
    for (const name of ['wt', 'wp', 'wn', 'qb', 'mb']) rt.set(name, v[name]);
    rt.set('hb', [-0, -0, -0]); // o1 = f16(h) exactly: x + -0 is x, even for x = -0
    const cases = [
      [1 + 2 ** -11, 1 + 3 * 2 ** -11, 65504, 65520],
      [2 ** -25, 3 * 2 ** -25, -(2 ** -24), 6.1e-5],
      [Infinity, -Infinity, -0, 0.1],
    ];
    const next = rng(12);
    for (let i = 0; i < 30; i++) cases.push(Array.from(randomF32(next, 4, 70000)));
    for (const h of cases) {
      const f32 = Float32Array.from(h);
      const out = rt.run({ x: v.x, h: f32, q: v.q, m: v.m, g: v.g });
      expect(Array.from(out[1].data)).toEqual(Array.from(f32, f16Bits));
      // Plain numbers are rounded once, from the double.
      const plainOut = rt.run({ x: v.x, h, q: v.q, m: v.m, g: v.g });
      expect(Array.from(plainOut[1].data)).toEqual(h.map(f16Bits));
    }
    rt.close();
  });

  test('f16 outputs decode to the exact f16 values', () => {
    const rt = load(fixture('dtypes'));
    const v = randomDtypeValues(13);
    for (const name of ['wt', 'wp', 'wn', 'qb', 'mb']) rt.set(name, v[name]);
    rt.set('hb', [-0, -0, -0]);
    const bits = Uint16Array.from([0x0001, 0x03ff, 0x7bff, 0xfc00]);
    const out = rt.run({ x: v.x, h: bits, q: v.q, m: v.m, g: v.g });
    expect(Array.from(out[1].data)).toEqual(Array.from(bits, f16Value));
    expect(f16Round(65519)).toBe(65504); // the model's own sanity
    rt.close();
  });
});

describe('input errors name the problem and leave the runtime usable', () => {
  let rt;
  beforeEach(() => {
    rt = load(fixture('dtypes'));
  });
  afterEach(() => rt.close());

  const cases = [
    ['unknown source', (r) => r.set('nope', [1]), 'ERR_ZGC_UNKNOWN_SOURCE', /no source named "nope" \(its sources: "x", "h"/],
    ['embedded source', (r) => r.set('k', [1, 2, 3]), 'ERR_ZGC_EMBEDDED', /source "k" is embedded/],
    ['embedded bind', (r) => r.bind('k', new Float32Array(3)), 'ERR_ZGC_EMBEDDED', /source "k" is embedded/],
    ['bind an owned source', (r) => r.bind('x', new Float32Array(6)), 'ERR_ZGC_NOT_BOUND', /source "x" is owned, not bound/],
    ['wrong TypedArray', (r) => r.set('x', new Float64Array(6)), 'ERR_ZGC_DTYPE', /source "x" \(f32\) expects a Float32Array, got Float64Array/],
    ['wrong TypedArray for i8', (r) => r.set('q', new Uint8Array(5)), 'ERR_ZGC_DTYPE', /source "q" \(i8\) expects an Int8Array, got Uint8Array/],
    ['f16 bind needs bits', (r) => r.bind('hb', new Float32Array(6)), 'ERR_ZGC_DTYPE', /source "hb" \(f16\) expects a Uint16Array of physical storage, got Float32Array/],
    ['not an array', (r) => r.set('x', 'abc'), 'ERR_ZGC_DTYPE', /source "x" \(f32\) expects a TypedArray, an array of numbers or a number, got string/],
    ['too short', (r) => r.set('x', new Float32Array(5)), 'ERR_ZGC_SIZE', /source "x" expects 6 elements \(shape \[2, 3\]\), got 5 elements/],
    ['too long', (r) => r.run({ q: [1, 2, 3, 4, 5, 6] }), 'ERR_ZGC_SIZE', /source "q" expects 5 elements/],
    ['bound storage size', (r) => r.bind('wp', new Float32Array(6)), 'ERR_ZGC_SIZE', /source "wp" expects 9 elements of physical storage \(elementCount\), got 6/],
    ['number for a tensor', (r) => r.set('x', 1), 'ERR_ZGC_SIZE', /source "x" expects 6 elements .* got a single number/],
    ['bool out of range', (r) => r.set('m', new Uint8Array([0, 1, 2, 0, 1])), 'ERR_ZGC_VALUE', /source "m": bool element 2 is 2/],
    ['bool bind out of range', (r) => r.bind('mb', new Uint8Array([0, 5, 1])), 'ERR_ZGC_VALUE', /source "mb": bool element 1 is 5/],
    ['bool from a string', (r) => r.set('m', [true, false, 'yes', 0, 1]), 'ERR_ZGC_VALUE', /element 2 is string; bool values are true, false, 0 or 1/],
    ['i8 out of range', (r) => r.set('q', [1, 2, 128, 4, 5]), 'ERR_ZGC_VALUE', /source "q": element 2 is 128; i8 values are integers in -128\.\.127/],
    ['i8 not an integer', (r) => r.set('q', [1, 2.5, 3, 4, 5]), 'ERR_ZGC_VALUE', /element 1 is 2\.5/],
    ['f32 from a string', (r) => r.set('x', [1, 2, 3, '4', 5, 6]), 'ERR_ZGC_VALUE', /source "x": element 3 is string, expected a number/],
    ['sparse array', (r) => r.set('x', [1, , 3, 4, 5, 6]), 'ERR_ZGC_VALUE', /element 1 is undefined/], // eslint-disable-line no-sparse-arrays
    ['bind null', (r) => r.bind('wt', null), 'ERR_ZGC_DTYPE', /^source "wt" \(f32\) binds a TypedArray of its physical storage, got null$/],
    ['bind a number', (r) => r.bind('wt', 5), 'ERR_ZGC_DTYPE', /^source "wt" \(f32\) binds a TypedArray of its physical storage, got number$/],
    ['bind a DataView', (r) => r.bind('wt', new DataView(new ArrayBuffer(24))), 'ERR_ZGC_DTYPE', /binds a TypedArray of its physical storage, got object$/],
    ['missing binding', (r) => r.run(), 'ERR_ZGC_MISSING_BINDING', /MISSING_BINDING \(status 8\) for unbound source\(s\) "wt", "wp", "wn", "hb", "qb", "mb"/],
  ];

  test.each(cases)('%s', (_label, act, code, message) => {
    let thrown;
    try {
      act(rt);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ZgcError);
    expect(thrown.code).toBe(code);
    expect(thrown.message).toMatch(message);
    // Still usable: a full, correct run right after the error.
    const v = randomDtypeValues(21);
    for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
    const out = rt.run({ x: v.x, h: v.h, q: v.q, m: v.m, g: v.g });
    expect(plain(out[0])).toEqual(expectDtypes(v, 0).outputs[0]);
  });

  test('errors about one source say which in err.source', () => {
    expect(() => rt.set('x', new Int8Array(6))).toThrow(expect.objectContaining({ source: 'x', code: 'ERR_ZGC_DTYPE' }));
    expect(() => rt.set('nope', 1)).toThrow(expect.objectContaining({ source: 'nope', code: 'ERR_ZGC_UNKNOWN_SOURCE' }));
    expect(() => rt.bind('wt', null)).toThrow(expect.objectContaining({ source: 'wt', code: 'ERR_ZGC_DTYPE' }));
  });
});

describe('lifecycle', () => {
  test('close() is idempotent and every later call throws ERR_ZGC_CLOSED', () => {
    const rt = load(fixture('add'));
    expect(rt.closed).toBe(false);
    rt.close();
    rt.close();
    expect(rt.closed).toBe(true);
    for (const call of [() => rt.run(), () => rt.set('a', [1, 2, 3, 4]), () => rt.bind('a', new Float32Array(4)), () => rt.output(0)]) {
      expect(call).toThrow(expect.objectContaining({ code: 'ERR_ZGC_CLOSED' }));
    }
    expect(rt.sources.length).toBe(2); // metadata stays readable
  });

  test('a closed runtime says so before it looks at the names it is given', () => {
    const rt = load(fixture('add'));
    rt.close();
    const closed = expect.objectContaining({ code: 'ERR_ZGC_CLOSED', message: 'runtime is closed' });
    for (const call of [() => rt.set('nope', 1), () => rt.bind('nope', new Float32Array(4)), () => rt.storage('nope'), () => rt.run({ nope: 1 }), () => rt.output(7)]) {
      expect(call).toThrow(closed);
    }
  });

  test('Symbol.dispose closes', () => {
    const rt = load(fixture('add'));
    rt[Symbol.dispose]();
    expect(rt.closed).toBe(true);
  });

  test('output(index) checks its index', () => {
    const rt = load(fixture('add'));
    rt.run({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] });
    expect(plain(rt.output(0))).toEqual([2, 3, 4, 5]);
    for (const bad of [1, -1, 0.5, '0', undefined]) expect(() => rt.output(bad)).toThrow(RangeError);
    rt.close();
  });

  test('run() rejects inputs that are not an object', () => {
    const rt = load(fixture('add'));
    expect(() => rt.run(5)).toThrow(TypeError);
    expect(() => rt.run('ab')).toThrow(new TypeError('run() inputs must be an object of source names to values, got string'));
    rt.close();
  });

  test('null or undefined inputs and options mean none: the sources keep what they were given', () => {
    const rt = load(fixture('add'));
    rt.set('a', [1, 2, 3, 4]);
    rt.set('b', [10, 10, 10, 10]);
    for (const outputs of [rt.run(), rt.run(null), rt.run(undefined, null), rt.run({}, {}), rt.run(null, { into: undefined })]) {
      expect(plain(outputs[0])).toEqual([11, 12, 13, 14]);
    }
    rt.close();
  });

  test('every output comes back whole, also one past the small-output size that is not the first', () => {
    // slow-wide: y (4 floats) and stats (32 floats, 128 bytes): stats = [runs, max inside, max in library, 0...].
    const rt = load(fixture('slow-wide'));
    rt.set('sleep_ms', 0);
    for (let run = 1; run <= 3; run++) {
      const [y, stats] = rt.run({ x: [run, 2, 3, 4] });
      expect(plain(y)).toEqual([2 * run, 4, 6, 8]);
      expect(stats.shape).toEqual([32]);
      expect(plain(stats)).toEqual([run, 1, 1, ...new Array(29).fill(0)]);
      expect(plain(rt.output(1))).toEqual(plain(stats));
    }
    rt.close();
  });
});

describe('run(inputs, { into }): outputs in caller arrays', () => {
  function intoArrays() {
    // One array per dtypes output: f32[2,3], f16[4] (decoded), i8[5], bool[5], f32[], f32[].
    return [new Float32Array(6), new Float32Array(4), new Int8Array(5), new Uint8Array(5), new Float32Array(1), new Float32Array(1)];
  }

  test('fills the given arrays with what run() returns, and reuses the same Tensor objects', () => {
    const rt = load(fixture('dtypes'));
    const v = randomDtypeValues(3);
    for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb']) rt.set(name, v[name]);
    const into = intoArrays();
    let state = 0;
    let first;
    for (let i = 0; i < 3; i++) {
      const outputs = rt.run({ x: v.x, h: v.h, q: v.q, m: v.m, g: v.g }, { into });
      const want = expectDtypes(v, state);
      state = want.state;
      outputs.forEach((o, k) => {
        expect(o.data).toBe(into[k]);
        expect(plain(o)).toEqual(want.outputs[k]);
      });
      if (first === undefined) first = outputs;
      else expect(outputs).toBe(first);
    }
    rt.close();
  });

  test('an into array whose items were swapped gets Tensors of its new items', () => {
    const rt = load(fixture('add'));
    const inputs = { a: [1, 2, 3, 4], b: [1, 1, 1, 1] };
    const into = [new Float32Array(4)];
    const first = rt.run(inputs, { into });
    expect(rt.run(inputs, { into })).toBe(first);
    into[0] = new Float32Array(4);
    const second = rt.run({ a: [5, 5, 5, 5] }, { into });
    expect(second).not.toBe(first);
    expect(second[0].data).toBe(into[0]);
    expect(plain(second[0])).toEqual([6, 6, 6, 6]);
    expect(plain(first[0])).toEqual([2, 3, 4, 5]); // the old array kept what it was given
    rt.close();
  });

  test('wrong kinds, lengths and counts of arrays are refused before anything runs', () => {
    const rt = load(fixture('add'));
    const inputs = { a: [1, 2, 3, 4], b: [1, 1, 1, 1] };
    expect(() => rt.run(inputs, { into: [new Float64Array(4)] })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_DTYPE', message: expect.stringMatching(/output 0.*Float32Array/) }));
    expect(() => rt.run(inputs, { into: [new Float32Array(3)] })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_SIZE', message: expect.stringMatching(/output 0/) }));
    expect(() => rt.run(inputs, { into: [] })).toThrow(TypeError);
    expect(() => rt.run(inputs, { into: new Float32Array(4) })).toThrow(TypeError);
    expect(() => rt.run(inputs, 5)).toThrow(new TypeError('run() options must be an object, got number'));
    expect(() => rt.run(inputs, { into: [] })).toThrow(new TypeError('run() option into must be an array of 1 TypedArrays, one per output'));
    const out = new Float32Array(4);
    expect(plain(rt.run(inputs, { into: [out] })[0])).toEqual([2, 3, 4, 5]);
    expect(Array.from(out)).toEqual([2, 3, 4, 5]);
    rt.close();
  });
});
