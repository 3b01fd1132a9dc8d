'use strict';

// One table of error codes (crates/core/src/error.rs: CODES): the types, the docs and every
// code lib/ raises agree with it.
const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { errorCodes, fromNative, ZgcError } = require('../../lib/errors');

const root = path.join(testDir, '..');
const read = (f) => fs.readFileSync(path.join(root, f), 'utf8');
const codesIn = (text) => new Set(text.match(/ERR_ZGC_[A-Z_]+/g) || []);

function jsFiles(dir) {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const f = path.join(dir, e.name);
    if (e.isDirectory()) return jsFiles(f);
    return /\.(js|mjs)$/.test(e.name) ? [f] : [];
  });
}

describe('one table of error codes', () => {
  const table = errorCodes();

  test('the table lists each code once', () => {
    expect(table.length).toBeGreaterThan(30);
    expect(new Set(table).size).toBe(table.length);
  });

  test("index.d.ts's ZgcErrorCode is exactly the table", () => {
    const d = read('index.d.ts');
    const union = d.slice(d.indexOf('export type ZgcErrorCode ='), d.indexOf('export declare class ZgcError'));
    const members = [...union.matchAll(/\| '(ERR_ZGC_[A-Z_]+)'/g)].map((m) => m[1]);
    expect(members.sort()).toEqual([...table].sort());
  });

  test("docs/api.md's error table names every code, and no other", () => {
    const api = read('docs/api.md');
    const rows = api.slice(api.indexOf('| code | when |'), api.indexOf('Arguments of the wrong JavaScript shape'));
    const named = [...codesIn(rows)].filter((c) => c !== 'ERR_ZGC_');
    expect(named.sort()).toEqual([...table].sort());
  });

  test('every code lib/ and the CLI raise is in the table', () => {
    const raised = new Set();
    for (const f of [...jsFiles('lib'), ...jsFiles('bin')]) for (const c of codesIn(read(f))) raised.add(c);
    expect(raised.size).toBeGreaterThan(10);
    for (const c of raised) expect(table).toContain(c);
  });
});

describe("fromNative: the addon's errors become ZgcErrors with the detail it set", () => {
  test('code, message and each detail property the native error has, and no other', () => {
    const native = Object.assign(new Error('zgc_runtime_run returned MISSING_BINDING (status 8)'), { code: 'ERR_ZGC_MISSING_BINDING', status: 8, operation: 'zgc_runtime_run' });
    const err = fromNative(native);
    expect(err).toBeInstanceOf(ZgcError);
    expect({ ...err }).toEqual({ name: 'ZgcError', code: 'ERR_ZGC_MISSING_BINDING', status: 8, operation: 'zgc_runtime_run' });
    expect(err.message).toBe(native.message);
    expect('source' in err).toBe(false);
    const sized = fromNative(Object.assign(new Error('m'), { code: 'ERR_ZGC_SIZE', source: 'a' }));
    expect({ ...sized }).toEqual({ name: 'ZgcError', code: 'ERR_ZGC_SIZE', source: 'a' });
  });

  test("anything else passes through as it is: another library's code, no code, not an error", () => {
    for (const other of [Object.assign(new TypeError('x'), { code: 'ERR_INVALID_ARG_TYPE' }), new RangeError('y'), Object.assign(new Error('z'), { code: 7 }), null, undefined]) {
      expect(fromNative(other)).toBe(other);
    }
  });
});

describe('one table of PTO error codes (crates/core/src/pto/error.rs: CODES)', () => {
  const table = require('../../lib/native').ptoErrorCodes();
  const ptoCodesIn = (text) => new Set(text.match(/ERR_PTO_[A-Z_]+/g) || []);

  test("pto.d.ts's PtoErrorCode is exactly the table", () => {
    const d = read('lib/pto.d.ts');
    const union = d.slice(d.indexOf('export type PtoErrorCode ='), d.indexOf('export declare class PtoError'));
    const members = [...union.matchAll(/\| '(ERR_PTO_[A-Z_]+)'/g)].map((m) => m[1]);
    expect(members.sort()).toEqual([...table].sort());
  });

  test('every PTO code lib/ and the docs name is in the table', () => {
    const named = new Set([...ptoCodesIn(read('lib/pto.js')), ...ptoCodesIn(read('docs/pto.md')), ...ptoCodesIn(read('docs/pto-host-api.md'))]);
    expect(named.size).toBeGreaterThan(3);
    for (const c of named) expect(table).toContain(c);
  });
});
