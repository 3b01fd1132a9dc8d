'use strict';

// lib/npy.js against NumPy itself (the PyPI peer in .venv-ref): NumPy reads what formatNpy
// writes, parseNpy reads what NumPy writes in each format version, and decodeF16 agrees
// with NumPy's float16 on every one of the 65,536 bit patterns.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseNpy, formatNpy, NpyError, ARRAYS } = require('../../lib/npy');
const { f16Value: decodeF16, f16Values } = require('../../lib/numbers');
const { PYTHON } = require('../helpers');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-npy-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const SHAPES = [[], [0], [3], [2, 3], [1, 2, 1]];
const DTYPES = ['f32', 'f16', 'i8', 'bool'];

function values(dtype, count) {
  const data = new ARRAYS[dtype](count);
  for (let i = 0; i < count; i++) {
    if (dtype === 'f32') data[i] = i * 1.25 - 2;
    else if (dtype === 'f16') data[i] = 0x3c00 + i * 37; // bits
    else if (dtype === 'i8') data[i] = i * 43 - 128;
    else data[i] = i % 2;
  }
  return data;
}

const SCRIPT = String.raw`
import json, sys, numpy as np
from numpy.lib import format as fmt
tmp = sys.argv[1]
report = {}
for name in json.loads(sys.argv[2]):
    a = np.load(f"{tmp}/{name}.npy")
    shown = a.view(np.uint16) if a.dtype == np.float16 else a
    report[name] = {"descr": a.dtype.str, "shape": list(a.shape), "data": [float(v) if a.dtype.kind == "f" else int(v) for v in shown.ravel()]}
rng = np.random.default_rng(7)
arrays = {
    "f4": rng.standard_normal((2, 3)).astype("<f4"),
    "f2": rng.standard_normal(5).astype("<f2"),
    "i1": np.arange(-128, 112, 16, dtype="|i1").reshape(3, 5),
    "b1": np.array([True, False, True, True]),
    "scalar": np.array(2.5, dtype="<f4"),
    "empty": np.zeros((0, 4), dtype="|i1"),
}
for name, a in arrays.items():
    for version in [(1, 0), (2, 0), (3, 0)]:
        with open(f"{tmp}/np-{name}-v{version[0]}.npy", "wb") as f:
            fmt.write_array(f, a, version=version)
np.save(f"{tmp}/np-fortran.npy", np.asfortranarray(np.ones((2, 3), dtype="<f4")))
np.save(f"{tmp}/np-f8.npy", np.ones(2))
np.save(f"{tmp}/np-bigendian.npy", np.ones(2, dtype=">f4"))
np.arange(65536, dtype=np.uint16).view(np.float16).astype("<f8").tofile(f"{tmp}/f16-values.bin")
json.dump({"ours": report, "arrays": {k: {"descr": a.dtype.str, "shape": list(a.shape), "data": (a.view(np.uint16) if a.dtype == np.float16 else a).ravel().tolist()} for k, a in arrays.items()}}, sys.stdout)
`;

let numpy;
beforeAll(() => {
  const names = [];
  for (const dtype of DTYPES) {
    for (const shape of SHAPES) {
      const name = `ours-${dtype}-${shape.join('x') || 'scalar'}`;
      fs.writeFileSync(path.join(tmp, `${name}.npy`), formatNpy(dtype, shape, values(dtype, shape.reduce((a, b) => a * b, 1))));
      names.push(name);
    }
  }
  const r = spawnSync(PYTHON, ['-c', SCRIPT, tmp, JSON.stringify(names)], { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(r.stderr);
  numpy = JSON.parse(r.stdout);
});

function refusal(fn) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(NpyError);
    return err.message;
  }
  throw new Error('expected a refusal');
}

const read = (name) => fs.readFileSync(path.join(tmp, name));

describe('formatNpy writes what NumPy reads', () => {
  test.each(DTYPES)('%s, every shape from a scalar to rank 3 and empty', (dtype) => {
    const descr = { f32: '<f4', f16: '<f2', i8: '|i1', bool: '|b1' }[dtype];
    for (const shape of SHAPES) {
      const name = `ours-${dtype}-${shape.join('x') || 'scalar'}`;
      const data = values(dtype, shape.reduce((a, b) => a * b, 1));
      expect(numpy.ours[name]).toEqual({ descr, shape, data: Array.from(data) });
      // NumPy's own rule for version 1.0: the header ends on a 64-byte boundary, in a newline.
      const bytes = read(`${name}.npy`);
      const headerEnd = 10 + bytes.readUInt16LE(8);
      expect([bytes[6], bytes[7], headerEnd % 64, bytes[headerEnd - 1]]).toEqual([1, 0, 0, 0x0a]);
    }
  });

  test('a view into a larger buffer writes only its own elements', () => {
    const whole = Float32Array.from([9, 1, 2, 3, 9]);
    const parsed = parseNpy(formatNpy('f32', [3], whole.subarray(1, 4)));
    expect(Array.from(parsed.data)).toEqual([1, 2, 3]);
  });

  test('a dtype with no .npy form is refused', () => {
    expect(refusal(() => formatNpy('u4', [1], new Uint32Array(1)))).toBe('no .npy dtype for u4');
  });
});

describe('parseNpy reads what NumPy writes, in format versions 1.0, 2.0 and 3.0', () => {
  test.each(['f4', 'f2', 'i1', 'b1', 'scalar', 'empty'])('%s', (name) => {
    const want = numpy.arrays[name];
    const dtype = { '<f4': 'f32', '<f2': 'f16', '|i1': 'i8', '|b1': 'bool' }[want.descr];
    for (const version of [1, 2, 3]) {
      const got = parseNpy(read(`np-${name}-v${version}.npy`));
      expect(got.dtype).toBe(dtype);
      expect(got.shape).toEqual(want.shape);
      expect(got.data).toBeInstanceOf(ARRAYS[dtype]);
      const expected = dtype === 'f32' ? want.data.map(Math.fround) : want.data.map(Number);
      expect(Array.from(got.data)).toEqual(expected);
    }
  });

  test('its data are a copy: changing the file bytes later changes nothing', () => {
    const bytes = read('np-i1-v1.npy');
    const got = parseNpy(bytes);
    bytes.fill(0, bytes.length - 15);
    expect(Array.from(got.data)).toEqual(numpy.arrays.i1.data);
  });

  test('a subarray of a larger buffer is read from its own offset', () => {
    const file = read('np-b1-v1.npy');
    const padded = Buffer.concat([Buffer.from([1, 2, 3]), file, Buffer.from([4])]);
    expect(Array.from(parseNpy(padded.subarray(3, 3 + file.length)).data)).toEqual([1, 0, 1, 1]);
  });
});

describe('what parseNpy refuses, each naming the file and the rule', () => {
  test('arrays NumPy writes that ZGC has no dtype or layout for', () => {
    expect(refusal(() => parseNpy(read('np-fortran.npy'), 'w.npy'))).toBe(
      'w.npy: Fortran-order arrays are not supported; save with np.ascontiguousarray',
    );
    expect(refusal(() => parseNpy(read('np-f8.npy'), 'w.npy'))).toBe("w.npy: dtype '<f8' is not one of <f4, <f2, |i1, |b1 (f32, f16, i8, bool)");
    expect(refusal(() => parseNpy(read('np-bigendian.npy')))).toBe("file: dtype '>f4' is not one of <f4, <f2, |i1, |b1 (f32, f16, i8, bool)");
  });

  test('bytes that are no .npy file, or a broken one', () => {
    const good = read('np-f4-v1.npy');
    const edit = (at, byte) => {
      const copy = Buffer.from(good);
      copy[at] = byte;
      return copy;
    };
    expect(refusal(() => parseNpy(Buffer.from('not numpy at all'), 'x'))).toBe('x is not a .npy file (no \\x93NUMPY magic)');
    expect(refusal(() => parseNpy(good.subarray(0, 9), 'x'))).toBe('x is not a .npy file (no \\x93NUMPY magic)');
    expect(refusal(() => parseNpy(edit(6, 4), 'x'))).toBe('x: .npy format version 4.0 is not supported (1.0 to 3.0)');
    expect(refusal(() => parseNpy(edit(6, 0), 'x'))).toBe('x: .npy format version 0.0 is not supported (1.0 to 3.0)');
    expect(refusal(() => parseNpy(good.subarray(0, 60), 'x'))).toBe('x: header runs past the end of the file');
    expect(refusal(() => parseNpy(Buffer.concat([good, Buffer.alloc(4)]), 'x'))).toBe(
      'x: shape (2, 3) of f32 needs 24 data bytes, the file has 28',
    );
    expect(refusal(() => parseNpy(good.subarray(0, good.length - 1), 'x'))).toBe(
      'x: shape (2, 3) of f32 needs 24 data bytes, the file has 23',
    );
  });

  test('headers without a key, or with a shape that is no shape', () => {
    const header = (text) => {
      const head = Buffer.from([0x93, ...Buffer.from('NUMPY'), 1, 0, text.length & 0xff, text.length >> 8]);
      return Buffer.concat([head, Buffer.from(text, 'latin1')]);
    };
    for (const text of ["{'fortran_order': False, 'shape': (1,), }", "{'descr': '<f4', 'shape': (1,), }", "{'descr': '<f4', 'fortran_order': False, }"]) {
      expect(refusal(() => parseNpy(header(`${text}\n`), 'h'))).toBe(`h: malformed header ${JSON.stringify(text)}`);
    }
    expect(refusal(() => parseNpy(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }\n"), 'h'))).toBe('h: bad shape (2, -1)');
    expect(refusal(() => parseNpy(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,), }\n"), 'h'))).toBe('h: bad shape (1.5,)');
    // Spaces NumPy's parser accepts around the keys' colons.
    const spaced = parseNpy(Buffer.concat([header("{'descr' : '|i1', 'fortran_order' : False, 'shape' : ( 2 , ), }\n"), Buffer.from([5, 250])]));
    expect([spaced.dtype, spaced.shape, Array.from(spaced.data)]).toEqual(['i8', [2], [5, -6]]);
  });

  test('headers NumPy also reads: no spaces at all, little-endian one-byte descrs, a 2.0 header past 64 KiB', () => {
    const header = (text, major = 1) => {
      const bytes = Buffer.from(text, major === 3 ? 'utf8' : 'latin1');
      const len = Buffer.alloc(major === 1 ? 2 : 4);
      if (major === 1) len.writeUInt16LE(bytes.length);
      else len.writeUInt32LE(bytes.length);
      return Buffer.concat([Buffer.from([0x93, ...Buffer.from('NUMPY'), major, 0]), len, bytes]);
    };
    const tight = parseNpy(Buffer.concat([header("{'descr':'<f4','fortran_order':False,'shape':(2,)}\n"), Buffer.from(Float32Array.from([1.5, -2]).buffer)]));
    expect([tight.dtype, tight.shape, Array.from(tight.data)]).toEqual(['f32', [2], [1.5, -2]]);
    // '<i1' and '<b1' are what some writers put for NumPy's '|i1' and '|b1' (np.dtype('<i1').str is '|i1').
    const i1 = parseNpy(Buffer.concat([header("{'descr': '<i1', 'fortran_order': False, 'shape': (2,), }\n"), Buffer.from([255, 7])]));
    expect([i1.dtype, Array.from(i1.data)]).toEqual(['i8', [-1, 7]]);
    const b1 = parseNpy(Buffer.concat([header("{'descr': '<b1', 'fortran_order': False, 'shape': (3,), }\n"), Buffer.from([1, 0, 1])]));
    expect([b1.dtype, Array.from(b1.data)]).toEqual(['bool', [1, 0, 1]]);
    // Version 2.0 exists for headers longer than a 16-bit length can say.
    const long = `{'descr': '|i1', 'fortran_order': False, 'shape': (1,), }${' '.repeat(70000)}\n`;
    const big = parseNpy(Buffer.concat([header(long, 2), Buffer.from([42])]));
    expect([big.dtype, big.shape, Array.from(big.data)]).toEqual(['i8', [1], [42]]);
    // Just the magic, a version and an empty header: a .npy file whose header is broken.
    expect(refusal(() => parseNpy(header(''), 'h'))).toBe('h: malformed header ""');
    // Versions 1.0 and 2.0 headers are latin-1, 3.0 headers UTF-8: a refusal quotes the text as written.
    const descr = (major) => header("{'descr': '\u00e9', 'fortran_order': False, 'shape': (1,), }\n", major);
    for (const major of [1, 2, 3]) expect(refusal(() => parseNpy(descr(major), 'h'))).toBe("h: dtype '\u00e9' is not one of <f4, <f2, |i1, |b1 (f32, f16, i8, bool)");
  });
});

describe('the f16 decoder (lib/numbers.js)', () => {
  test("agrees with NumPy's float16 on all 65,536 bit patterns, one value at a time and a whole array", () => {
    const bytes = read('f16-values.bin');
    const want = new Float64Array(bytes.buffer, bytes.byteOffset, 65536);
    const all = f16Values(Uint16Array.from({ length: 65536 }, (_, b) => b));
    const wrong = [];
    for (let bits = 0; bits < 65536; bits++) {
      if (!Object.is(decodeF16(bits), want[bits]) || !Object.is(all[bits], want[bits])) wrong.push(bits);
    }
    expect(all).toBeInstanceOf(Float32Array);
    expect(wrong).toEqual([]);
  });
});
