#!/usr/bin/env node
'use strict';

// Compiles the C fixtures of __test__/fixtures/manifest.js with `cc`, two at a time.
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { BUILD, fixtures } = require('../__test__/fixtures/manifest');

const SRC = path.join(__dirname, '..', '__test__', 'fixtures');
const CC = process.env.CC || 'cc';

function compile(f) {
  const args = ['-shared', '-fPIC', '-O2', '-Wall', '-Wextra', '-Werror', '-o', path.join(BUILD, `${f.name}.so`)];
  for (const d of f.defines || []) args.push(`-D${d}`);
  args.push(path.join(SRC, f.source), ...(f.libs || []));
  return new Promise((resolve, reject) => {
    execFile(CC, args, (err, _stdout, stderr) => (err ? reject(new Error(`${CC} ${args.join(' ')}\n${stderr}`)) : resolve()));
  });
}

async function main() {
  fs.mkdirSync(BUILD, { recursive: true });
  const queue = [...fixtures];
  const workers = Array.from({ length: Math.max(2, os.availableParallelism()) }, async () => {
    while (queue.length) await compile(queue.shift());
  });
  await Promise.all(workers);
  // Not a shared library at all: dlopen must fail cleanly.
  fs.writeFileSync(path.join(BUILD, 'not-a-library.so'), 'this is text, not ELF\n');
  console.log(`built ${fixtures.length} fixtures in ${path.relative(process.cwd(), BUILD)}`);
}

main().catch((err) => {
  console.error(err.message);
  process.exit(1);
});
