'use strict';

// Each scenario runs in a child `node --expose-gc` so that a crash fails one test instead
// of killing the runner, and so that gc() is real.
const { execFileSync } = require('node:child_process');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');

function scenario(name) {
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(testDir, 'children', 'lifetime.js'), name], {
    encoding: 'utf8',
    timeout: 60000,
  });
  return JSON.parse(out.trim().split('\n').pop());
}

describe('worker threads', () => {
  test('4 workers and the main thread load and run the same artifact at once (a runtime, a pool, a batcher), then exit cleanly', () => {
    const out = execFileSync(process.execPath, [path.join(testDir, 'children', 'workers.js')], { encoding: 'utf8', timeout: 60000 });
    expect(JSON.parse(out.trim())).toEqual({ counts: [590, 590, 590, 590, 590] });
  });
});

describe('bound storage and runtimes across garbage collection', () => {
  test('sequences dropped unclosed while their runs wait keep their state through GC and churn (200 runs checked)', () => {
    expect(scenario('sequence-dropped')).toEqual({ ok: true, wrong: [] });
  });

  test('a bound array dropped by JavaScript stays alive and correct through GC and churn', () => {
    expect(scenario('bind-drop-gc')).toEqual({ ok: true, bad: null });
  });

  test('a bound buffer transferred away is detected before the run (ERR_ZGC_DETACHED), and rebinding recovers', () => {
    const r = scenario('transfer-detach');
    expect(r).toMatchObject({ ok: true, code: 'ERR_ZGC_DETACHED', detachedLength: 0 });
    expect(r.message).toMatch(/source "w" was detached/);
  });

  test('a resizable buffer shrunk under a bound view is refused, and usable again once grown back', () => {
    expect(scenario('resizable-shrink')).toEqual({ ok: true, code: 'ERR_ZGC_DETACHED', bad: null });
  });

  test('runtimes collected without close() are finalised without a crash', () => {
    const r = scenario('collected-unclosed');
    expect(r.ok).toBe(true);
    expect(r.collected).toBeGreaterThan(0);
  });

  test('an async run keeps no hold on its JavaScript inputs: one collected mid-run changes nothing', () => {
    expect(scenario('async-input-collected')).toEqual({ ok: true, collectedBeforeResult: true, y: [2, 4, 6, 8] });
  });

  test('async runs under constant GC and churn: JS-bound pools, dropped storage() views, a transfer mid-run', () => {
    expect(scenario('async-gc-load')).toEqual({ ok: true, bad: null, fromStorage: 4, before: null, after: 'ERR_ZGC_DETACHED' });
  });

  test('close() while bound releases the binding safely', () => {
    expect(scenario('close-while-bound')).toEqual({ ok: true });
  });
});
