'use strict';

// What a user's first minutes see: `npm pack` of the package and of its linux-x64-gnu
// platform package (laid out by `napi create-npm-dirs`, packed by scripts/pack.js), installed into
// fresh projects (from the npm cache where it can: --prefer-offline; prom-client's metadata is not in a
// fresh cache after `npm ci`), then used through require, import, the CLI and the types.
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { fixture } = require('../helpers');

const root = path.join(testDir, '..');
const { version } = require('../../package.json');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-pack-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const npm = (args, cwd, env = {}) => execFileSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, ...env, npm_config_yes: 'true' }, stdio: ['ignore', 'pipe', 'pipe'] });
let tarballs;

beforeAll(() => {
  const out = execFileSync(process.execPath, [path.join(root, 'scripts', 'pack.js'), tmp], { encoding: 'utf8' });
  const packed = JSON.parse(out.trim().split('\n').pop());
  tarballs = { main: packed.main, platform: packed.platforms['linux-x64-gnu'] };
}, 120000);

function project(name) {
  const dir = path.join(tmp, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'commonjs' }));
  return dir;
}

describe('npm pack, then install from the tarballs with no network', () => {
  test('the main tarball holds the JS, types, CLI and Rust sources but no binary; the platform one holds the binary', () => {
    const list = (t) => execFileSync('tar', ['tzf', t], { encoding: 'utf8' }).split('\n').filter(Boolean);
    const main = list(tarballs.main);
    for (const f of ['lib/index.js', 'lib/index.mjs', 'lib/pto.d.ts', 'lib/pto.mjs', 'lib/serve/index.js', 'lib/serve/index.mjs', 'lib/serve/index.d.ts', 'lib/client/index.js', 'lib/client/index.mjs', 'lib/client/index.d.ts', 'lib/protocol/pb.js', 'lib/jest.d.ts', 'lib/jest.mjs', 'bin/zgc-runtime.js', 'lib/native.js', 'Cargo.toml', 'Cargo.lock', 'crates/core/src/lib.rs', 'src/lib.rs', 'build.rs', 'index.d.ts', 'crates/host/src/main.rs']) expect(main).toContain(`package/${f}`);
    expect(main.filter((f) => f.endsWith('.node'))).toEqual([]);
    expect(main.some((f) => f.includes('__test__'))).toBe(false);
    // At the package's root only its specified top level: the manifests, the binding's build
    // script, the types and the README (the JavaScript is in lib/, the Rust in src/ and crates/).
    const atRoot = main.filter((f) => f.split('/').length === 2).map((f) => f.slice('package/'.length));
    expect(atRoot.sort()).toEqual(['Cargo.lock', 'Cargo.toml', 'README.md', 'build.rs', 'index.d.ts', 'package.json']);
    expect(list(tarballs.platform)).toEqual(expect.arrayContaining(['package/zgc-runtime.linux-x64-gnu.node', 'package/package.json']));
    const manifest = JSON.parse(execFileSync('tar', ['xzOf', tarballs.main, 'package/package.json'], { encoding: 'utf8' }));
    expect(manifest.optionalDependencies).toEqual({
      'zgc-runtime-linux-x64-gnu': version,
      'zgc-runtime-linux-arm64-gnu': version,
      'zgc-runtime-linux-x64-musl': version,
      'zgc-runtime-linux-arm64-musl': version,
      'zgc-runtime-win32-x64-gnu': version,
      'zgc-runtime-darwin-x64': version,
      'zgc-runtime-darwin-arm64': version,
    });
    expect(manifest.exports['.']).toEqual({ types: './index.d.ts', import: './lib/index.mjs', require: './lib/index.js' });
    expect(manifest.engines.node).toMatch(/>=\s*20/);
  });

  test('the package stands alone: it carries the contracts in docs/ and points at no file outside itself', () => {
    const list = execFileSync('tar', ['tzf', tarballs.main], { encoding: 'utf8' }).split('\n').filter(Boolean);
    expect(list).toEqual(expect.arrayContaining(['package/docs/abi.md', 'package/docs/pto-host-api.md']));
    const outside = ['..', 'shared'].join('/'); // spelled apart so that this file is no match
    const text = list.filter((f) => /\.(js|mjs|ts|md|rs|c|h|json|toml)$/.test(f)).map((f) => [f, execFileSync('tar', ['xzOf', tarballs.main, f], { encoding: 'utf8' })]);
    expect(text.filter(([, body]) => body.includes(outside)).map(([f]) => f)).toEqual([]);
  });

  test('the package has no lifecycle script: npm runs nothing of ours and prints no install-script warning', () => {
    const manifest = JSON.parse(execFileSync('tar', ['xzOf', tarballs.main, 'package/package.json'], { encoding: 'utf8' }));
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) expect(manifest.scripts || {}).not.toHaveProperty(hook);
    const app = project('quiet');
    const r = spawnSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarballs.main, tarballs.platform], { cwd: app, encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout + r.stderr).not.toMatch(/install.scripts|allowScripts/i);
  }, 120000);

  test('with the platform package: require, import, the pto subpath, the CLI and strict types all work', () => {
    const app = project('app');
    npm(['install', '--prefer-offline', '--no-audit', '--no-fund', tarballs.main, tarballs.platform], app);
    const add = fixture('add');
    const cjs = execFileSync(process.execPath, ['-e', `const { load } = require('zgc-runtime'); const rt = load(${JSON.stringify(add)}); console.log(Array.from(rt.run({ a: [1, 2, 3, 4], b: [10, 20, 30, 40] })[0].data).join())`], { cwd: app, encoding: 'utf8' });
    expect(cjs.trim()).toBe('11,22,33,44');
    const esm = execFileSync(process.execPath, ['--input-type=module', '-e', `import { load } from 'zgc-runtime'; import { load as ptoLoad } from 'zgc-runtime/pto'; const rt = load(${JSON.stringify(add)}); console.log(typeof ptoLoad, Array.from(rt.run({ a: [1, 1, 1, 1], b: [2, 2, 2, 2] })[0].data).join())`], { cwd: app, encoding: 'utf8' });
    expect(esm.trim()).toBe('function 3,3,3,3');
    // The platform package carries the host program of isolated instances, executable.
    const isolated = execFileSync(
      process.execPath,
      ['-e', `const { load } = require('zgc-runtime'); const rt = load(${JSON.stringify(add)}, { isolate: 'process' }); rt.runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] }).then((o) => { console.log(Array.from(o[0].data).join(), rt.pid > 0); rt.close(); })`],
      { cwd: app, encoding: 'utf8', env: { ...process.env, ZGC_RUNTIME_HOST: '' } },
    );
    expect(isolated.trim()).toBe('2,3,4,5 true');
    const cli = execFileSync(path.join(app, 'node_modules', '.bin', 'zgc-runtime'), ['inspect', add, '--json'], { cwd: app, encoding: 'utf8' });
    expect(JSON.parse(cli).sources.map((s) => s.name)).toEqual(['a', 'b']);
    // The consumer's own strict TypeScript build against the installed types, every entry
    // point, resolved as Node does (node16/nodenext) and as bundlers do.
    fs.writeFileSync(
      path.join(app, 'use.ts'),
      [
        "import { load, Tensor } from 'zgc-runtime';",
        "import { load as loadPto } from 'zgc-runtime/pto';",
        "import { createServer } from 'zgc-runtime/serve';",
        "import matchers from 'zgc-runtime/jest';",
        "const out: Tensor[] = load('m.so').run({ a: new Float32Array(4) });",
        "const lib = loadPto('p.so');",
        "const server = createServer({ models: 'models' });",
        'console.log(out, lib.path, server, Object.keys(matchers));',
        '',
      ].join('\n'),
    );
    const tsc = (module, resolution) => spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '--noEmit', '--strict', '--module', module, '--moduleResolution', resolution, '--target', 'es2022', '--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types'), 'use.ts'], { cwd: app, encoding: 'utf8' });
    for (const [module, resolution] of [['node16', 'node16'], ['nodenext', 'nodenext'], ['esnext', 'bundler']]) {
      const r = tsc(module, resolution);
      expect({ module, resolution, out: r.stdout + r.stderr }).toEqual({ module, resolution, out: '' });
      expect(r.status).toBe(0);
    }
    // The other entry points load, by require and by import.
    const subpaths = execFileSync(process.execPath, ['--input-type=module', '-e', "import { createServer } from 'zgc-runtime/serve'; import matchers from 'zgc-runtime/jest'; import { createRequire } from 'node:module'; const r = createRequire(import.meta.url); console.log(typeof createServer, typeof r('zgc-runtime/serve').createHandler, typeof matchers.toMatchTensor, typeof r('zgc-runtime/jest').toMatchTensor)"], { cwd: app, encoding: 'utf8' });
    expect(subpaths.trim()).toBe('function function function function');
  }, 120000);

  test('without it: require says which package is missing and the commands that fix it', () => {
    const app = project('no-optional');
    npm(['install', '--prefer-offline', '--no-audit', '--no-fund', '--omit=optional', tarballs.main], app);
    const r = spawnSync(process.execPath, ['-e', "require('zgc-runtime')"], { cwd: app, encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('ERR_ZGC_NATIVE_MISSING');
    expect(r.stderr).toContain(`optional package zgc-runtime-linux-x64-gnu@${version}, which is not installed`);
    expect(r.stderr).toContain('cannot load the native addon for linux-x64-gnu (linux x64, Node ');
    expect(r.stderr).toContain('Prebuilt packages: zgc-runtime-linux-x64-gnu, zgc-runtime-linux-arm64-gnu, zgc-runtime-linux-x64-musl, zgc-runtime-linux-arm64-musl, zgc-runtime-win32-x64-gnu, zgc-runtime-darwin-x64, zgc-runtime-darwin-arm64.');
    expect(r.stderr).toContain('Fix: build it from the bundled sources (needs Rust\'s cargo and a C compiler): npx zgc-runtime build-from-source');
    // Unpublished: no fix may be an `npm install` of a name the registry does not have.
    expect(r.stderr).not.toMatch(/npm install zgc-runtime-linux-x64-gnu@/);
    expect(r.stderr).toContain(`npm install zgc-runtime-${version}.tgz zgc-runtime-linux-x64-gnu-${version}.tgz`);
  }, 120000);

  test('without it but with cargo: `npx zgc-runtime build-from-source` builds the addon from the bundled sources', () => {
    const app = project('from-source');
    npm(['install', '--prefer-offline', '--no-audit', '--no-fund', '--omit=optional', tarballs.main], app);
    expect(fs.existsSync(path.join(app, 'node_modules', 'zgc-runtime-linux-x64-gnu'))).toBe(false);
    const bin = path.join(app, 'node_modules', '.bin', 'zgc-runtime');
    const built = spawnSync(bin, ['build-from-source'], { cwd: app, encoding: 'utf8' });
    expect(built.stdout).toContain('addon built from source');
    expect(built.status).toBe(0);
    const pkg = path.join(app, 'node_modules', 'zgc-runtime');
    expect(fs.existsSync(path.join(pkg, 'zgc-runtime.linux-x64-gnu.node'))).toBe(true);
    // and the host program of isolated instances, next to it
    fs.accessSync(path.join(pkg, 'zgc-runtime-host.linux-x64-gnu'), fs.constants.X_OK);
    expect(fs.existsSync(path.join(pkg, 'target'))).toBe(false); // the build's scratch is gone
    const out = execFileSync(process.execPath, ['-e', `const { load } = require('zgc-runtime'); console.log(load(${JSON.stringify(fixture('add'))}).run({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] })[0].data.join())`], { cwd: app, encoding: 'utf8' });
    expect(out.trim()).toBe('2,3,4,5');
    // Once it loads, the command says so and builds nothing.
    const again = spawnSync(bin, ['build-from-source'], { cwd: app, encoding: 'utf8' });
    expect(again.status).toBe(0);
    expect(again.stdout).toContain('already loads here; nothing to build');
  }, 600000);
});
