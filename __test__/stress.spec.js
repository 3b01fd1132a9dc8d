'use strict';

// The short version of `npm run stress`: 100,000 tiny runs and 1,000 load/run/close cycles,
// in a child with --expose-gc, failing when resident memory or descriptors grow past the
// script's bound after warm-up.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

test('stress --short: no growth of memory or file descriptors after warm-up', () => {
  const child = spawnSync(process.execPath, ['--expose-gc', path.join(__dirname, '..', 'scripts', 'stress.js'), '--short'], { encoding: 'utf8', timeout: 120000 });
  const report = JSON.parse(child.stdout.trim().split('\n').pop());
  expect({ status: child.status, stderr: child.stderr }).toEqual({ status: 0, stderr: '' });
  expect(report.ok).toBe(true);
  expect(report.results.map((r) => r.name)).toHaveLength(5);
  for (const r of report.results) {
    expect(r.fdGrowth).toBeLessThanOrEqual(0);
    expect(r.growthMB).toBeLessThanOrEqual(report.maxGrowthMB);
  }
});
