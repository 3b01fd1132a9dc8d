'use strict';

// Docs are code: every fenced block of README.md and docs/*.md runs here, from the
// repository root, against the bundled example artifacts (built as `npm run demo` builds
// them), and the output a page prints after a block is what the block prints. The rules a
// block follows are in docs/contributing.md ("Docs that run").
const { spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { root, docFiles, blocksOf, shellCommands, outputMatches } = require('../../scripts/doc-blocks');
const { PYTHON } = require('../helpers');
const GRPC_PYTHON = path.join(testDir, '..', '.venv-grpc', 'bin', 'python');

const work = path.join(root, 'target', 'doc-blocks');
const tsc = require.resolve('typescript/bin/tsc');
// This host's node first: `npx jest` in a page then runs under the Node the suite runs on.
const env = { ...process.env, PATH: `${path.dirname(process.execPath)}:${path.join(root, 'node_modules', '.bin')}:${process.env.PATH}`, NO_COLOR: '1', FORCE_COLOR: '0', PTO_FIXTURE_QUIET: '' };
const MARK = '@@zgc-doc-block@@';
/** What a Python block's imports need from PyPI (numpy comes with tritonclient). */
const PIP_PACKAGES = { 'tritonclient.grpc': 'tritonclient[grpc]', 'tritonclient.http': 'tritonclient[http]', kserve: 'kserve', zgc: 'zgc-runtime' };

fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });
beforeAll(() => {
  // What `npm run demo` (the README's first command) leaves in examples/build.
  require('../../examples/build').buildExamples();
}, 120000);

const slug = (block) => `${block.file.replace(/[^a-z0-9]+/gi, '-')}-L${block.line}`;

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: root, env, encoding: 'utf8', timeout: 120000, ...options });
  return { status: r.status, signal: r.signal, stdout: r.stdout || '', stderr: r.stderr || '', error: r.error };
}

function expectRan(block, r, what = 'it') {
  if (r.status !== 0) throw new Error(`${block.file}:${block.line}: ${what} exited ${r.status}${r.signal ? ` (${r.signal})` : ''}\n${r.stdout}${r.stderr}`);
}

function expectOutput(block, expected, actual) {
  if (!outputMatches(expected, actual)) {
    throw new Error(`${block.file}:${block.line}: the output differs from what the page prints.\n--- the page:\n${expected.join('\n')}\n--- the block printed:\n${actual}`);
  }
}

/**
 * The compiler options of the tsconfig.json docs/typescript.md gives a user, as tsc flags: a
 * ts block compiles with exactly what a reader of that page has.
 */
function userTsFlags() {
  const page = blocksOf('docs/typescript.md');
  const config = page.find((b) => b.lang === 'json' && b.text.includes('"compilerOptions"'));
  const options = JSON.parse(config.text).compilerOptions;
  return Object.entries(options).flatMap(([key, value]) => (value === true ? [`--${key}`] : [`--${key}`, Array.isArray(value) ? value.join(',') : String(value)]));
}

/** TypeScript with the tsconfig of docs/typescript.md; emits next to the source unless noEmit. */
function compileTs(block, file, { noEmit }) {
  const args = [tsc, ...userTsFlags(), '--skipLibCheck', 'false', ...(noEmit ? ['--noEmit'] : []), file];
  const r = run(process.execPath, args);
  if (r.status !== 0) throw new Error(`${block.file}:${block.line}: tsc (strict) refused the block:\n${r.stdout}${r.stderr}`);
}

/** Runs a JavaScript or TypeScript block; its stdout (null for a fragment or a server, checked here). */
function runScript(block, shell, output) {
  const esm = Boolean(block.attrs.esm);
  const ts = block.lang === 'ts';
  const ext = ts ? (esm ? '.mts' : '.ts') : esm ? '.mjs' : '.js';
  const file = path.join(work, slug(block) + ext);
  fs.writeFileSync(file, block.text);
  if (block.attrs.fragment) {
    if (ts) compileTs(block, file, { noEmit: true });
    else expectRan(block, run(process.execPath, ['--check', file]), 'node --check');
    return null;
  }
  if (ts) compileTs(block, file, { noEmit: false });
  const script = ts ? file.replace(/\.mts$/, '.mjs').replace(/\.ts$/, '.js') : file;
  // A server: started in the background, left for the page's later blocks, stopped by SIGTERM.
  if (block.attrs.background) return shell.background(block, `${shellQuote(process.execPath)} ${shellQuote(script)}`, output);
  const r = run(process.execPath, [script]);
  expectRan(block, r);
  return r.stdout;
}

/** Shell blocks of one page share background processes (a server a later block talks to). */
class Shell {
  constructor(name) {
    this.pids = path.join(work, `${name}.pids`);
    fs.writeFileSync(this.pids, '');
  }

  /**
   * Shell that starts `command` in its own process group (so that stop() ends it and what it
   * started), waits until its log shows the first `expected` line, and prints the log.
   */
  #startScript(command, log, expected) {
    const first = ((expected && expected[0]) || '').split('…')[0];
    return [
      `setsid bash -c ${shellQuote(command)} > ${log} 2>&1 < /dev/null & echo $! >> ${this.pids}`,
      `for n in $(seq 600); do grep -qF -- ${shellQuote(first)} ${log} && break; sleep 0.05; done; cat ${log}; true`,
    ].join('\n');
  }

  /** Starts `command` in the background; checks the `expected` lines in its output. */
  background(block, command, expected) {
    const r = run('bash', ['-c', this.#startScript(command, path.join(work, `${slug(block)}.log`), expected)]);
    if (expected) expectOutput(block, ['...', ...expected.flatMap((l) => [l, '...'])], r.stdout);
    return null;
  }

  run(block) {
    const commands = shellCommands(block);
    const parts = ['exec 2>&1'];
    commands.forEach((c, i) => {
      const background = /&\s*$/.test(c.command);
      if (background) {
        parts.push(this.#startScript(c.command.replace(/&\s*$/, ''), path.join(work, `${slug(block)}-${i}.log`), c.expected));
      } else {
        parts.push(c.command);
      }
      parts.push(`printf '\\n${MARK} %d\\n' $?`);
    });
    const r = run('bash', ['-c', parts.join('\n')]);
    const chunks = r.stdout.split(new RegExp(`\\n${MARK} (\\d+)\\n`));
    commands.forEach((c, i) => {
      const out = chunks[2 * i];
      const status = Number(chunks[2 * i + 1]);
      if (out === undefined || Number.isNaN(status)) throw new Error(`${block.file}:${block.line}: \`${c.command}\` did not finish:\n${r.stdout}${r.stderr}`);
      // A command expected to fail says so on its last line: [exit N].
      const expected = [...c.expected];
      const exit = expected.length > 0 ? /^\[exit (\d+)\]$/.exec(expected[expected.length - 1].trim()) : null;
      if (exit) expected.pop();
      const wanted = exit ? Number(exit[1]) : 0;
      if (status !== wanted) throw new Error(`${block.file}:${block.line}: \`${c.command}\` exited ${status}, the page expects ${wanted}:\n${out}`);
      if (/&\s*$/.test(c.command)) {
        // A server's log goes on after the lines the page shows, with others between them.
        expectOutput(block, ['...', ...expected.flatMap((l) => [l, '...'])], out);
      } else if (expected.length > 0) {
        expectOutput(block, expected, out);
      }
    });
  }

  stop() {
    const pids = fs.readFileSync(this.pids, 'utf8').split('\n').filter(Boolean).map(Number);
    for (const pid of pids) {
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // Already gone.
      }
    }
    // A documented server ends on SIGTERM, as a deployment stops it; and the next page may
    // take the same port.
    const deadline = Date.now() + 20000;
    const alive = (pid) => {
      try {
        process.kill(-pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (const pid of pids) while (alive(pid) && Date.now() < deadline) execFileSync('sleep', ['0.05']);
    const left = pids.filter(alive);
    for (const pid of left) process.kill(-pid, 'SIGKILL');
    if (left.length > 0) throw new Error(`${left.length} background command(s) of this page did not end within 20 s of SIGTERM`);
  }
}

/**
 * The README's two set-up commands. `npm ci && npm test` is what CI runs (.ci/run), and this
 * test is part of it, so it is checked there; the demo runs here, after the `npm ci` of CI.
 */
function runSetup(block) {
  const commands = shellCommands(block);
  expect(commands.map((c) => c.command)).toEqual(['npm ci && npm run demo', 'npm ci && npm test']);
  const ci = fs.readFileSync(path.join(root, '.ci', 'run'), 'utf8');
  expect(ci).toMatch(/^npm ci\b/m);
  expect(ci).toMatch(/^npm test$/m);
  const r = run('npm', ['run', 'demo']);
  expectRan(block, r, 'npm run demo');
  expectOutput(block, commands[0].expected, r.stdout);
}

const shellQuote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

for (const file of docFiles()) {
  describe(file, () => {
    const blocks = blocksOf(file);
    const shell = new Shell(file.replace(/[^a-z0-9]+/gi, '-'));
    afterAll(() => shell.stop(), 30000);

    test("uses only what the README's set-up makes: examples/build, not the test suite's fixtures", () => {
      if (file === 'docs/contributing.md') return; // the page for working on the suite itself
      for (const b of blocks) {
        const used = b.text.match(/__test__\/\S*/);
        if (used) throw new Error(`${file}:${b.line}: the block uses ${used[0]}, which the README's set-up (npm run demo) does not make: build what it needs in examples/build.js`);
      }
    });

    test('every paragraph and list item ends its sentence (none stops midway)', () => {
      const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n');
      const unfinished = [];
      let fenced = false;
      let item = null;
      const end = () => {
        if (item && !/[.;:,!?)\]`*…>]$/.test(item.text.trim())) unfinished.push(`${file}:${item.line}: …${item.text.trim().slice(-60)}`);
        item = null;
      };
      lines.forEach((l, i) => {
        if (/^\s*```/.test(l)) {
          fenced = !fenced;
          end();
        } else if (fenced) {
          // inside a block
        } else if (l.trim() === '' || /^(#|\||>|<!--)/.test(l.trim())) {
          end();
        } else if (/^\s*([-*]|\d+\.) /.test(l) || item === null) {
          end();
          item = { line: i + 1, text: l };
        } else {
          item.text += ` ${l.trim()}`;
        }
      });
      end();
      expect(unfinished).toEqual([]);
    });

    test('quotes no throughput: figures in req/s and runs/s are kept in benchmarks.md only', () => {
      if (file === 'docs/benchmarks.md') return;
      const text = fs.readFileSync(path.join(root, file), 'utf8');
      expect(text.match(/\d[\d,.]*\s*(req\/s|runs\/s)/g) || []).toEqual([]);
    });

    test('names the pip install of every package its Python blocks import', () => {
      const text = fs.readFileSync(path.join(root, file), 'utf8');
      const installs = [...text.matchAll(/pip install ([^`\n]+)/g)].flatMap((m) => m[1].split(/\s+/));
      for (const b of blocks.filter((x) => x.lang === 'python')) {
        const modules = [...b.text.matchAll(/^\s*(?:import|from)\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)/gm)].flatMap((m) => m[1].split(',').map((s) => s.trim().split(/\s+/)[0]));
        for (const mod of modules) {
          const pkg = PIP_PACKAGES[mod] || PIP_PACKAGES[mod.split('.')[0]];
          if (pkg && !installs.includes(pkg)) throw new Error(`${file}:${b.line}: the block imports ${mod}, but the page never says pip install ${pkg}`);
        }
      }
    });

    test('with TypeScript blocks, names the tsconfig they compile with (typescript.md)', () => {
      if (file === 'docs/typescript.md' || !blocks.some((b) => b.lang === 'ts')) return;
      const text = fs.readFileSync(path.join(root, file), 'utf8');
      if (!/\]\((docs\/)?typescript\.md(#[a-z-]+)?\)/.test(text)) throw new Error(`${file}: it has ts blocks but no link to typescript.md, whose tsconfig.json they compile with`);
    });

    test('has only blocks the doc tests know how to run', () => {
      const known = ['js', 'ts', 'sh', 'python', 'json', 'c', 'text'];
      for (const b of blocks) {
        if (!known.includes(b.lang)) throw new Error(`${file}:${b.line}: a block of language ${JSON.stringify(b.lang)}: give it one of ${known.join(', ')}`);
      }
      // Every text block is the output of the block before it.
      blocks.forEach((b, i) => {
        if (b.lang !== 'text') return;
        const before = blocks[i - 1];
        if (!b.attrs.output || !before || !['js', 'ts', 'python'].includes(before.lang) || before.attrs.fragment) {
          throw new Error(`${file}:${b.line}: a text block must be \`text output\`, right after the js, ts or python block whose output it shows`);
        }
      });
    });

    blocks.forEach((block, i) => {
      if (block.lang === 'text') return;
      const next = blocks[i + 1];
      const output = next && next.lang === 'text' && next.attrs.output ? next.text.split('\n') : null;
      const name = `${block.lang}${block.attrs.fragment ? ' fragment' : ''} block at line ${block.line}`;
      test(name, () => {
        if ((block.lang === 'js' || block.lang === 'ts') && block.attrs.file) {
          // The page shows a file of the repository, which a command on the page runs.
          expect(block.text.trim()).toBe(fs.readFileSync(path.join(root, block.attrs.file), 'utf8').trim());
        } else if (block.lang === 'js' || block.lang === 'ts') {
          const stdout = runScript(block, shell, output);
          if (output && stdout !== null) expectOutput(block, output, stdout);
        } else if (block.lang === 'sh' && block.attrs.setup) {
          runSetup(block);
        } else if (block.lang === 'sh') {
          shell.run(block);
        } else if (block.lang === 'python') {
          // `python grpc`: the gRPC clients' venv (scripts/prepare-reference.js).
          const r = run(block.attrs.grpc ? GRPC_PYTHON : PYTHON, ['-c', block.text]);
          expectRan(block, r);
          if (output) expectOutput(block, output, r.stdout);
        } else if (block.lang === 'json') {
          const value = JSON.parse(block.text);
          if (block.attrs.file) expect(value).toEqual(JSON.parse(fs.readFileSync(path.join(root, block.attrs.file), 'utf8')));
        } else if (block.lang === 'c') {
          const r = run('cc', ['-fsyntax-only', '-include', 'stdint.h', '-include', 'stddef.h', '-x', 'c', '-'], { input: block.text });
          expectRan(block, r, 'cc -fsyntax-only');
        }
      }, 180000);
    });
  });
}

describe('what the pages promise about the API', () => {
  test("every `import { … } from 'zgc-runtime…'` a page shows, in a block or in its text, names real exports", () => {
    // The entry points as package.json's exports name them.
    const { exports } = require(path.join(root, 'package.json'));
    const exported = {};
    for (const [subpath, entry] of Object.entries(exports)) {
      if (!entry.types) continue;
      const specifier = subpath === '.' ? 'zgc-runtime' : `zgc-runtime${subpath.slice(1)}`;
      const types = fs.readFileSync(path.join(root, entry.types), 'utf8');
      const typeNames = [...types.matchAll(/^export (?:declare )?(?:class|function|type|interface|const|enum) (\w+)/gm)].map((m) => m[1]);
      // The ES module's names, read by Node itself (Jest runs CommonJS).
      const mjs = entry.import && path.join(root, entry.import);
      const listed = mjs ? run(process.execPath, ['--input-type=module', '-e', `console.log(JSON.stringify(Object.keys(await import(${JSON.stringify(mjs)}))))`]) : null;
      const values = listed ? JSON.parse(listed.stdout) : Object.keys(require(path.join(root, entry.require || entry.default)));
      exported[specifier] = new Set([...typeNames, ...values]);
    }
    expect(Object.keys(exported).sort()).toEqual(['zgc-runtime', 'zgc-runtime/client', 'zgc-runtime/jest', 'zgc-runtime/pto', 'zgc-runtime/serve']);
    const wrong = [];
    for (const file of docFiles()) {
      const text = fs.readFileSync(path.join(root, file), 'utf8');
      for (const m of text.matchAll(/import\s*\{([^}]+)\}\s*from\s*['"](zgc-runtime(?:\/\w+)?)['"]/g)) {
        const names = m[1].split(',').map((n) => n.trim().replace(/^type\s+/, '').split(/\s+as\s+/)[0]).filter(Boolean);
        for (const name of names) if (!exported[m[2]] || !exported[m[2]].has(name)) wrong.push(`${file}: ${name} from ${m[2]}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  const codes = (file, type) => {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    const body = text.slice(text.indexOf(`export type ${type} =`));
    return [...body.slice(0, body.indexOf('\n\n')).matchAll(/'(ERR_[A-Z0-9_]+)'/g)].map((m) => m[1]);
  };

  test('every ZGC_ environment variable a page names is one the code reads', () => {
    const code = ['lib', 'scripts', 'bin', 'bench']
      .flatMap((d) => fs.readdirSync(path.join(root, d), { recursive: true }).filter((f) => f.endsWith('.js')).map((f) => path.join(root, d, f)))
      .map((f) => fs.readFileSync(f, 'utf8'))
      .join('\n');
    const named = new Set(docFiles().flatMap((f) => fs.readFileSync(path.join(root, f), 'utf8').match(/\bZGC_[A-Z0-9_]+\b/g) || []));
    expect(named.size).toBeGreaterThan(3);
    expect([...named].filter((v) => !code.includes(`env.${v}`) && !code.includes(`'${v}'`))).toEqual([]);
  });

  test("testing-with-jest.md's examples pass from any working directory, as in a user's own project", () => {
    const elsewhere = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'zgc-jest-cwd-'));
    fs.writeFileSync(path.join(elsewhere, 'package.json'), '{"name":"user-project","private":true}\n');
    try {
      const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
      const r = run(process.execPath, [jest, '--config', path.join(root, 'examples', 'jest', 'jest.config.js')], { cwd: elsewhere });
      expect({ status: r.status, summary: r.stderr.match(/Tests:.*/)?.[0] }).toEqual({ status: 0, summary: expect.stringMatching(/Tests:\s+\d+ passed, \d+ total/) });
    } finally {
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  }, 120000);

  test('every PtoErrorCode is in the table of docs/pto.md', () => {
    const page = fs.readFileSync(path.join(root, 'docs', 'pto.md'), 'utf8');
    const all = codes('lib/pto.d.ts', 'PtoErrorCode');
    expect(all.length).toBeGreaterThan(5);
    expect(all.filter((c) => !page.includes(`| \`${c}\``))).toEqual([]);
  });
});

describe('the benchmark page and its chart', () => {
  test('docs/benchmarks.md shows the figures of docs/bench/results.json, and chart.svg is drawn from them', () => {
    const { svg, figures } = require('../../scripts/bench-chart');
    const results = JSON.parse(fs.readFileSync(path.join(root, 'docs', 'bench', 'results.json'), 'utf8'));
    const page = fs.readFileSync(path.join(root, 'docs', 'benchmarks.md'), 'utf8');
    for (const figure of figures(results)) expect(page).toContain(figure);
    expect(fs.readFileSync(path.join(root, 'docs', 'bench', 'chart.svg'), 'utf8')).toBe(svg(results));
    expect(page).toContain('![');
    expect(page).toContain('(bench/chart.svg)');
  });
});

describe('the doc-block rules themselves', () => {
  test('"..." stands for any lines and "…" for any text inside one; ends of lines are trimmed', () => {
    expect(outputMatches(['a', '...', 'z'], 'a\nb\nc\nz\n')).toBe(true);
    expect(outputMatches(['a', '...', 'z'], 'a\nz')).toBe(true);
    expect(outputMatches(['a', 'z'], 'a\nb\nz')).toBe(false);
    expect(outputMatches(['took … ms'], 'took 3.5 ms  ')).toBe(true);
    expect(outputMatches(['took … ms'], 'took 3.5 s')).toBe(false);
    expect(outputMatches(['x'], 'x\ny')).toBe(false);
  });

  test('a sh block is commands and their output; anything before the first command is refused', () => {
    const block = { file: 'f.md', line: 1, text: '$ echo a \\\n  b\na b\n\n$ true' };
    expect(shellCommands(block)).toEqual([{ command: 'echo a \n  b', expected: ['a b'] }, { command: 'true', expected: [] }]);
    expect(() => shellCommands({ file: 'f.md', line: 1, text: 'echo a' })).toThrow(/a sh block's lines are "\$ command"/);
  });
});
