'use strict';

// Each scenario runs in a child `node --expose-gc` so that a crash fails one test instead
// of killing the runner, and so that gc() is real.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

function scenario(name) {
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'children', 'lifetime.js'), name], {
    encoding: 'utf8',
    timeout: 60000,
  });
  return JSON.parse(out.trim().split('\n').pop());
}

describe('bound storage and runtimes across garbage collection', () => {
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

  test('close() while bound releases the binding safely', () => {
    expect(scenario('close-while-bound')).toEqual({ ok: true });
  });
});
