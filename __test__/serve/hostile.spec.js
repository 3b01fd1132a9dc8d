'use strict';

// npm run test:hostile as part of the suite: every attack of issue 34 on a served model, one
// after another on 127.0.0.1, each asserting that a probe infer (HTTP and gRPC) answers right
// within 2 s during it and after, that RSS stays under its bound, and that the process lives.
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { spawnSync } = require('node:child_process');

test('every attack is held: probes answered right within 2 s, RSS bounded, the server alive', () => {
  // About 90 s on a quiet 2-core machine; 240 s was not enough with two CI runs and two CPU burners beside it.
  const r = spawnSync(process.execPath, [path.join(testDir, '..', 'scripts', 'hostile.js'), '--json'], { encoding: 'utf8', timeout: 540000 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  // When it gave no table, why: killed at the timeout, or its own error.
  expect([line !== undefined, r.signal, line === undefined ? r.stderr.slice(-2000) : '']).toEqual([true, null, '']);
  const { rows } = JSON.parse(line);
  expect(rows.length).toBe(15);
  expect(rows.filter((row) => !row.ok).map((row) => `${row.attack}: ${row.problems.join('; ')}`)).toEqual([]);
  for (const row of rows) expect(row.probes).toBeGreaterThanOrEqual(3);
  expect(r.status).toBe(0);
}, 600000);
