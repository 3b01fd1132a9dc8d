'use strict';

// The short version of `npm run stress`: 100,000 tiny runs, 1,000 load/run/close cycles,
// 10,000 offloaded async runs (a runtime, a pool) and 100 runtimes each starting a worker, in
// a child with --expose-gc, failing when resident memory, descriptors or OS threads grow past
// the script's bound after warm-up.
const { spawnSync } = require('node:child_process');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');

test('stress --short: no growth of memory, file descriptors or threads after warm-up', () => {
  const child = spawnSync(process.execPath, ['--expose-gc', path.join(testDir, '..', 'scripts', 'stress.js'), '--short'], { encoding: 'utf8', timeout: 120000 });
  const report = JSON.parse(child.stdout.trim().split('\n').pop());
  expect({ status: child.status, stderr: child.stderr }).toEqual({ status: 0, stderr: '' });
  expect(report.ok).toBe(true);
  expect(report.results.map((r) => r.name)).toEqual([
    'tiny run()',
    'tiny run({ into })',
    'load(path)/run/close',
    'load(bytes)/run/close',
    'load/run, never closed (finalizers)',
    'runAsync, offloaded, 64 in flight',
    'pool of 2, offloaded, 64 in flight',
    'load/runAsync/close (a worker each)',
  ]);
  for (const r of report.results) {
    expect(r.fdGrowth).toBeLessThanOrEqual(0);
    expect(r.threadGrowth).toBeLessThanOrEqual(0);
    expect(r.growthMB).toBeLessThanOrEqual(report.maxGrowthMB);
  }
});
