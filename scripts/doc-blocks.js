'use strict';

// The fenced code blocks of README.md and docs/*.md, as the doc tests run them
// (__test__/docs/docs.spec.js; the rules are in docs/contributing.md). A block's info string is
// its language and then attributes: `fragment`, `output`, `file=PATH`, `port=N`.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');

/** Every Markdown file whose blocks are tested, relative to the repository root. */
function docFiles() {
  const docs = fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).sort();
  return ['README.md', ...docs.map((f) => `docs/${f}`)];
}

/** `{ file, line, lang, attrs, text }` for each fenced block of `file` (``` fences, not nested). */
function blocksOf(file) {
  const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n');
  const blocks = [];
  let open = null;
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(\s*)```(.*)$/.exec(lines[i]);
    if (!fence) {
      if (open) open.body.push(lines[i].slice(open.indent));
      continue;
    }
    if (open) {
      blocks.push({ file, line: open.line, lang: open.lang, attrs: open.attrs, text: open.body.join('\n') });
      open = null;
      continue;
    }
    const [lang = '', ...words] = fence[2].trim().split(/\s+/).filter(Boolean);
    const attrs = {};
    for (const w of words) {
      const eq = w.indexOf('=');
      if (eq < 0) attrs[w] = true;
      else attrs[w.slice(0, eq)] = w.slice(eq + 1);
    }
    open = { line: i + 1, lang, attrs, indent: fence[1].length, body: [] };
  }
  if (open) throw new Error(`${file}:${open.line}: a code block is never closed`);
  return blocks;
}

/**
 * A shell block's commands: lines starting with "$ " (continued by a trailing backslash),
 * each with the lines after it until the next command as its expected output.
 */
function shellCommands(block) {
  const commands = [];
  const lines = block.text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith('$ ')) {
      let command = line.slice(2);
      while (command.endsWith('\\') && i + 1 < lines.length) command = `${command.slice(0, -1)}\n${lines[++i]}`;
      commands.push({ command, expected: [] });
    } else if (commands.length > 0) {
      commands[commands.length - 1].expected.push(line);
    } else if (line.trim() !== '') {
      throw new Error(`${block.file}:${block.line}: a sh block's lines are "$ command" and the output after it; got ${JSON.stringify(line)}`);
    }
  }
  for (const c of commands) while (c.expected.length > 0 && c.expected[c.expected.length - 1].trim() === '') c.expected.pop();
  return commands;
}

/**
 * Whether `actual` output matches the `expected` lines: line by line after trimming the ends
 * of lines; an expected line "..." stands for any number of lines, and "…" inside a line for
 * any text.
 */
function outputMatches(expected, actual) {
  const want = expected.map((l) => l.trimEnd());
  const got = actual.replace(/\r/g, '').split('\n').map((l) => l.trimEnd());
  while (got.length > 0 && got[got.length - 1] === '') got.pop();
  const lineMatches = (pattern, line) => {
    if (!pattern.includes('…')) return pattern === line;
    const re = new RegExp(`^${pattern.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
    return re.test(line);
  };
  const match = (i, j) => {
    if (i === want.length) return j === got.length;
    if (want[i] === '...') {
      for (let k = j; k <= got.length; k++) if (match(i + 1, k)) return true;
      return false;
    }
    return j < got.length && lineMatches(want[i], got[j]) && match(i + 1, j + 1);
  };
  return match(0, 0);
}

module.exports = { root, docFiles, blocksOf, shellCommands, outputMatches };
