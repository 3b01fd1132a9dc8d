#!/usr/bin/env node
'use strict';

// npm run valgrind: every cargo test binary (the core's unit tests, the descriptor property
// tests, the fixture suite that loads real artifacts) under valgrind memcheck. Fails on any
// memcheck error or definite leak. Takes a few minutes (the property tests dominate).
const { execFileSync, spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..');
const out = execFileSync('cargo', ['test', '--no-run', '--message-format=json'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
const binaries = out
  .split('\n')
  .filter((line) => line.startsWith('{'))
  .map((line) => JSON.parse(line))
  .filter((m) => m.reason === 'compiler-artifact' && m.executable && m.profile.test)
  .map((m) => m.executable);
let failed = 0;
for (const bin of binaries) {
  const r = spawnSync('valgrind', ['--error-exitcode=99', '--leak-check=full', '--errors-for-leak-kinds=definite', bin, '--test-threads=1'], { cwd: root, encoding: 'utf8' });
  const summary = (r.stderr.match(/ERROR SUMMARY: .*/) || ['no summary'])[0];
  const lost = (r.stderr.match(/definitely lost: .*/) || ['definitely lost: 0 bytes'])[0];
  const tests = (r.stdout.match(/test result: .*/) || ['no test result'])[0];
  console.log(`${path.basename(bin)}: ${tests}; ${summary}; ${lost}`);
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
