'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');

describe('package entry points', () => {
  test('index.d.ts compiles under strict in a consumer and rejects misuse', () => {
    // Resolve 'zgc-runtime' to this package, as a consumer's node_modules would.
    const dir = path.join(testDir, 'types');
    const link = path.join(dir, 'node_modules', 'zgc-runtime');
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.rmSync(link, { recursive: true, force: true });
    fs.symlinkSync(path.join(testDir, '..'), link, 'dir');
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
      const rt = esm.load(${JSON.stringify(require('../fixtures/manifest').fixture('add'))});
      const sum = Array.from(rt.run({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] })[0].data);
      console.log(JSON.stringify({ same, abi: esm.ABI_VERSION, sum, names: Object.keys(esm).sort() }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: path.join(testDir, '..'), encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ same: true, abi: 1, sum: [2, 3, 4, 5], names: ['ABI_VERSION', 'Batcher', 'Pool', 'Runtime', 'Sequence', 'ZgcError', 'createBatcher', 'createPool', 'default', 'load', 'pto'] });
  });

  test('ABI_VERSION is the addon\'s (the core\'s abi.rs), not a copy', () => {
    const rs = fs.readFileSync(path.join(testDir, '..', 'crates', 'core', 'src', 'abi.rs'), 'utf8');
    expect(require('../..').ABI_VERSION).toBe(Number(/pub const ABI_VERSION: u32 = (\d+);/.exec(rs)[1]));
    expect(fs.readFileSync(path.join(testDir, '..', 'lib', 'index.js'), 'utf8')).not.toMatch(/ABI_VERSION: \d/);
  });

  test('the Jest matchers import from ESM as they require from CommonJS', () => {
    const script = `
      import { createRequire } from 'node:module';
      import matchers, { toMatchTensor } from 'zgc-runtime/jest';
      const cjs = createRequire(import.meta.url)('zgc-runtime/jest');
      console.log(JSON.stringify({ same: matchers === cjs && toMatchTensor === cjs.toMatchTensor, kind: typeof toMatchTensor }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: path.join(testDir, '..'), encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ same: true, kind: 'function' });
  });
});

describe('the types need neither @types/node nor lib esnext.disposable', () => {
  test('index.d.ts, pto.d.ts and jest.d.ts compile strict under lib ES2022 alone', () => {
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'zgc-types-'));
    try {
      fs.mkdirSync(path.join(dir, 'node_modules'));
      fs.symlinkSync(path.join(testDir, '..'), path.join(dir, 'node_modules', 'zgc-runtime'), 'dir');
      fs.writeFileSync(
        path.join(dir, 'main.ts'),
        [
          "import { load, createPool, ZgcError, type Tensor } from 'zgc-runtime';",
          "import * as pto from 'zgc-runtime/pto';",
          "import matchers from 'zgc-runtime/jest';",
          "export function sum(a: number[], b: number[]): Tensor {",
          "  using rt = load('add.so');",
          '  return rt.run({ a, b })[0];',
          '}',
          "export async function pooled(): Promise<string | undefined> {",
          "  await using pool = createPool('add.so', { size: 1 });",
          '  try {',
          "    await pool.run({ a: [1] });",
          '  } catch (err) {',
          '    if (err instanceof ZgcError) return err.code;',
          '  }',
          '  return typeof pto.load + typeof matchers.toMatchTensor;',
          '}',
        ].join('\n'),
      );
      const config = { compilerOptions: { strict: true, noEmit: true, target: 'ES2022', lib: ['ES2022'], module: 'Node16', moduleResolution: 'Node16', types: [] }, files: ['main.ts'] };
      fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(config));
      try {
        execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', dir], { encoding: 'utf8' });
      } catch (err) {
        throw new Error(`tsc failed:\n${err.stdout}${err.stderr}`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
