'use strict';

// The Open Inference Protocol's request rules and response shapes in process (lib/serve's
// json-header, signature, parameters, infer-request and infer-response), one rule at a time
// (the HTTP spec covers them end to end).

const { load } = require('../..');
const { signatureOf } = require('../../lib/serve/signature');
const { formatInfer } = require('../../lib/serve/infer-response');
const request = require('../../lib/serve/infer-request');
const { readHeader, TAKE_BYTES } = require('../../lib/serve/json-header');
const { RequestError } = require('../../lib/serve/reasons');
const { fixture } = require('../fixtures/manifest');
const { f16Bits, rng } = require('../helpers');

let dtypes;
let add;
beforeAll(() => {
  const d = load(fixture('dtypes'));
  dtypes = signatureOf(d, ['o0', 'o1', 'o2', 'o3', 'o4', 'o5']);
  d.close();
  const a = load(fixture('add'));
  add = signatureOf(a);
  a.close();
});

/*
 * Every request here is read twice: as given, and with 16 KB of whitespace after its JSON
 * header, which is long enough for the number arrays of its data to be read natively
 * (TAKE_BYTES). Both must give the same inputs, or the same refusal.
 */
const PAD = Buffer.alloc(TAKE_BYTES, 0x20);
const outcome = (f) => {
  try {
    return { value: f() };
  } catch (error) {
    return { error };
  }
};
function parseInfer(sig, body, headerLength) {
  const plain = outcome(() => request.parseInfer(sig, body, headerLength));
  const padded = Buffer.concat([body.subarray(0, headerLength), PAD, body.subarray(headerLength)]);
  const long = outcome(() => request.parseInfer(sig, padded, headerLength + PAD.length));
  if (plain.error) {
    expect(long.error).toBeInstanceOf(plain.error.constructor);
    // Text that is not JSON is refused as not JSON both ways; V8's message quotes the text
    // around the fault, which the padding changes.
    const notJson = 'the request header is not JSON: ';
    const message = plain.error.message.startsWith(notJson) && long.error.message.startsWith(notJson) ? plain.error.message : long.error.message;
    expect([long.error.status, message]).toEqual([plain.error.status, plain.error.message]);
    throw plain.error;
  }
  expect(long.error).toBeUndefined();
  expect(long.value).toEqual(plain.value);
  return plain.value;
}

const json = (obj) => Buffer.from(JSON.stringify(obj));
const parse = (sig, obj) => {
  const body = json(obj);
  return parseInfer(sig, body, body.length);
};
const refused = (sig, obj) => {
  try {
    parse(sig, obj);
  } catch (err) {
    expect(err).toBeInstanceOf(RequestError);
    return [err.status, err.message];
  }
  throw new Error('accepted');
};
const t = (name, datatype, shape, data) => ({ name, datatype, shape, data });
const ok4 = [t('a', 'FP32', [4], [1, 2, 3, 4]), t('b', 'FP32', [4], [5, 6, 7, 8])];

test('the signature: INPUT sources only, protocol datatypes, default and configured output names', () => {
  expect(dtypes.inputs.map((i) => [i.name, i.datatype, i.shape, i.count])).toEqual([
    ['x', 'FP32', [2, 3], 6],
    ['h', 'FP16', [4], 4],
    ['q', 'INT8', [5], 5],
    ['m', 'BOOL', [5], 5],
  ]);
  expect(dtypes.outputs.map((o) => [o.name, o.datatype, o.index])).toEqual([
    ['o0', 'FP32', 0],
    ['o1', 'FP16', 1],
    ['o2', 'INT8', 2],
    ['o3', 'BOOL', 3],
    ['o4', 'FP32', 4],
    ['o5', 'FP32', 5],
  ]);
  expect(add.outputs.map((o) => o.name)).toEqual(['output_0']);
  expect(add.inputList).toBe('a, b');
});

test('JSON values become the TypedArray of each datatype; FP16 as doubles, BOOL from true/false or 0/1', () => {
  const r = parse(dtypes, { inputs: [t('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]), t('h', 'FP16', [4], [0.1, 2, 3, 4]), t('q', 'INT8', [5], [-128, 127, 0, 1, -1]), t('m', 'BOOL', [5], [true, false, 1, 0, true])] });
  expect(r.inputs.x).toBeInstanceOf(Float32Array);
  expect(r.inputs.h).toBeInstanceOf(Float64Array);
  expect(r.inputs.h[0]).toBe(0.1);
  expect(Array.from(r.inputs.q)).toEqual([-128, 127, 0, 1, -1]);
  expect(Array.from(r.inputs.m)).toEqual([1, 0, 1, 0, 1]);
  expect(r.id).toBeUndefined();
  expect(r.outputs.map((o) => [o.output.name, o.binary])).toEqual(dtypes.outputs.map((o) => [o.name, false]));
});

test('INT8 and FP16 range edges', () => {
  const at = (q, h) => refused(dtypes, { inputs: [t('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]), t('h', 'FP16', [4], h), t('q', 'INT8', [5], q), t('m', 'BOOL', [5], [0, 0, 0, 0, 0])] });
  expect(at([-129, 0, 0, 0, 0], [1, 1, 1, 1])[1]).toMatch(/element 0 is -129; INT8 takes integers from -128 to 127/);
  expect(at([128, 0, 0, 0, 0], [1, 1, 1, 1])[1]).toMatch(/element 0 is 128/);
  // 65519 rounds to 65504; 65520 rounds to infinity.
  expect(() => at([0, 0, 0, 0, 0], [65519, -65519, 1, 1])).toThrow('accepted');
  expect(at([0, 0, 0, 0, 0], [1, -65520, 1, 1])[1]).toMatch(/element 1 is -65520, beyond FP16's largest finite value 65504/);
  expect(at([0, 0, 0, 0, 0], [1, 1, true, 1])[1]).toMatch(/element 2 is true; FP16 takes numbers/);
  expect(at([0, 0, 0, 0, 0.5], [1, 1, 1, 1])).toEqual([400, 'input "q": element 4 is 0.5; INT8 takes integers from -128 to 127']);
});

test('nesting: rows as the shape has them; too deep, too shallow or ragged is refused with the axis', () => {
  const x = (data) => ({ inputs: [t('x', 'FP32', [2, 3], data)] });
  expect(refused(dtypes, x([[1, 2, 3], [4, 5]]))[1]).toBe('input "x": nested "data" does not match shape [2,3] at axis 1 (expected 3 entries, got 2)');
  expect(refused(dtypes, x([[1, 2, 3], 4]))[1]).toBe('input "x": nested "data" does not match shape [2,3] at axis 1 (expected 3 entries, got 4)');
  expect(refused(dtypes, x([[[1], [2], [3]], [[4], [5], [6]]]))[1]).toMatch(/element 0 is an array; FP32 takes numbers/);
  expect(refused(dtypes, x([1, 2, 3, 4, 5, 6, 7]))[1]).toBe('input "x": "data" has 7 elements, shape [2,3] takes 6');
  expect(refused(dtypes, x('123456'))[1]).toBe('input "x": "data" must be an array, got "123456"');
});

test('a rank-0 input takes a bare value or a one-element array', () => {
  const s = load(fixture('status'));
  const sig = signatureOf(s);
  s.close();
  const inputs = (v) => ({ inputs: [t('run_status', 'INT8', [], v), t('copy_status', 'INT8', [], [0]), t('bind_status', 'INT8', [], 0), t('buf', 'FP32', [2], [1, 2])] });
  expect(Array.from(parse(sig, inputs(3)).inputs.run_status)).toEqual([3]);
  expect(Array.from(parse(sig, inputs([3])).inputs.run_status)).toEqual([3]);
  expect(refused(sig, inputs([3, 4]))[1]).toBe('input "run_status": "data" has 2 elements, shape [] takes 1');
});

test('shape and datatype rules', () => {
  expect(refused(add, { inputs: [t('a', 'FP32', [4, 1], [1, 2, 3, 4]), ok4[1]] })[1]).toBe('input "a": shape [4,1] given, the model takes [4]');
  expect(refused(add, { inputs: [t('a', 'FP32', [-4], [1, 2, 3, 4]), ok4[1]] })[1]).toBe('input "a": "shape" must be an array of non-negative integers, got [-4]');
  expect(refused(add, { inputs: [t('a', 'FP32', '4', [1, 2, 3, 4]), ok4[1]] })[1]).toBe('input "a": "shape" must be an array of integers, got "4"');
  expect(refused(add, { inputs: [t('a', 'FP64', [4], [1, 2, 3, 4]), ok4[1]] })[1]).toBe('input "a": datatype "FP64" given, the model takes FP32');
  expect(refused(add, { inputs: [{ name: 3 }, ok4[1]] })[1]).toBe('inputs[0]: "name" must be a string, got 3');
  expect(refused(add, { inputs: [null] })[1]).toBe('inputs[0] must be a tensor object, got null');
  expect(refused(add, [1])[1]).toBe('the request must be a JSON object, got an array');
  expect(refused(add, { inputs: [] })[1]).toBe('input "a", "b" are missing (the model takes a, b)');
});

test('requested outputs: by name, once each; binary per output overrides the request default', () => {
  const r = parse(dtypes, {
    id: 'r"1',
    inputs: [t('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]), t('h', 'FP16', [4], [1, 2, 3, 4]), t('q', 'INT8', [5], [1, 2, 3, 4, 5]), t('m', 'BOOL', [5], [1, 0, 1, 0, 1])],
    outputs: [{ name: 'o3' }, { name: 'o1', parameters: { binary_data: false } }, { name: 'o0', parameters: { binary_data: true } }],
    parameters: { binary_data_output: true },
  });
  expect(r.id).toBe('r"1');
  expect(r.outputs.map((o) => [o.output.name, o.binary])).toEqual([
    ['o3', true],
    ['o1', false],
    ['o0', true],
  ]);
  const base = { inputs: ok4 };
  expect(refused(add, { ...base, outputs: 'output_0' })[1]).toBe('"outputs" must be an array of requested outputs, got "output_0"');
  expect(refused(add, { ...base, outputs: [{ name: 'output_0' }, { name: 'output_0' }] })[1]).toBe('output "output_0" is requested twice');
  expect(refused(add, { ...base, outputs: ['output_0'] })[1]).toBe('outputs[0]: the model has no output "output_0" (its outputs: output_0)');
});

test('binary inputs: views of the body where aligned, copies where not, and each size rule', () => {
  const head = Buffer.from(JSON.stringify({
    inputs: [
      { name: 'a', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } },
      { name: 'b', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } },
    ],
  }));
  for (const start of [0, 1, 2, 4]) {
    const buf = new Uint8Array(new ArrayBuffer(start + head.length + 32));
    const body = buf.subarray(start);
    body.set(head);
    const values = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]);
    body.set(new Uint8Array(values.buffer), head.length);
    const r = parseInfer(add, body, head.length);
    expect(Array.from(r.inputs.a)).toEqual([1, 2, 3, 4]);
    expect(Array.from(r.inputs.b)).toEqual([5, 6, 7, 8]);
    const aligned = (start + head.length) % 4 === 0;
    expect(r.inputs.a.buffer === buf.buffer).toBe(aligned);
  }
  const withSize = (size, extra = {}) => Buffer.from(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], parameters: { binary_data_size: size }, ...extra }, ok4[1]] }));
  for (const [size, message] of [
    [-1, 'input "a": binary_data_size must be a non-negative integer, got -1'],
    [1.5, 'input "a": binary_data_size must be a non-negative integer, got 1.5'],
    ['16', 'input "a": binary_data_size must be a non-negative integer, got "16"'],
  ]) {
    const h = withSize(size);
    expect(() => parseInfer(add, h, h.length)).toThrow(message);
  }
  const both = withSize(16, { data: [1, 2, 3, 4] });
  expect(() => parseInfer(add, Buffer.concat([both, Buffer.alloc(16)]), both.length)).toThrow('input "a": has both "data" and binary_data_size');
});

test('responses: JSON numbers (FP16 as its shortest f16 decimal, BOOL as booleans), binary outputs as views in order, id escaped', () => {
  const wanted = [
    { output: dtypes.outputs[0], binary: false },
    { output: dtypes.outputs[1], binary: false },
    { output: dtypes.outputs[3], binary: false },
    { output: dtypes.outputs[2], binary: true },
  ];
  const tensors = [
    { data: Float32Array.of(0.5, -1, 2, 3, 4, 5) },
    { data: Uint16Array.from([1.5, -0.25, 65504, 0], f16Bits) },
    { data: Int8Array.of(-128, 127, 0, 1, -1) },
    { data: Uint8Array.of(1, 0, 1, 1, 0) },
  ];
  const { head, chunks } = formatInfer('dt"s', '3', 'a\\b', wanted, tensors);
  expect(JSON.parse(head)).toEqual({
    model_name: 'dt"s',
    model_version: '3',
    id: 'a\\b',
    outputs: [
      { name: 'o0', datatype: 'FP32', shape: [2, 3], data: [0.5, -1, 2, 3, 4, 5] },
      // 65500 reads back to f16 65504, the nearest binary16 value: the shortest f16 text.
      { name: 'o1', datatype: 'FP16', shape: [4], data: [1.5, -0.25, 65500, 0] },
      { name: 'o3', datatype: 'BOOL', shape: [5], data: [true, false, true, true, false] },
      { name: 'o2', datatype: 'INT8', shape: [5], parameters: { binary_data_size: 5 } },
    ],
  });
  expect(chunks).toHaveLength(1);
  expect(chunks[0].buffer).toBe(tensors[2].data.buffer);
  expect(Array.from(new Int8Array(chunks[0].buffer, chunks[0].byteOffset, 5))).toEqual([-128, 127, 0, 1, -1]);
  const none = formatInfer('m', '1', undefined, [], []);
  expect(JSON.parse(none.head)).toEqual({ model_name: 'm', model_version: '1', outputs: [] });
});

test('every refusal of the request header, in process', () => {
  const m4 = (name, data = [1, 2, 3, 4]) => t(name, 'FP32', [4], data);
  const cases = [
    [null, 'the request must be a JSON object, got null'],
    [5, 'the request must be a JSON object, got 5'],
    ['x'.repeat(41), `the request must be a JSON object, got "${'x'.repeat(40)}…"`],
    ['y'.repeat(40), `the request must be a JSON object, got "${'y'.repeat(40)}"`],
    [{ id: {}, inputs: [] }, '"id" must be a string, got an object'],
    [{ inputs: [5] }, 'inputs[0] must be a tensor object, got 5'],
    [{ inputs: 'a' }, '"inputs" must be an array of tensors, got "a"'],
    [{ inputs: [m4('zz')] }, 'input "zz": the model has no such input (its inputs: a, b)'],
    [{ inputs: [m4('a'), m4('a')] }, 'input "a" is given twice'],
    [{ inputs: [m4('a')] }, 'input "b" is missing (the model takes a, b)'],
    [{ inputs: [m4('a', [1, 2, 3, 1e39]), m4('b')] }, "input \"a\": element 3 is 1e+39, beyond FP32's largest finite value"],
    [{ inputs: [m4('a', [1, 2, 3, null]), m4('b')] }, 'input "a": element 3 is null; FP32 takes numbers'],
    [{ inputs: [t('a', 'FP32', [], [1]), m4('b')] }, 'input "a": shape [] given, the model takes [4]'],
    [{ inputs: [t('a', 'FP32', [0], []), m4('b')] }, 'input "a": shape [0] given, the model takes [4]'],
    [{ inputs: [t('a', 'FP32', [4, -1], []), m4('b')] }, 'input "a": "shape" must be an array of non-negative integers, got [4,-1]'],
    [{ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], parameters: null }, m4('b')] }, 'input "a": has neither "data" nor binary_data_size'],
    [{ inputs: [m4('a', [1, 2, 3]), m4('b')] }, 'input "a": "data" has 3 elements, shape [4] takes 4'],
    [{ inputs: [m4('a'), m4('b')], outputs: [null] }, 'outputs[0]: the model has no output null (its outputs: output_0)'],
    [{ inputs: [m4('a'), m4('b')], outputs: [{ name: 5 }] }, 'outputs[0]: the model has no output 5 (its outputs: output_0)'],
    [{ inputs: [m4('a'), m4('b')], outputs: [{ name: 'o9' }] }, 'outputs[0]: the model has no output "o9" (its outputs: output_0)'],
  ];
  for (const [request, message] of cases) expect([request, refused(add, request)]).toEqual([request, [400, message]]);
  const all = refused(dtypes, { inputs: [t('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]), t('h', 'FP16', [4], [1, 2, 3, 4]), t('q', 'INT8', [5], [1, 2, 3, 4, 5]), t('m', 'BOOL', [5], [0, 1, 2, 0, 1])] });
  expect(all[1]).toBe('input "m": element 2 is 2; BOOL takes true or false');
  expect(refused(dtypes, { inputs: [], outputs: [{ name: 'zz' }] })[1]).toBe('input "x", "h", "q", "m" are missing (the model takes x, h, q, m)');
  expect(refused(dtypes, { inputs: [t('x', 'FP32', [2, 3], [1, 2, 3, 4, 5, 6]), t('h', 'FP16', [4], [1, 2, 3, 4]), t('q', 'INT8', [5], [1, 2, 3, 4, 5]), t('m', 'BOOL', [5], [0, 1, 0, 0, 1])], outputs: [{ name: 'zz' }] })[1]).toBe(
    'outputs[0]: the model has no output "zz" (its outputs: o0, o1, o2, o3, o4, o5)',
  );
});

test('binary data: size rules in process, binary_data_output for all, parameters that are not objects ignored', () => {
  const body = (inputs, tail, extra = {}) => {
    const head = Buffer.from(JSON.stringify({ inputs, ...extra }));
    return [Buffer.concat([head, tail]), head.length];
  };
  const bin = (name, size) => ({ name, datatype: 'FP32', shape: [4], parameters: { binary_data_size: size } });
  const refusedBinary = (inputs, tail, extra) => {
    const [b, n] = body(inputs, tail, extra);
    try {
      parseInfer(add, b, n);
    } catch (err) {
      return err.message;
    }
    return 'accepted';
  };
  expect(refusedBinary([bin('a', 0), bin('b', 16)], Buffer.alloc(16))).toBe('input "a": binary_data_size is 0 bytes, FP32 of shape [4] takes 16');
  expect(refusedBinary([bin('a', 12), bin('b', 16)], Buffer.alloc(28))).toBe('input "a": binary_data_size is 12 bytes, FP32 of shape [4] takes 16');
  expect(refusedBinary([bin('a', 16), bin('b', 16)], Buffer.alloc(31))).toBe("input \"b\": binary_data_size 16 runs past the end of the request's binary data (15 bytes left)");
  expect(refusedBinary([bin('a', 16), bin('b', 16)], Buffer.alloc(33))).toBe("the request has 1 bytes of binary data that no input's binary_data_size accounts for");
  expect(refusedBinary([bin('a', 16), bin('b', 16)], Buffer.alloc(32))).toBe('accepted');
  const [b, n] = body([bin('a', 16), { name: 'b', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4], parameters: 'x' }], Buffer.alloc(16), { parameters: { binary_data_output: true } });
  const r = parseInfer(add, b, n);
  expect(r.outputs.map((o) => o.binary)).toEqual([true]);
  expect(Array.from(r.inputs.b)).toEqual([1, 2, 3, 4]);
  // Only `true` turns binary output on; an output's own setting wins either way.
  expect(parse(add, { inputs: ok4, parameters: { binary_data_output: 1 } }).outputs[0].binary).toBe(false);
  expect(parse(add, { inputs: ok4, parameters: null }).outputs[0].binary).toBe(false);
  expect(parse(add, { inputs: ok4, outputs: [{ name: 'output_0', parameters: null }], parameters: { binary_data_output: true } }).outputs[0].binary).toBe(true);
  expect(parse(add, { inputs: ok4, outputs: [{ name: 'output_0', parameters: { binary_data: 'yes' } }] }).outputs[0].binary).toBe(false);
  expect(parse(add, { inputs: ok4, outputs: [{ name: 'output_0', parameters: {} }], parameters: { binary_data_output: true } }).outputs[0].binary).toBe(true);
  const broken = Buffer.from('{"inputs": [');
  expect(() => parseInfer(add, broken, broken.length)).toThrow(/^the request header is not JSON: /);
});

test("non-finite float outputs are Python json's tokens, each kind of them, wherever they are", () => {
  const wanted = [{ output: add.outputs[0], binary: false }];
  for (const [bad, token] of [[NaN, 'NaN'], [Infinity, 'Infinity'], [-Infinity, '-Infinity']]) {
    for (const at of [0, 3]) {
      const data = Float32Array.of(1, 2, 3, 4);
      data[at] = bad;
      const expected = ['1', '2', '3', '4'];
      expected[at] = token;
      expect(formatInfer('m', '1', undefined, wanted, [{ data }]).head).toContain(`"data":[${expected.join(',')}]`);
    }
  }
});

test('FP32 values are written as the shortest decimal that reads back to the same f32, -0 kept', () => {
  const wanted = [{ output: add.outputs[0], binary: false }];
  const text = (values) => {
    const head = formatInfer('m', '1', undefined, wanted, [{ data: Float32Array.from(values) }]).head;
    return head.slice(head.indexOf('"data":') + 7, head.lastIndexOf(']}]}') + 1);
  };
  // A double writer would give 0.10000000149011612, 1.0000000116860974e-7 and 0 for these.
  // -0 as -0.0: tritonclient's rapidjson reads "-0" as the integer 0.
  expect(text([0.1, 1e-7, -0, 3])).toBe('[0.1,1e-7,-0.0,3]');
  const next = require('../helpers').rng(27);
  const values = Float32Array.from({ length: 2000 }, () => Math.fround((next() - 0.5) * 10 ** Math.floor(next() * 60 - 30)));
  const back = text(values).slice(1, -1).split(',');
  back.forEach((t, i) => {
    expect(Math.fround(Number(t))).toBe(values[i]);
    // No shorter decimal reads back to it.
    const digits = t.replace(/^-|e.*$|\./g, '').replace(/^0+/, '').replace(/0+$/, '').length;
    if (digits > 1) expect(Math.fround(Number(values[i].toPrecision(digits - 1)))).not.toBe(values[i]);
  });
});

test('NaN, Infinity and -Infinity in FP32 and FP16 request data are those values; anywhere else they are refused by name', () => {
  const { fixture } = require('../helpers');
  const half = require('../..').load(fixture('half-8'));
  const sig = signatureOf(half, undefined);
  half.close();
  const body = (text) => Buffer.from(text);
  const parseText = (s, text) => parseInfer(s, body(text), Buffer.byteLength(text));
  const a = parseText(add, '{"inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":[NaN,Infinity,-Infinity,-0]},{"name":"b","datatype":"FP32","shape":[4],"data":[1,2,3,4]}]}');
  expect(Array.from(a.inputs.a)).toEqual([NaN, Infinity, -Infinity, -0]);
  expect(Object.is(a.inputs.a[3], -0)).toBe(true);
  const h = parseText(sig, '{"inputs":[{"name":"x","datatype":"FP16","shape":[8],"data":[NaN,-Infinity,Infinity,65504,-0,0.1,6e-8,1]}]}');
  expect(Array.from(h.inputs.x)).toEqual([NaN, -Infinity, Infinity, 65504, -0, 0.1, 6e-8, 1]);
  // Inside strings the tokens are text: an id of "NaN" is an id.
  expect(parseText(add, '{"id":"NaN -Infinity","inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":[1,2,3,4]},{"name":"b","datatype":"FP32","shape":[4],"data":[1,2,3,4]}]}').id).toBe('NaN -Infinity');
  const refused = (s, text) => {
    try {
      parseText(s, text);
    } catch (err) {
      return err.message;
    }
    throw new Error('accepted');
  };
  const only = 'NaN, Infinity and -Infinity are taken only as FP32 and FP16 tensor "data"';
  expect(refused(add, '{"id":NaN,"inputs":[]}')).toBe(`NaN at id: ${only}`);
  expect(refused(add, '{"inputs":[{"name":"a","datatype":"FP32","shape":[Infinity],"data":[1]}]}')).toBe(`Infinity at inputs[0].shape[0]: ${only}`);
  expect(refused(add, '{"inputs":[],"parameters":{"binary_data_output":-Infinity}}')).toBe(`-Infinity at parameters.binary_data_output: ${only}`);
  expect(refused(dtypes, '{"inputs":[{"name":"q","datatype":"INT8","shape":[5],"data":[1,NaN,3,4,5]}]}')).toBe('input "q": element 1 is NaN; INT8 takes integers from -128 to 127');
  // Numbers that overflow are still refused: only the tokens stand for the infinities.
  expect(refused(add, '{"inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":[1e39,2,3,4]}]}')).toMatch(/element 0 is 1e\+39, beyond FP32's largest finite value/);
  expect(refused(add, '{"inputs":[NaNa]}')).toMatch(/^the request header is not JSON: /);
});

test('signatures: the INPUT sources are the inputs; outputs are output_<index> unless named', () => {
  expect(dtypes.inputs.map((i) => i.name)).toEqual(['x', 'h', 'q', 'm']);
  expect(add.outputs.map((o) => o.name)).toEqual(['output_0']);
  expect(dtypes.outputs.map((o) => o.name)).toEqual(['o0', 'o1', 'o2', 'o3', 'o4', 'o5']);
});

test('where NaN is refused outside data: the top level, nested look-alikes, parameters of an input, any input index', () => {
  const refusedText = (s, text) => {
    try {
      parseInfer(s, Buffer.from(text), Buffer.byteLength(text));
    } catch (err) {
      return err.message;
    }
    throw new Error('accepted');
  };
  const only = 'NaN, Infinity and -Infinity are taken only as FP32 and FP16 tensor "data"';
  expect(refusedText(add, 'NaN')).toBe(`NaN at the top level: ${only}`);
  expect(refusedText(add, '{"parameters":{"inputs":[{"data":[NaN]}]},"inputs":[]}')).toBe(`NaN at parameters.inputs[0].data[0]: ${only}`);
  expect(refusedText(add, '{"inputs":[{"name":"a","parameters":{"data":Infinity}}]}')).toBe(`Infinity at inputs[0].parameters.data: ${only}`);
  // The eleventh input's data is data too: what refuses it is its name.
  const many = Array.from({ length: 11 }, (_, i) => `{"name":"x${i}","datatype":"FP32","shape":[1],"data":[NaN]}`).join(',');
  expect(refusedText(add, `{"inputs":[${many}]}`)).toBe('input "x0": the model has no such input (its inputs: a, b)');
  // null anywhere beside a token is fine.
  const text = '{"id":"n","parameters":null,"inputs":[{"name":"a","datatype":"FP32","shape":[4],"parameters":null,"data":[NaN,1,2,3]},{"name":"b","datatype":"FP32","shape":[4],"data":[1,2,3,4]}]}';
  const ok = parseInfer(add, Buffer.from(text), text.length);
  expect(Number.isNaN(ok.inputs.a[0])).toBe(true);
});

test('INT8 outputs as JSON integers; float outputs past 65,536 elements are written off the event loop, to the same text', async () => {
  const int8 = formatInfer('m', '1', undefined, [{ output: dtypes.outputs[2], binary: false }], [, , { data: Int8Array.of(-128, 127, 0, 1, -1) }]);
  expect(int8.head).toContain('"data":[-128,127,0,1,-1]}');
  const wanted = [{ output: add.outputs[0], binary: false }, { output: add.outputs[0], binary: false }];
  const values = (n) => Float32Array.from({ length: n }, (_, k) => (k % 9) / 4);
  const expectedText = (n) => `[${Array.from(values(n)).join(',')}]`;
  const atLimit = formatInfer('m', '1', undefined, wanted, [{ data: values(65536) }]);
  expect(typeof atLimit.head).toBe('string');
  expect(atLimit.head).toContain(`"data":${expectedText(65536)}}`);
  // One output over the limit makes the whole response a promise; the other stays in order.
  const over = formatInfer('m', '1', undefined, [wanted[0], { output: dtypes.outputs[2], binary: false }], [{ data: values(65537) }, , { data: Int8Array.of(1, 2, 3, 4, 5) }]);
  expect(over).toBeInstanceOf(Promise);
  const { head } = await over;
  // Bytes, as the large output's text came from the pool thread.
  expect(Buffer.isBuffer(head)).toBe(true);
  expect(head.toString()).toBe(`{"model_name":"m","model_version":"1","outputs":[${add.outputs[0].prefix}"data":${expectedText(65537)}},${dtypes.outputs[2].prefix}"data":[1,2,3,4,5]}]}`);
});

test('headers from TAKE_BYTES on have the flat number arrays of their data read natively; shorter ones, and other data, are parsed whole', () => {
  const text = JSON.stringify({ id: 'r', inputs: [t('a', 'FP32', [3], [1.5, 0, 1e-7]), t('q', 'INT8', [2], [[1], [2]]), t('m', 'BOOL', [2], [true, 0])] }).replace('[1.5,0,', '[1.5,-0,');
  const long = Buffer.concat([Buffer.from(text), PAD]);
  const taken = readHeader(long, long.length);
  expect(taken.arrays).toHaveLength(1);
  expect(Array.from(taken.arrays[0])).toEqual([1.5, -0, 1e-7]);
  expect(taken.header.id).toBe('r');
  // The other inputs' data are as JSON.parse gives them.
  expect(taken.header.inputs.slice(1).map((i) => i.data)).toEqual([[[1], [2]], [true, 0]]);
  const sized = (n) => Buffer.concat([Buffer.from(text), Buffer.alloc(n - text.length, 0x20)]);
  expect(readHeader(sized(TAKE_BYTES), TAKE_BYTES).arrays).toHaveLength(1);
  expect(readHeader(sized(TAKE_BYTES - 1), TAKE_BYTES - 1).arrays).toBeNull();
  expect(readHeader(Buffer.from(text), text.length)).toEqual({ header: JSON.parse(text), arrays: null });
  // A number beyond f64 is left to JSON.parse, which makes it Infinity, and FP32 refuses it as written.
  const huge = Buffer.from(`${JSON.stringify({ inputs: [t('a', 'FP32', [4], [1, 2, 3, 0]), t('b', 'FP32', [4], [1, 2, 3, 4])] }).replace(',0]', ',1e400]')}${PAD}`);
  expect(readHeader(huge, huge.length).arrays).toHaveLength(1);
  expect(() => parseInfer(add, huge, huge.length)).toThrow('input "a": element 3 is Infinity, beyond FP32\'s largest finite value');
});

test('mutated requests: the native reader and JSON.parse agree on every one, accepted or refused', () => {
  // A fixed seed: the same 3,000 texts each run.
  const next = rng(27);
  const random = (n) => Math.floor(next() * n);
  const pieces = ['[', ']', '{', '}', ',', ':', '"', '\\', '-', '0', '1', '9', '.', 'e', 'E', '+', ' ', 'NaN', 'Infinity', '-Infinity', 'true', 'null', '"data"', '"inputs"', '1e400', '[1,2]'];
  const base = JSON.stringify({ id: 'm', inputs: [t('x', 'FP32', [2, 3], [1, 2.5, -3, 0.1, 1e-3, 6]), t('h', 'FP16', [4], [0.1, 2, 3, 4]), t('q', 'INT8', [5], [-128, 127, 0, 1, -1]), t('m', 'BOOL', [5], [1, 0, 1, 0, 1])] });
  let accepted = 0;
  for (let n = 0; n < 3000; n++) {
    let text = base;
    for (let k = 1 + random(3); k > 0; k--) {
      const at = random(text.length);
      text = random(2) === 0 ? text.slice(0, at) + pieces[random(pieces.length)] + text.slice(at) : text.slice(0, at) + text.slice(at + 1 + random(4));
    }
    const body = Buffer.from(text);
    try {
      parseInfer(dtypes, body, body.length);
      accepted++;
    } catch (err) {
      if (!(err instanceof RequestError)) throw err;
    }
  }
  // Some mutations leave a valid request (a digit more, a space), most do not.
  expect(accepted).toBeGreaterThan(20);
  expect(accepted).toBeLessThan(2900);
});
