'use strict';

// docs/contributing.md's map of the house says what each part may import; these specs check it
// against the code itself, so that the map stays true (issue 47).
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..', '..');
const read = (f) => fs.readFileSync(path.join(root, f), 'utf8');

function files(dir, ext) {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const f = path.join(dir, e.name);
    if (e.isDirectory()) return files(f, ext);
    return e.name.endsWith(ext) ? [f] : [];
  });
}

/** The code of a Rust file without its comments (a `use` or `unsafe` in a comment is not one). */
const code = (text) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');

/** A crate's [dependencies] (not dev- or build-), by the name it is imported as. */
function dependencies(manifest) {
  const text = read(manifest);
  const at = text.indexOf('\n[dependencies]');
  if (at < 0) return [];
  const section = text.slice(at + 1).split(/\n\[/)[0];
  return [...section.matchAll(/^([a-zA-Z0-9_-]+)\s*[=.]/gm)].map((m) => m[1]).filter((n) => n !== 'dependencies');
}

/** The crates and modules a Rust file names in its `use` lines (the first segment). */
function uses(text) {
  return [...code(text).matchAll(/^\s*(?:pub(?:\([a-z]+\))?\s+)?use\s+(?:::)?([a-zA-Z_][a-zA-Z0-9_]*)/gm)].map((m) => m[1]);
}

describe('the map of the house holds (docs/contributing.md)', () => {
  test('crates/core imports only std, libloading, libc, half and thiserror: no napi, no JavaScript', () => {
    expect(dependencies('crates/core/Cargo.toml').sort()).toEqual(['half', 'libc', 'libloading', 'thiserror']);
    // The crate's own modules, which its root names without `crate::`.
    const own = files('crates/core/src', '.rs').map((f) => path.basename(f, '.rs'));
    for (const f of files('crates/core/src', '.rs')) {
      for (const u of uses(read(f))) expect([f, u, ['std', 'crate', 'super', 'self', 'libloading', 'libc', 'half', 'thiserror', ...own].includes(u)]).toEqual([f, u, true]);
      expect([f, /\bnapi\b/.test(code(read(f)))]).toEqual([f, false]);
    }
  });

  test("the core's ffi/ imports nothing above abi, meta, binary and error", () => {
    for (const f of files('crates/core/src/ffi', '.rs')) {
      const named = [...code(read(f)).matchAll(/\bcrate::([a-z_]+)/g)].map((m) => m[1]);
      for (const n of named) expect([f, n, ['abi', 'meta', 'binary', 'error', 'ffi'].includes(n)]).toEqual([f, n, true]);
    }
  });

  test("the core's unsafe is in ffi/ only (lib.rs denies it elsewhere)", () => {
    expect(read('crates/core/src/lib.rs')).toMatch(/#!\[deny\(unsafe_code\)\]|#\[deny\(unsafe_code\)\]/);
    for (const f of files('crates/core/src', '.rs').filter((f) => !f.includes(`${path.sep}ffi${path.sep}`))) {
      expect([f, /\bunsafe\b/.test(code(read(f)))]).toEqual([f, false]);
    }
  });

  test('crates/json imports only half and ryu', () => {
    expect(dependencies('crates/json/Cargo.toml').sort()).toEqual(['half', 'ryu']);
  });

  test("the binding's root is a table of contents: its modules import nothing from it", () => {
    const lib = code(read('src/lib.rs'));
    // Only module declarations (and the cfg of one).
    expect(lib.split('\n').filter((l) => l.trim() !== '' && !/^(#\[cfg\([^)]*\)\]|mod [a-z_]+;)$/.test(l.trim()))).toEqual([]);
    for (const f of files('src', '.rs')) expect([f, /\bsuper::/.test(code(read(f)))]).toEqual([f, false]);
  });

  test("the binding's unsafe is in js.rs, js_fast.rs and tsfn.rs only; every unsafe (theirs, the core's ffi/) has its SAFETY note", () => {
    const withUnsafe = files('src', '.rs').filter((f) => /\bunsafe\b/.test(code(read(f))));
    expect(withUnsafe.map((f) => path.basename(f)).sort()).toEqual(['js.rs', 'js_fast.rs', 'tsfn.rs']);
    // The core's ffi/ too: every unsafe of the package carries its note.
    for (const f of [...withUnsafe, ...files('crates/core/src/ffi', '.rs')]) {
      const lines = read(f).split('\n');
      lines.forEach((line, i) => {
        // An unsafe block or impl is an operation that needs a note; an unsafe fn's callers do.
        if (!/\bunsafe\s*(\{|impl\b)/.test(code(line))) return;
        // A SAFETY note on this line, or in the comment lines just above it.
        let k = i;
        let noted = /SAFETY:/.test(line);
        while (!noted && k > 0 && /^\s*(\/\/|#\[)/.test(lines[k - 1])) noted = /SAFETY:/.test(lines[--k]);
        expect([f, i + 1, noted]).toEqual([f, i + 1, true]);
      });
    }
  });

  test("every binding function that fails with a runtime error fails with Thrown, which only errors.rs makes, from the Env: none can lose the error's fields", () => {
    let napiFns = 0;
    for (const f of files('src', '.rs')) {
      for (const m of code(read(f)).matchAll(/#\[napi[^\]]*\]\s*pub fn (\w+)[^{]*?->\s*([^{]*)\{/g)) {
        napiFns++;
        expect([f, m[1], /\bCode\s*>/.test(m[2])]).toEqual([f, m[1], false]);
      }
    }
    expect(napiFns).toBeGreaterThan(40);
    // Its field is private to errors.rs: `thrown(env)` is the one way to make one.
    expect(read(path.join('src', 'errors.rs'))).toMatch(/pub struct Thrown\(napi::Error<Code>\);/);
    for (const f of files('src', '.rs').filter((f) => !f.endsWith('errors.rs'))) expect([f, /\bThrown\(/.test(code(read(f)))]).toEqual([f, false]);
  });

  test('no room is too big to read: no source or test file over 600 lines', () => {
    const sources = ['src', 'crates', 'lib', 'bin', 'scripts', 'bench', '__test__'].flatMap((d) => ['.rs', '.js', '.mjs', '.ts'].flatMap((ext) => files(d, ext)));
    const big = sources.filter((f) => !f.includes(`${path.sep}fixtures${path.sep}build`) && !f.includes('node_modules')).map((f) => [f, read(f).split('\n').length - 1]).filter(([, n]) => n > 600);
    expect(big).toEqual([]);
  });

  test("lib/ never imports lib/serve (but the CLI's arguments, which read its limits and restricted names)", () => {
    const outside = files('lib', '.js').filter((f) => !f.startsWith(`lib${path.sep}serve`));
    for (const f of outside) {
      const named = [...read(f).matchAll(/require\('([^']+)'\)/g)].map((m) => m[1]).filter((m) => /(^|\/)serve(\/|$)/.test(m));
      const allowed = f === path.join('lib', 'cli-args.js') ? ['./serve/limits', './serve/restricted'] : [];
      for (const m of named) expect([f, m, allowed.includes(m)]).toEqual([f, m, true]);
    }
  });
});
