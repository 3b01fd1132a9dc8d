#!/usr/bin/env node
'use strict';

// Compiles the C fixtures of __test__/fixtures/manifest.js, two at a time: with `cc` (or $CC)
// for this platform, or with --target TRIPLE for another, with its cross compiler from
// scripts/toolchain.js.
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { BUILD, buildDir, extension, fixtures } = require('../__test__/fixtures/manifest');

const SRC = path.join(__dirname, '..', '__test__', 'fixtures');
const at = process.argv.indexOf('--target');
const cross = at > 0 ? require('./toolchain').ensure(process.argv[at + 1]) : null;
const CC = cross ? cross.cc : process.env.CC || 'cc';
const OUT = cross ? buildDir(cross.platform) : BUILD;
const EXT = extension(cross ? cross.platform : path.basename(BUILD));
const env = cross ? { ...process.env, ...cross.env } : process.env;
const targetFlags = cross ? cross.cflags : [];

function compile(f) {
  // -ffp-contract=off: the tests compute expected values with one rounding per operation, and
  // aarch64's GCC fuses multiply-adds by default.
  const args = ['-shared', '-fPIC', '-O2', '-Wall', '-Wextra', '-Werror', '-ffp-contract=off', ...targetFlags, '-o', path.join(OUT, `${f.name}${EXT}`)];
  for (const d of f.defines || []) args.push(`-D${d}`);
  args.push(...(f.cflags || []));
  args.push(path.join(SRC, f.source), ...(f.libs || []));
  return new Promise((resolve, reject) => {
    execFile(CC, args, { env }, (err, _stdout, stderr) => (err ? reject(new Error(`${CC} ${args.join(' ')}\n${stderr}`)) : resolve()));
  });
}

async function main() {
  const BUILD = OUT;
  fs.mkdirSync(BUILD, { recursive: true });
  const system = cross ? cross.platform.split('-')[0] : process.platform;
  const wanted = fixtures.filter((f) => f.os === undefined || f.os === system);
  const queue = [...wanted];
  const workers = Array.from({ length: Math.max(2, os.availableParallelism()) }, async () => {
    while (queue.length) await compile(queue.shift());
  });
  await Promise.all(workers);
  // Not a shared library at all: dlopen must fail cleanly.
  fs.writeFileSync(path.join(BUILD, `not-a-library${EXT}`), 'this is text, not ELF\n');
  console.log(`built ${wanted.length} fixtures in ${path.relative(process.cwd(), BUILD)}`);
}

main().catch((err) => {
  console.error(err.message);
  process.exit(1);
});
