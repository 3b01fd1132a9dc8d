'use strict';

// The protocol's datatypes as the client sends and reads them (lib/protocol/datatypes.js),
// and f16 rounding (lib/numbers.js): each checked against values worked out independently
// (every f16 value, the midpoints between them, DataView's own little-endian writes).
const { f16Bits, f16Value } = require('../../lib/numbers');
const { toArray, toBytes, fromBytes, DATATYPES } = require('../../lib/protocol/datatypes');

const fail = (detail) => new Error(detail);

describe('f16 rounding', () => {
  test('every finite f16 value gives its own bits back; NaN the quiet NaN', () => {
    for (let b = 0; b < 0x10000; b++) {
      const v = f16Value(b);
      if (Number.isNaN(v)) continue;
      if (f16Bits(v) !== b) throw new Error(`bits ${b} (value ${v}) came back as ${f16Bits(v)}`);
    }
    expect(f16Bits(NaN)).toBe(0x7e00);
    expect(f16Bits(-0)).toBe(0x8000);
  });

  test('a value halfway between two goes to the even one; a hair off it, to the nearer', () => {
    for (let b = 0; b < 0x7bff; b++) {
      const lo = f16Value(b);
      const hi = f16Value(b + 1);
      const mid = (lo + hi) / 2;
      const even = b % 2 === 0 ? b : b + 1;
      const hair = (hi - lo) / 1024;
      if (f16Bits(mid) !== even || f16Bits(-mid) !== (even | 0x8000) || f16Bits(mid - hair) !== b || f16Bits(mid + hair) !== b + 1) throw new Error(`between bits ${b} and ${b + 1}`);
    }
    // 65504 is the largest f16; from 65520 (halfway to 65536) on, infinity.
    expect([f16Bits(65519.99), f16Bits(65520), f16Bits(Infinity), f16Bits(-1e9)]).toEqual([0x7bff, 0x7c00, 0x7c00, 0xfc00]);
  });
});

describe('bf16 rounding', () => {
  const { bf16Bits } = require('../../lib/numbers');
  const value = (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0];

  test('every finite bf16 value gives its own bits back; midpoints go to the even one, from the double at once', () => {
    for (let b = 0; b < 0x10000; b++) {
      const v = value(b);
      if (!Number.isNaN(v) && bf16Bits(v) !== b) throw new Error(`bits ${b} came back as ${bf16Bits(v)}`);
    }
    for (let b = 0; b < 0x7f7f; b++) {
      const [lo, hi] = [value(b), value(b + 1)];
      const mid = (lo + hi) / 2;
      const hair = (hi - lo) / 1024;
      if (bf16Bits(mid) !== (b % 2 ? b + 1 : b) || bf16Bits(mid + hair) !== b + 1 || bf16Bits(mid - hair) !== b) throw new Error(`between bits ${b} and ${b + 1}`);
    }
    // Just past a midpoint by less than f32 can hold: rounding through f32 first would tie, and go to even.
    expect(bf16Bits(1 + 2 ** -8 + 2 ** -30)).toBe(0x3f81);
    expect([bf16Bits(NaN), bf16Bits(-Infinity), bf16Bits(-0)]).toEqual([0x7fc0, 0xff80, 0x8000]);
  });
});

describe('inputs to bytes, bytes to outputs', () => {
  test('each numeric datatype: little-endian bytes, as DataView writes them, and back', () => {
    const cases = [
      ['u16', [0, 1, 65535], (d, i, v) => d.setUint16(i * 2, v, true)],
      ['i16', [-32768, 5, 32767], (d, i, v) => d.setInt16(i * 2, v, true)],
      ['u32', [0, 4294967295, 7], (d, i, v) => d.setUint32(i * 4, v, true)],
      ['i32', [-2147483648, 2147483647, -1], (d, i, v) => d.setInt32(i * 4, v, true)],
      ['i64', [-(2n ** 63n), 2n ** 63n - 1n, -1n], (d, i, v) => d.setBigInt64(i * 8, v, true)],
      ['u64', [0n, 2n ** 64n - 1n, 2n ** 53n + 1n], (d, i, v) => d.setBigUint64(i * 8, v, true)],
      ['f64', [Math.PI, -0, -1e308], (d, i, v) => d.setFloat64(i * 8, v, true)],
      ['f32', [1.5, -0, Math.fround(3.4e38)], (d, i, v) => d.setFloat32(i * 4, v, true)],
    ];
    for (const [dtype, values, put] of cases) {
      const { size } = Object.values(DATATYPES).find((t) => t.dtype === dtype);
      const want = new DataView(new ArrayBuffer(values.length * size));
      values.forEach((v, i) => put(want, i, v));
      const bytes = toBytes(dtype, toArray(dtype, values, fail));
      expect([dtype, Array.from(bytes)]).toEqual([dtype, Array.from(new Uint8Array(want.buffer))]);
      // Read back from an odd offset too: the data is copied where it is not aligned.
      const odd = new Uint8Array(bytes.length + 1);
      odd.set(bytes, 1);
      const back = fromBytes(dtype, odd.subarray(1), values.length, 'bits', fail);
      expect([dtype, Array.from(back, (v) => (Object.is(v, -0) ? '-0' : v))]).toEqual([dtype, values.map((v) => (Object.is(v, -0) ? '-0' : v))]);
    }
  });

  test('f16 NaN payloads and -0 travel as bits; BYTES as length-prefixed elements', () => {
    const bits = Uint16Array.of(0x7c01, 0xfe12, 0x8000, 0x3c00);
    expect(fromBytes('f16', toBytes('f16', toArray('f16', bits, fail)), 4, 'bits', fail)).toEqual(bits);
    const strings = toBytes('bytes', toArray('bytes', ['', 'héllo', Uint8Array.of(0, 255)], fail));
    expect(Array.from(strings)).toEqual([0, 0, 0, 0, 6, 0, 0, 0, 0x68, 0xc3, 0xa9, 0x6c, 0x6c, 0x6f, 2, 0, 0, 0, 0, 255]);
    expect(fromBytes('bytes', strings, 3, 'bits', fail).map((b) => Array.from(b))).toEqual([[], [0x68, 0xc3, 0xa9, 0x6c, 0x6c, 0x6f], [0, 255]]);
    expect(() => fromBytes('bytes', strings.subarray(0, 10), null, 'bits', fail)).toThrow('bytes element 1 says 6 bytes; 2 are left');
  });

  test('values out of range or of the wrong kind are refused, naming the element', () => {
    expect(() => toArray('i8', [1, 128], fail)).toThrow('element 1 is 128; i8 values are integers in -128..127');
    expect(() => toArray('u64', [1, -1n], fail)).toThrow('element 1 is -1; u64 values are bigints (or safe integers) in 0..18446744073709551615');
    expect(() => toArray('i64', [2 ** 60], fail)).toThrow(/element 0 is 1152921504606847000; i64 values are bigints/);
    expect(() => toArray('bool', [true, 2], fail)).toThrow('element 1 is 2; bool values are true, false, 0 or 1');
    expect(() => toArray('f32', new Float64Array(2), fail)).toThrow('expects a Float32Array or an array of numbers, got a Float64Array');
    expect(() => toArray('bytes', [1], fail)).toThrow('element 0 is number; bytes elements are strings or Uint8Arrays');
    expect(Array.from(toArray('f16', [1, 65504, 1e-8], fail))).toEqual([0x3c00, 0x7bff, 0]);
  });
});

describe("gRPC's request parameters", () => {
  test('sequence ids past 2^53 go exactly, as int64 (or uint64 past int64) varints', () => {
    const { GrpcTransport } = require('../../lib/client/grpc');
    const { schema, decode } = require('../../lib/protocol/pb');
    const Value = schema([[2, 'int64', 'int64n'], [5, 'uint64', 'uint64n'], [3, 'string', 'string']]);
    const Entry = schema([[1, 'key', 'string'], [2, 'value', 'message', { schema: Value }]]);
    const Request = schema([[4, 'parameters', 'map', { schema: Entry }]]);
    const t = new GrpcTransport(new URL('grpc://127.0.0.1:1'), {});
    try {
      for (const id of [2n ** 53n + 1n, 2n ** 63n - 1n, 2n ** 64n - 1n, 7, 'seven']) {
        const bytes = t.prepare('m', undefined, { inputs: [], parameters: { sequence_id: id, priority: 2 } });
        const params = Object.fromEntries(decode(Request, bytes).parameters.map(({ key, value }) => [key, value]));
        const want = typeof id === 'string' ? { string: id } : BigInt(id) >= 2n ** 63n ? { uint64: BigInt(id) } : { int64: BigInt(id) };
        expect([String(id), params.sequence_id]).toEqual([String(id), want]);
        expect(params.priority).toEqual({ uint64: 2n });
      }
    } finally {
      t.close();
    }
  });
});

describe('JSON as the REST transport writes and reads it', () => {
  const { jsonText, parseJson } = require('../../lib/client/rest');

  test('bigints as their digits; NaN, the infinities and -0 as Python writes them; strings untouched', () => {
    expect(jsonText({ a: [-(2n ** 63n), 2n ** 64n - 1n, NaN, -Infinity, -0, 0, 'NaN', '\u0000-0.0'] })).toBe('{"a":[-9223372036854775808,18446744073709551615,NaN,-Infinity,-0.0,0,"NaN","\\u0000-0.0"]}');
  });

  test('integers past 2^53 read back as exact bigints; floats, bare NaN and strings as they are', () => {
    const v = parseJson('{"a":[18446744073709551615,-9223372036854775808,9007199254740993,12,1.2345678901234567,NaN,-Infinity,-0.0],"s":"Infinity 12345678901234567","e":1e-12345678901234567}');
    expect(v.a.slice(0, 3)).toEqual([18446744073709551615n, -9223372036854775808n, 9007199254740993n]);
    expect(v.a.slice(3)).toEqual([12, 1.2345678901234567, NaN, -Infinity, -0]);
    expect(Object.is(v.a[7], -0)).toBe(true);
    expect([v.s, v.e]).toEqual(['Infinity 12345678901234567', 0]);
  });
});
