'use strict';

// `npx zgc-runtime`: inspect, run and bench as a user types them, in a child process.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { load } = require('../..');
const { fixture, f16Bits, f16Value } = require('../helpers');

const BIN = path.join(testDir, '..', 'bin', 'zgc-runtime.js');
const cli = (...args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60000 });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-cli-'));
const f = Math.fround;
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A .npy v1.0 file written by hand from the format description, not by lib/npy.js. */
function npy(descr, shape, bytes) {
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  while ((10 + header.length + 1) % 64) header += ' ';
  header += '\n';
  const head = Buffer.from([0x93, ...Buffer.from('NUMPY'), 1, 0, header.length & 0xff, header.length >> 8]);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)]);
}

function readNpy(file) {
  const buf = fs.readFileSync(file);
  expect(buf.subarray(0, 6).toString('latin1')).toBe('\x93NUMPY');
  const len = buf.readUInt16LE(8);
  expect((10 + len) % 64).toBe(0);
  const header = buf.subarray(10, 10 + len).toString('latin1');
  return { header, body: buf.subarray(10 + len) };
}

describe('zgc-runtime inspect', () => {
  test('prints the ABI version, fingerprint, sizes and a table of sources and outputs', () => {
    const r = cli('inspect', fixture('dtypes'));
    expect(r.status).toBe(0);
    const rt = load(fixture('dtypes'));
    expect(r.stdout).toContain(`fingerprint  ${rt.fingerprintHex}`);
    expect(r.stdout).toContain(`${rt.runtimeSize} bytes, aligned to ${rt.runtimeAlignment}`);
    expect(r.stdout).toMatch(/^22\s+wn\s+parameter\s+bound\s+f32\s+\[2, 3\]\s+\[-3, -1\]\s+5\s+6\s+24$/m);
    expect(r.stdout).toMatch(/^1\s+f16\s+\[4\]\s+4\s+8$/m);
    rt.close();
  });

  test('--json gives what the runtime reports', () => {
    const r = cli('inspect', fixture('dtypes'), '--json');
    const rt = load(fixture('dtypes'));
    expect(JSON.parse(r.stdout)).toEqual({
      path: rt.path, abiVersion: 1, fingerprint: rt.fingerprintHex, runtimeSize: rt.runtimeSize,
      runtimeAlignment: rt.runtimeAlignment, mutableBytes: rt.mutableBytes,
      sources: JSON.parse(JSON.stringify(rt.sources)), outputs: JSON.parse(JSON.stringify(rt.outputs)),
    });
    rt.close();
  });
});

describe('zgc-runtime run', () => {
  test('f32 outputs print as f32: the shortest decimal that reads back to the same f32, as serve writes them', () => {
    const r = cli('run', fixture('add'), '--input', 'a=0.1,1.3,3.4e38,inf', '--input', 'b=0.2,2.5,0,-inf');
    expect(r.stderr).toBe('');
    // 0.1f + 0.2f is the f32 0.30000001192092896: printed 0.3 (f32's shortest), not the double's digits.
    const sums = [f(f(0.1) + f(0.2)), f(f(1.3) + f(2.5)), f(3.4e38), NaN];
    expect(sums.map(String)).toEqual(['0.30000001192092896', '3.799999952316284', '3.3999999521443642e+38', 'NaN']);
    expect(r.stdout.trim()).toBe('output 0  f32 [4]  [0.3, 3.8, 3.4e+38, NaN]');
    const json = JSON.parse(cli('run', fixture('add'), '--json', '--input', 'a=0.1,1.3,1,1', '--input', 'b=0.2,2.5,0,0').stdout);
    expect(json[0].data).toEqual([0.3, 3.8, 1, 1]);
    // In and out of the artifact, the f32 values are unchanged: they only print shorter.
    expect(json[0].data.map(f)).toEqual([sums[0], sums[1], 1, 1]);
  });

  test('--version prints the package version', () => {
    const r = cli('--version');
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 0, stdout: `zgc-runtime ${require('../../package.json').version}\n` });
  });

  test('comma lists in, outputs printed', () => {
    const r = cli('run', fixture('add'), '--input', 'a=1,2.5,-3,4', '--input=b=0.5,0.5,0.5,0.5');
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('output 0  f32 [4]  [1.5, 3, -2.5, 4.5]');
  });

  test('.npy files in for every dtype, .npy files out, bit-exact', () => {
    const v = { x: [1, 2, 3, 4, 5, 6], wt: [1, 1, 1, 1, 1, 1], wp: [0, 0, 0, 0, 0, 0], wn: [0, 0, 0, 0, 0, 0], h: [0.5, 1.5, -2, 1024], hb: [0.25, 0, 0], q: [1, -2, 3, -4, 100], qb: [1, 1, 1, 100], m: [1, 0, 1, 0, 1], mb: [0, 1, 0] };
    const files = {
      x: npy('<f4', [2, 3], new Float32Array(v.x)), wt: npy('<f4', [2, 3], new Float32Array(v.wt)), wp: npy('<f4', [2, 3], new Float32Array(v.wp)),
      wn: npy('<f4', [2, 3], new Float32Array(v.wn)), h: npy('<f2', [4], Uint16Array.from(v.h, f16Bits)), hb: npy('<f2', [3], Uint16Array.from(v.hb, f16Bits)),
      q: npy('|i1', [5], Int8Array.from(v.q)), qb: npy('|i1', [2, 2], Int8Array.from(v.qb)), m: npy('|b1', [5], Uint8Array.from(v.m)), mb: npy('|b1', [3], Uint8Array.from(v.mb)),
    };
    const args = ['run', fixture('dtypes'), '--input', 'g=2', '--save', path.join(tmp, 'out')];
    for (const [name, bytes] of Object.entries(files)) {
      fs.writeFileSync(path.join(tmp, `${name}.npy`), bytes);
      args.push('--input', `${name}=${path.join(tmp, `${name}.npy`)}`);
    }
    const r = cli(...args);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    // Expected by hand from dtypes.c: o0 = x*wt + wp - wn + k[col], o1 = f16(h + hb[i%3]),
    // o2 = sat(q + qb[i%4]), o3 = m ^ mb[i%3], o5 = g*2.
    const o0 = readNpy(path.join(tmp, 'out', 'output-0.npy'));
    expect(o0.header).toMatch(/'descr': '<f4', 'fortran_order': False, 'shape': \(2, 3\)/);
    expect(Array.from(new Float32Array(o0.body.buffer.slice(o0.body.byteOffset, o0.body.byteOffset + 24)))).toEqual([1.5, 1, 5, 4.5, 4, 8]);
    const o1 = readNpy(path.join(tmp, 'out', 'output-1.npy'));
    expect(o1.header).toMatch(/'descr': '<f2'.*'shape': \(4,\)/);
    const bits = Array.from({ length: 4 }, (_, i) => o1.body.readUInt16LE(2 * i));
    expect(bits.map(f16Value)).toEqual([0.75, 1.5, -2, 1024]); // 1024 + 0.25 rounds to 1024 in f16 (spacing 1)
    const o2 = readNpy(path.join(tmp, 'out', 'output-2.npy'));
    expect(o2.header).toMatch(/'descr': '\|i1'/);
    expect(Array.from(new Int8Array(o2.body.buffer.slice(o2.body.byteOffset, o2.body.byteOffset + 5)))).toEqual([2, -1, 4, 96, 101]);
    const o3 = readNpy(path.join(tmp, 'out', 'output-3.npy'));
    expect(o3.header).toMatch(/'descr': '\|b1'/);
    expect(Array.from(o3.body)).toEqual([1, 1, 1, 0, 0]);
    expect(readNpy(path.join(tmp, 'out', 'output-5.npy')).body.readFloatLE(0)).toBe(4);
  });

  test.each([
    [['run', fixture('add'), '--input', 'a'], 2, /--input "a" must be name=file.npy or name=v1,v2/],
    [['run', fixture('add'), '--input', 'zz=1'], 2, /no source named "zz" \(its sources: a, b\)/],
    [['run', fixture('add'), '--input', 'a=1,x,3,4'], 2, /"x" is not a number/],
    [['run', fixture('add'), '--input', 'a=1,2,3', '--input', 'b=1,2,3,4'], 2, /--input a: 3 values given, source "a" \(f32 \[4\]\) takes 4/],
    [['run', fixture('add'), '--input', 'a=1,2,3,4'], 2, /run needs --input for every INPUT source; missing: b \(input, f32 \[4\]\)/],
    // Parameters are given as inputs are: the message says so rather than stopping at "unbound".
    [['run', fixture('dtypes'), '--input', 'x=1,2,3,4,5,6', '--input', 'h=1,2,3,4', '--input', 'q=1,2,3,4,5', '--input', 'm=true,false,true,false,true'], 2, /run needs values for every BOUND source, parameters too; missing: wt \(parameter, f32 \[2, 3\]\), wp .* mb \(parameter, bool \[3\]\)\. Give each with --input, as inputs are given: --input wt=wt\.npy/],
    // Past the type's largest finite value a number would silently become an infinity.
    [['run', fixture('add'), '--input', 'a=1e400,1,1,1', '--input', 'b=1,1,1,1'], 2, /--input a: 1e400 is beyond f32's largest finite value \(3\.4028234663852886e\+38\); write inf or -inf for an infinity/],
    [['run', fixture('add'), '--input', 'a=3.5e38,1,1,1', '--input', 'b=1,1,1,1'], 2, /--input a: 3\.5e38 is beyond f32's largest finite value/],
    [['run', fixture('dtypes'), '--input', 'h=65520,1,1,1'], 2, /--input h: 65520 is beyond f16's largest finite value \(65504\)/],
    [['inpect', 'x'], 2, /unknown command "inpect" \(did you mean "inspect"\?\) \(inspect, run, bench, serve, build-from-source\)/],
    [['serve', 'models/', '--help'], 0, /^$/],
    [['serve', fixture('dtypes'), '--port', '0'], 1, /source "wt" is a BOUND PARAMETER and config "parameters" gives it no file\. A lone artifact has no config: serve it from a model directory, dtypes\/1\/model\.so .*"wt":"wt\.npy","wp":"wp\.npy","wn":"wn\.npy","hb":"hb\.npy","qb":"qb\.npy","mb":"mb\.npy"/],
    [['run', '--help'], 0, /^$/],
    [['run', fixture('add'), '--input', 'a=missing.npy'], 2, /cannot read missing.npy: ENOENT/],
    [['run', fixture('add'), '--input'], 2, /--input needs a value/],
    [['run', fixture('add'), '--frob'], 2, /run does not take "--frob"/],
    [['inspect'], 2, /inspect needs an artifact path/],
    [['inspect', fixture('malformed-null_name')], 1, /ERR_ZGC_INVALID_ARTIFACT/],
    [['bench', fixture('add'), '--runs', '0'], 2, /--runs must be a positive integer, got "0"/],
    [['launch', 'x'], 2, /unknown command "launch"/],
  ])('bad arguments: %j exit %i with a message', (args, status, message) => {
    const r = cli(...args);
    expect(r.status).toBe(status);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  test('a .npy of the wrong dtype or shape is refused, naming both', () => {
    fs.writeFileSync(path.join(tmp, 'f8.npy'), npy('<f8', [4], new Float64Array(4)));
    fs.writeFileSync(path.join(tmp, 'i8.npy'), npy('|i1', [4], new Int8Array(4)));
    fs.writeFileSync(path.join(tmp, 'f4x2.npy'), npy('<f4', [2, 2], new Float32Array(4)));
    expect(cli('run', fixture('add'), '--input', `a=${path.join(tmp, 'f8.npy')}`).stderr).toMatch(/dtype '<f8' is not one of/);
    expect(cli('run', fixture('add'), '--input', `a=${path.join(tmp, 'i8.npy')}`).stderr).toMatch(/holds i8, source "a" is f32/);
    expect(cli('run', fixture('add'), '--input', `a=${path.join(tmp, 'f4x2.npy')}`).stderr).toMatch(/has shape \(2, 2\), source "a" has shape \(4\)/);
  });
});

describe('zgc-runtime bench', () => {
  test('times runs with random inputs and draws a progress bar', () => {
    const r = cli('bench', fixture('matmul'), '--seconds', '1.5', '--progress');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^\d+ runs: median [\d.]+ (ms|µs), p90 [\d.]+ (ms|µs), min [\d.]+ (ms|µs), \d+ runs\/s$/m);
    expect(r.stderr).toMatch(/\[#+\.*\]\s+\d+%/);
    expect(r.stderr).toMatch(/\[#{30}\] 100%/);
  });
});

describe('zgc-runtime build-from-source', () => {
  test('where the addon loads it builds nothing; it takes only --force; help lists it', () => {
    const r = cli('build-from-source');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('the native addon already loads here; nothing to build');
    const bad = cli('build-from-source', '--release');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('build-from-source does not take "--release" (it takes --force)');
    expect(cli('--help').stdout).toMatch(/build-from-source \[--force\]\s+build the native addon with cargo/);
  });
});
