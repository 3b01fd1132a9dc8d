'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { load, ZgcError } = require('../..');
const { fixture, malformed } = require('../fixtures/manifest');
const { platformName } = require('../../lib/platform');

const MUSL = platformName().endsWith('-musl');
const MEMFD = process.platform === 'linux';

/**
 * Libraries loaded from bytes and still loaded: their memfd mappings on Linux, their temporary
 * files elsewhere (named by the process id, so other processes' do not count).
 */
function bytesLibraries() {
  if (MEMFD) {
    // One line per mapped segment: a library is its memfd's inode (the fifth field).
    const lines = fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.includes('memfd:zgc-artifact'));
    return new Set(lines.map((l) => l.split(/\s+/)[4])).size;
  }
  return fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith(`zgc-artifact-${process.pid}-`)).length;
}

describe('load() and what a Runtime tells about its artifact', () => {
  test('identity, sizes and the ABI version come from the artifact', () => {
    const rt = load(fixture('add'));
    expect(rt.path).toBe(fs.realpathSync(fixture('add')));
    expect(rt.abiVersion).toBe(1);
    expect(rt.fingerprint).toBe(0xfedcba9876543210n); // FINGERPRINT in add.c, beyond 2^53
    expect(rt.fingerprintHex).toBe('0xfedcba9876543210');
    expect(rt.runtimeAlignment).toBe(64);
    // add.c: two owned f32[4] sources and one output, 64-byte rounded, after the header.
    expect(rt.mutableBytes).toBe(3 * 64);
    expect(rt.runtimeSize).toBeGreaterThan(rt.mutableBytes);
    rt.close();
  });

  test('fingerprintHex is 0x and 16 lowercase hex digits even with leading zeros', () => {
    const rt = load(fixture('dtypes'));
    expect(rt.fingerprintHex).toBe('0x0123456789abcdef');
    expect(rt.fingerprint).toBe(0x0123456789abcdefn);
    rt.close();
  });

  test('sources and outputs describe every descriptor field, frozen', () => {
    const rt = load(fixture('dtypes'));
    const byName = Object.fromEntries(rt.sources.map((s) => [s.name, s]));
    expect(rt.sources.map((s) => s.name)).toEqual(['x', 'h', 'q', 'm', 'wt', 'wp', 'wn', 'hb', 'qb', 'mb', 's', 'k', 'g']);
    expect(byName.x).toEqual({
      key: 10, name: 'x', kind: 'input', binding: 'owned', dtype: 'f32',
      shape: [2, 3], strides: [3, 1], offset: 0, elementCount: 6, byteCount: 24,
    });
    expect(byName.wp).toMatchObject({ kind: 'parameter', binding: 'bound', shape: [2, 3], strides: [4, 1], offset: 1, elementCount: 9, byteCount: 24 });
    expect(byName.wn).toMatchObject({ strides: [-3, -1], offset: 5, elementCount: 6 });
    expect(byName.hb).toMatchObject({ dtype: 'f16', strides: [2], elementCount: 6, byteCount: 6 });
    expect(byName.mb).toMatchObject({ dtype: 'bool', strides: [-1], offset: 2 });
    expect(byName.s).toMatchObject({ kind: 'state', shape: [], strides: [], elementCount: 1, byteCount: 4 });
    expect(byName.k).toMatchObject({ kind: 'constant', binding: 'embedded' });
    expect(rt.outputs[1]).toEqual({ dtype: 'f16', shape: [4], elementCount: 4, byteCount: 8 });
    expect(rt.outputs[4]).toEqual({ dtype: 'f32', shape: [], elementCount: 1, byteCount: 4 });
    expect(Object.isFrozen(rt.sources)).toBe(true);
    expect(Object.isFrozen(rt.sources[0])).toBe(true);
    expect(Object.isFrozen(rt.sources[0].shape)).toBe(true);
    expect(Object.isFrozen(rt.outputs[0].shape)).toBe(true);
    rt.close();
  });

  test('a path is resolved like the Python runtime: ~ expanded, made absolute, symlinks followed', () => {
    const dir = fs.mkdtempSync(path.join(os.homedir(), '.zgc-test-'));
    try {
      const link = path.join(dir, 'linked.so');
      // Making a symlink on Windows takes a privilege (and Wine makes none): a copy stands in there.
      const windows = process.platform === 'win32';
      if (windows) fs.copyFileSync(fixture('add'), link);
      else fs.symlinkSync(fixture('add'), link);
      const viaHome = load(path.join('~', path.relative(os.homedir(), link)));
      expect(viaHome.path).toBe(fs.realpathSync(windows ? link : fixture('add')));
      viaHome.close();
      const relative = load(path.relative(process.cwd(), fixture('add')));
      expect(relative.path).toBe(fs.realpathSync(fixture('add')));
      relative.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("'~' alone is the home directory and '' the working directory, as Python's Path.resolve() has them", () => {
    // Both are directories: dlopen refuses them, and the message shows the path it was given.
    const refused = (dir) => expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: expect.stringContaining(`cannot load artifact ${fs.realpathSync(dir)}:`) });
    expect(() => load('~')).toThrow(refused(os.homedir()));
    expect(() => load('')).toThrow(refused(process.cwd()));
  });

  test('bytes load without leaving a file behind, each load with its own copy', () => {
    const bytes = fs.readFileSync(fixture('add'));
    const tmp = os.tmpdir();
    const before = new Set(fs.readdirSync(tmp));
    const loaded = bytesLibraries();
    const a = load(bytes);
    const b = load(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    expect(a.path).toBeNull();
    expect(a.fingerprint).toBe(0xfedcba9876543210n);
    expect(Array.from(a.run({ a: [1, 2, 3, 4], b: [4, 3, 2, 1] })[0].data)).toEqual([5, 5, 5, 5]);
    expect(Array.from(b.run({ a: [1, 1, 1, 1], b: [1, 1, 1, 1] })[0].data)).toEqual([2, 2, 2, 2]);
    // Linux maps each from an anonymous memfd, never a file on disk; elsewhere each has a
    // temporary file of its own while it is loaded.
    expect(bytesLibraries()).toBe(loaded + 2);
    if (MEMFD) expect(new Set(fs.readdirSync(tmp))).toEqual(before);
    a.close();
    b.close();
    // musl's dlclose unloads nothing: its mappings stay until exit.
    if (!MUSL) expect(bytesLibraries()).toBe(loaded);
    expect(new Set(fs.readdirSync(tmp))).toEqual(before);
  });

  test('bytes loaded one after another are each their own library (memfd names are not reused)', () => {
    // Regression: dlopen matches libraries by name, and a memfd's name is /proc/self/fd/N;
    // a closed and reused N used to return the library loaded before.
    const names = ['add', 'dtypes', 'add', 'status', 'dtypes'];
    const want = { add: 0xfedcba9876543210n, dtypes: 0x0123456789abcdefn, status: 0x0123456789abcdefn };
    for (const name of names) {
      const rt = load(fs.readFileSync(fixture(name)));
      expect(rt.fingerprint).toBe(want[name]);
      expect(rt.sources[0].name).toBe({ add: 'a', dtypes: 'x', status: 'run_status' }[name]);
      rt.close();
    }
  });

  test('arguments that are neither a path nor bytes are a TypeError', () => {
    for (const bad of [undefined, null, 42, {}, new Float32Array(4)]) expect(() => load(bad)).toThrow(TypeError);
    const given = (what) => new RegExp(`^load\\(\\) takes a path string or a Uint8Array of library bytes, got ${what}$`);
    expect(() => load(null)).toThrow(given('null'));
    expect(() => load(42)).toThrow(given('number'));
    expect(() => load(undefined)).toThrow(given('undefined'));
    expect(() => load(fixture('add'), null)).toThrow(new TypeError('load options must be an object'));
    expect(() => load(fixture('add'), { f16: 'half' })).toThrow(/f16 must be 'float32', 'bits' or 'float16', got "half"/);
    expect(() => load(fixture('add'), 'bits')).toThrow(TypeError);
  });

  test('a missing file and a file that is not a library fail with ERR_ZGC_LOAD and the reason', () => {
    const missing = path.join(os.tmpdir(), 'no-such-artifact.so');
    // Windows' loader says "module not found" for a missing dependency too: the file's own absence is said after it.
    expect(() => load(missing)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: expect.stringMatching(/no-such-artifact\.so.*(No such file|no file exists at this path)/) }));
    const notALibrary = MEMFD ? /not-a-library\.so: dlopen failed: .*(invalid ELF header|too short|Exec format error)/ : /not-a-library\.dll: LoadLibraryExW failed: .*\(os error 193\)/;
    expect(() => load(fixture('not-a-library'))).toThrow(expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: expect.stringMatching(notALibrary) }));
    expect(() => load(Buffer.from('not ELF either'))).toThrow(expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: expect.stringMatching(/^cannot load artifact <14 bytes>/) }));
  });

  test("another platform's artifact says what it is and what this platform takes", () => {
    const bytes = fs.readFileSync(fixture('add'));
    const pe = bytes.toString('latin1', 0, 2) === 'MZ';
    // The same library claiming the other CPU: ELF's e_machine (62 x86-64, 183 aarch64), or
    // PE's Machine, 4 bytes into the header the word at 0x3c points to (0x8664, 0xaa64).
    const at = pe ? bytes.readUInt32LE(0x3c) + 4 : 18;
    const [x64, arm64] = pe ? [0x8664, 0xaa64] : [62, 183];
    const [other, otherName, hereName] = bytes.readUInt16LE(at) === x64 ? [arm64, 'aarch64', 'x86-64'] : [x64, 'x86-64', 'aarch64'];
    const [format, ext] = pe ? ['PE', '.dll'] : ['ELF', '.so'];
    const foreign = Buffer.from(bytes);
    foreign.writeUInt16LE(other, at);
    const file = path.join(os.tmpdir(), `zgc-foreign-${process.pid}${ext}`);
    fs.writeFileSync(file, foreign);
    try {
      const libc = pe ? null : MUSL ? 'musl' : 'glibc';
      // Refused before dlopen (musl's would map it and run its code).
      const want = `cannot load artifact ${file}: it is an ${otherName} ${format} library, and this platform loads an ${hereName} ${format} library (${ext}): build the artifact for this platform`;
      expect(() => load(file)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: want }));
      // From bytes too, named by their size.
      expect(() => load(foreign)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: expect.stringContaining(`<${foreign.length} bytes>: it is an ${otherName} ${format} library`) }));
      // The other C library: the library's DT_NEEDED names musl's libc.so instead of glibc's libc.so.6.
      if (libc === 'glibc') {
        const at = bytes.indexOf(Buffer.from('libc.so.6\0'));
        expect(at).toBeGreaterThan(0);
        const musl = Buffer.from(bytes);
        musl.write('libc.so\0\0\0', at, 'latin1');
        fs.writeFileSync(file, musl);
        // Told once dlopen has failed, with the loader's words after.
        expect(() => load(file)).toThrow(
          expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: expect.stringContaining(`it is an ${hereName} ELF library linked against musl, and this platform loads an ${hereName} ELF library linked against glibc (.so): build the artifact for this platform (the dynamic loader said: `) }),
        );
      }
      // (musl's loader takes any libc.so.N for itself, so a glibc artifact that uses only what
      // musl has loads there: nothing to refuse.)
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  test('a library of the other format says what it is: a Windows DLL on Linux, an ELF library on Windows', () => {
    const cpu = process.arch === 'arm64' ? 'aarch64' : 'x86-64';
    const pe = Buffer.alloc(0x100);
    pe.write('MZ', 0, 'latin1');
    pe.writeUInt32LE(0x80, 0x3c);
    pe.write('PE\0\0', 0x80, 'latin1');
    pe.writeUInt16LE(process.arch === 'arm64' ? 0xaa64 : 0x8664, 0x84);
    const elf = Buffer.alloc(64);
    elf.write('\x7fELF', 0, 'latin1');
    elf[4] = 2; // 64-bit
    elf[5] = 1; // little-endian
    elf.writeUInt16LE(3, 16); // a shared object
    elf.writeUInt16LE(process.arch === 'arm64' ? 183 : 62, 18);
    const [bytes, found, here, ext] = process.platform === 'win32' ? [elf, 'ELF', 'PE', '.dll'] : [pe, 'PE', 'ELF', '.so'];
    const file = path.join(os.tmpdir(), `zgc-other-format-${process.pid}${ext}`);
    fs.writeFileSync(file, bytes);
    try {
      expect(() => load(file)).toThrow(
        expect.objectContaining({ code: 'ERR_ZGC_LOAD', message: `cannot load artifact ${file}: it is an ${cpu} ${found} library, and this platform loads an ${cpu} ${here} library (${ext}): build the artifact for this platform` }),
      );
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  test('an artifact whose init fails reports the status, and deinit is never called for it', () => {
    // status.c's deinit aborts the process when called on storage that init did not set up.
    let thrown;
    try {
      load(fixture('status-init-fails'));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ZgcError);
    expect(thrown).toMatchObject({ code: 'ERR_ZGC_OUT_OF_MEMORY', status: 10, operation: 'zgc_runtime_init' });
    global.gc && global.gc();
  });

  (MUSL ? test.skip : test)("an artifact's functions stay its own even where Node exports the same name (glibc: RTLD_DEEPBIND)", () => {
    const rt = load(fixture('interpose'));
    expect(rt.run({ x: [0] })[0].data[0]).toBe(1);
    rt.close();
  });

  (MUSL ? test : test.skip)("musl has no RTLD_DEEPBIND: an artifact linked with -Bsymbolic keeps its own functions, one without gets Node's", () => {
    const own = load(fixture('interpose-symbolic'));
    expect(own.run({ x: [0] })[0].data[0]).toBe(1);
    own.close();
    const plain = load(fixture('interpose'));
    expect(plain.run({ x: [0] })[0].data[0]).toBe(0);
    plain.close();
  });
});

describe('a malformed artifact is refused at load, naming the rule it breaks', () => {
  test('the unbroken base of the malformed fixtures loads and runs', () => {
    const rt = load(fixture('malformed-base'));
    rt.set('w', [10, 20, 30, 40]);
    expect(Array.from(rt.run({ a: [1, 2, 3, 4] })[0].data)).toEqual([11, 22, 33, 44]);
    rt.close();
  });

  // Each load runs in a child process: a crash there fails this test instead of killing
  // the test runner, and the child also proves the runtime stays usable after the refusal.
  test.each(malformed.map((m) => [m.rule, m]))('%s (in a child process)', (_rule, m) => {
    const script = `
      const { load, ZgcError } = require(${JSON.stringify(path.join(testDir, '..'))});
      let thrown = null;
      try { load(process.argv[1]); } catch (err) { thrown = { zgc: err instanceof ZgcError, code: err.code, message: err.message }; }
      const rt = load(process.argv[2]);
      rt.set('w', [1, 1, 1, 1]);
      const after = Array.from(rt.run({ a: [1, 2, 3, 4] })[0].data);
      console.log(JSON.stringify({ thrown, after }));`;
    const child = spawnSync(process.execPath, ['-e', script, fixture(`malformed-${m.rule.toLowerCase()}`), fixture('malformed-base')], { encoding: 'utf8', timeout: 30000 });
    expect({ status: child.status, signal: child.signal, stderr: child.stderr }).toEqual({ status: 0, signal: null, stderr: '' });
    const { thrown, after } = JSON.parse(child.stdout.trim());
    expect(after).toEqual([2, 3, 4, 5]);
    expect(thrown).not.toBeNull();
    expect(thrown.zgc).toBe(true);
    expect(thrown.code).toBe(m.code);
    expect(thrown.message).toMatch(m.message);
    expect(thrown.message).toContain(path.basename(fixture(`malformed-${m.rule.toLowerCase()}`)));
  });
});

describe('close() releases the library at once', () => {
  test('200 bytes loads closed in a synchronous loop leave no memfd open (no wait for finalizers)', () => {
    const bytes = fs.readFileSync(fixture('add'));
    const fds = MEMFD ? () => fs.readdirSync('/proc/self/fd').length : bytesLibraries;
    const before = fds();
    for (let i = 0; i < 200; i++) {
      const rt = load(bytes);
      expect(Array.from(rt.run({ a: [i, 0, 0, 0], b: [1, 1, 1, 1] })[0].data)).toEqual([i + 1, 1, 1, 1]);
      rt.close();
    }
    expect(fds() - before).toBeLessThanOrEqual(0);
  });

  // musl's dlclose unloads nothing: there a closed artifact's library stays mapped until exit.
  (MUSL ? test.skip : test)('a load whose init fails releases its library at once', () => {
    const mapped = bytesLibraries;
    const before = mapped();
    const bytes = fs.readFileSync(fixture('status-init-fails'));
    for (let i = 0; i < 3; i++) expect(() => load(bytes)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_OUT_OF_MEMORY' }));
    expect(mapped()).toBe(before);
  });

  (MUSL ? test.skip : test)('a pool releases the library when its last instance closes, not before', async () => {
    const { createPool } = require('../..');
    const bytes = fs.readFileSync(fixture('add'));
    const mapped = bytesLibraries;
    const before = mapped();
    const pool = createPool(bytes, { size: 2 });
    expect(mapped()).toBeGreaterThan(before);
    pool.runtimes[0].close();
    const [out] = await pool.runtimes[1].runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] });
    expect(Array.from(out.data)).toEqual([2, 3, 4, 5]);
    await pool.close();
    expect(mapped()).toBe(before);
  });
});
