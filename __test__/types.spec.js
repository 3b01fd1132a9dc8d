'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

describe('package entry points', () => {
  test('index.d.ts compiles under strict in a consumer and rejects misuse', () => {
    // Resolve 'zgc-runtime' to this package, as a consumer's node_modules would.
    const dir = path.join(__dirname, 'types');
    const link = path.join(dir, 'node_modules', 'zgc-runtime');
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.rmSync(link, { recursive: true, force: true });
    fs.symlinkSync(path.join(__dirname, '..'), link, 'dir');
    try {
      execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    } catch (err) {
      throw new Error(`tsc failed:\n${err.stdout}${err.stderr}`);
    } finally {
      fs.rmSync(path.join(dir, 'node_modules'), { recursive: true, force: true });
    }
  });

  test('ESM import and CommonJS require of the package name give the same API', () => {
    // A child Node resolves the package by its own name through "exports", as users do.
    const script = `
      import { createRequire } from 'node:module';
      import * as esm from 'zgc-runtime';
      const cjs = createRequire(import.meta.url)('zgc-runtime');
      const same = esm.load === cjs.load && esm.ZgcError === cjs.ZgcError && esm.default === cjs;
      const rt = esm.load(${JSON.stringify(require('./fixtures/manifest').fixture('add'))});
      const sum = Array.from(rt.run({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] })[0].data);
      console.log(JSON.stringify({ same, abi: esm.ABI_VERSION, sum, names: Object.keys(esm).sort() }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: path.join(__dirname, '..'), encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ same: true, abi: 1, sum: [2, 3, 4, 5], names: ['ABI_VERSION', 'Pool', 'Runtime', 'ZgcError', 'createPool', 'default', 'load', 'pto'] });
  });
});
