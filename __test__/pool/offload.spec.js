'use strict';

// Issue 12: async runs drained by native worker threads, inline where a hop costs more than
// the run, for runtimes and pools. Every result is checked against a synchronous run of
// another instance; slow.c counts the calls inside each instance (stats[1]) and its runs.
const { load, createPool, ZgcError } = require('../..');
const { fixture } = require('../helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const MODES = ['auto', 'always', 'never'];

/** y = 2x of slow.c, computed by a synchronous run of its own instance. */
function reference() {
  const rt = load(fixture('slow'));
  rt.set('sleep_ms', 0);
  return (x) => Array.from(rt.run({ x })[0].data);
}

async function lanes(count, total, body) {
  let next = 0;
  await Promise.all(
    Array.from({ length: count }, async () => {
      while (next < total) await body(next++);
    }),
  );
}

describe.each(MODES)("offload '%s'", (offload) => {
  test('10,000 runtime runs, 64 in flight: every result right, in call order, one call at a time', async () => {
    const rt = load(fixture('slow'), { offload });
    rt.set('sleep_ms', 0);
    const expected = reference();
    let lastCount = 0;
    let maxInside = 0;
    const order = [];
    await lanes(64, 10000, async (i) => {
      const x = [i, -i, i / 4, 1];
      const [y, stats] = await rt.runAsync({ x });
      expect(Array.from(y.data)).toEqual(expected(x));
      order.push([i, stats.data[0]]);
      maxInside = Math.max(maxInside, stats.data[1]);
      lastCount = Math.max(lastCount, stats.data[0]);
    });
    expect(maxInside).toBe(1);
    expect(lastCount).toBe(10000);
    // The instance's run count follows the call order: run i was the instance's (i+1)th.
    for (const [i, count] of order) expect(count).toBe(i + 1);
    const stats = rt.stats();
    expect(stats.completed).toBe(10000);
    expect(stats.inline + stats.offloaded).toBe(10000);
    if (offload === 'always') expect(stats.inline).toBe(0);
    if (offload === 'never') expect(stats.offloaded).toBe(0);
    expect(stats.offload).toBe(offload);
    rt.close();
  });

  test('10,000 pool runs, 64 in flight, pool of 3: every result right, never two calls inside an instance', async () => {
    const pool = createPool(fixture('slow'), { size: 3, offload, setup: (rt) => rt.set('sleep_ms', 0) });
    const expected = reference();
    let maxInside = 0;
    await lanes(64, 10000, async (i) => {
      const x = [i, 1 - i, 0.5, i % 7];
      const [y, stats] = await pool.run({ x });
      expect(Array.from(y.data)).toEqual(expected(x));
      maxInside = Math.max(maxInside, stats.data[1]);
    });
    expect(maxInside).toBe(1);
    const counts = pool.runtimes.map((rt) => rt.output(1).data[0]);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(10000);
    const stats = pool.stats();
    expect(stats.inline + stats.offloaded).toBe(10000);
    expect(stats.completed).toBe(10000);
    expect(stats.queueDepth).toBe(0);
    expect(stats.inFlight).toBe(0);
    if (offload === 'always') expect(counts.filter((c) => c > 0).length).toBe(3); // all took part
    if (offload === 'never') expect(stats.offloaded).toBe(0);
    await pool.close();
  });
});

describe('the auto policy (issue 12)', () => {
  test('a graph whose run time follows its input goes inline while fast, offloaded once slow, and timers keep firing', async () => {
    const rt = load(fixture('slow'), { offload: 'auto' });
    rt.set('sleep_ms', 0);
    expect(rt.offload).toEqual({ mode: 'auto', inline: false }); // starts offloaded, to measure
    for (let i = 0; i < 20; i++) await rt.runAsync({ x: [i, 0, 0, 0], sleep_ms: 0 });
    expect(rt.offload.inline).toBe(true);
    const inlineBefore = rt.stats().inline;
    expect(inlineBefore).toBeGreaterThan(0);
    // Slow inputs: the first slow run is measured (inline, once), every later one offloaded.
    await rt.runAsync({ x: [1, 1, 1, 1], sleep_ms: 150 });
    expect(rt.offload.inline).toBe(false);
    let ticks = 0;
    const timer = setInterval(() => {
      ticks += 1;
    }, 10);
    const [y] = await rt.runAsync({ x: [2, 2, 2, 2], sleep_ms: 300 });
    clearInterval(timer);
    expect(Array.from(y.data)).toEqual([4, 4, 4, 4]);
    expect(ticks).toBeGreaterThanOrEqual(10); // ~30 expected; shared machines are slow
    const stats = rt.stats();
    expect(stats.inline).toBe(inlineBefore + 1);
    expect(stats.offloaded).toBeGreaterThanOrEqual(2);
    expect(stats.estimatedComputeMs).toBeGreaterThan(1);
    rt.close();
  });

  test("'always' never runs inline and 'never' never leaves the JavaScript thread", async () => {
    const always = load(fixture('add'), { offload: 'always' });
    const never = load(fixture('slow'), { offload: 'never' });
    never.set('sleep_ms', 30);
    for (let i = 0; i < 50; i++) await always.runAsync({ a: [i, 0, 0, 0], b: [1, 1, 1, 1] });
    expect(always.stats()).toMatchObject({ inline: 0, offloaded: 50, decision: 'offloaded' });
    let ticks = 0;
    const timer = setInterval(() => {
      ticks += 1;
    }, 5);
    for (let i = 0; i < 3; i++) await never.runAsync({ x: [i, 0, 0, 0] });
    clearInterval(timer);
    expect(never.stats()).toMatchObject({ inline: 3, offloaded: 0, decision: 'inline' });
    expect(ticks).toBeLessThanOrEqual(3); // the loop was held through each 30 ms run
    always.close();
    never.close();
  });

  test('the offload option is checked', () => {
    expect(() => load(fixture('add'), { offload: 'sometimes' })).toThrow(TypeError);
    expect(() => load(fixture('add'), { offload: 'sometimes' })).toThrow("option offload must be 'auto', 'always' or 'never', got \"sometimes\"");
    expect(() => createPool(fixture('add'), { offload: true })).toThrow(TypeError);
  });

  test('an inline run that fails rejects its promise with the error and leaves the runtime usable', async () => {
    const rt = load(fixture('add'), { offload: 'never' });
    await expect(rt.runAsync({ a: [1, 2, 3] })).rejects.toMatchObject({ code: 'ERR_ZGC_SIZE', source: 'a' });
    await expect(rt.runAsync({ nope: 1 })).rejects.toBeInstanceOf(ZgcError);
    expect(Array.from((await rt.runAsync({ a: [1, 1, 1, 1], b: [2, 2, 2, 2] }))[0].data)).toEqual([3, 3, 3, 3]);
    rt.close();
  });
});

describe('races with a batch in flight (issue 12)', () => {
  // slow-gated: run k waits until gate[0] >= k and says it began in started[0], so which runs
  // have run, which one is held and which wait in the queue is set by the test, not by the
  // machine's speed.
  const gated = () => {
    const rt = load(fixture('slow-gated'), { offload: 'always' });
    rt.set('sleep_ms', 0);
    const gate = rt.storage('gate');
    const started = rt.storage('started');
    const held = async (k) => {
      while (started[0] < k) await new Promise((r) => setImmediate(r));
    };
    return { rt, gate, held };
  };
  test('abort of queued runs while a batch drains: the aborted never run, the others all do, in order', async () => {
    const { rt, gate, held } = gated();
    gate[0] = 5; // runs 1 to 5 go through; the 6th is held
    const controllers = Array.from({ length: 40 }, () => new AbortController());
    const runs = controllers.map((c, i) => rt.runAsync({ x: [i, 0, 0, 0] }, { signal: c.signal }).then((o) => ({ i, o }), (e) => ({ i, e })));
    await held(6); // five have run, the sixth (index 5) runs, held; the rest wait in the queue
    controllers.forEach((c, i) => i % 2 && c.abort());
    gate[0] = Infinity;
    const results = await Promise.all(runs);
    const ran = results.filter((r) => r.o);
    const aborted = results.filter((r) => r.e);
    // Exactly the odd ones still queued; index 5 had started, and a started run finishes.
    expect(aborted.map(({ i }) => i)).toEqual(Array.from({ length: 17 }, (_, k) => 7 + 2 * k));
    expect(aborted.every(({ e }) => e.name === 'AbortError')).toBe(true);
    expect(ran.length + aborted.length).toBe(40);
    ran.forEach(({ i, o: [y] }) => expect(y.data[0]).toBe(2 * i));
    // Run counts of the runs that ran are 1, 2, 3, ... in call order: no aborted run ran.
    expect(ran.map(({ o: [, stats] }) => stats.data[0])).toEqual(ran.map((_, k) => k + 1));
    rt.close();
  });

  test('close() while a batch drains: started runs finish, queued ones reject ERR_ZGC_CLOSED, nothing after', async () => {
    const { rt, gate, held } = gated();
    gate[0] = 3;
    const runs = Array.from({ length: 100 }, (_, i) => rt.runAsync({ x: [i, 0, 0, 0] }).then((o) => o, (e) => e));
    await held(4); // three have run, the fourth runs, held
    rt.close();
    gate[0] = Infinity;
    const results = await Promise.all(runs);
    const done = results.findIndex((r) => !Array.isArray(r));
    expect(done).toBe(4);
    // Every run before the first rejection ran and was right; every one after was rejected.
    results.slice(0, done).forEach(([y], i) => expect(y.data[0]).toBe(2 * i));
    results.slice(done).forEach((e) => expect(e).toMatchObject({ code: 'ERR_ZGC_CLOSED' }));
    await expect(rt.runAsync({ x: [1, 1, 1, 1] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
  });

  test('pool.close() while 500 runs are queued: all of them finish, then every instance closes', async () => {
    const pool = createPool(fixture('slow'), { size: 2, offload: 'always', setup: (rt) => rt.set('sleep_ms', 0) });
    const runs = Array.from({ length: 500 }, (_, i) => pool.run({ x: [i, 0, 0, 0] }));
    const closing = pool.close();
    await expect(pool.run({ x: [0, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
    const results = await Promise.all(runs);
    results.forEach(([y], i) => expect(y.data[0]).toBe(2 * i));
    await closing;
    expect(pool.runtimes.every((rt) => rt.closed)).toBe(true);
  });
});

describe('pool.stats(): what a service exports (issue 12)', () => {
  test('completed runs, queue depth and in flight while busy, latency percentiles, inline and offloaded counts', async () => {
    const pool = createPool(fixture('slow'), { size: 1, maxQueue: 10, offload: 'always', setup: (rt) => rt.set('sleep_ms', 20) });
    const runs = Array.from({ length: 5 }, (_, i) => pool.run({ x: [i, 0, 0, 0] }));
    const busy = pool.stats();
    expect(busy.inFlight).toBe(1);
    expect(busy.queueDepth).toBe(4);
    expect(pool.pending).toBe(4);
    await Promise.all(runs);
    const stats = pool.stats();
    expect(stats).toMatchObject({ completed: 5, failed: 0, queueDepth: 0, inFlight: 0, inline: 0, offloaded: 5, offload: 'always', decision: 'offloaded' });
    // Each run slept 20 ms: compute at least that; the last waited behind four others.
    expect(stats.computeMs.p50).toBeGreaterThanOrEqual(19);
    expect(stats.queueWaitMs.p99).toBeGreaterThanOrEqual(60);
    expect(stats.queueWaitMs.p50).toBeLessThanOrEqual(stats.queueWaitMs.p99);
    expect(stats.estimatedHopMs).not.toBeNull();
    // The histograms (for Prometheus) count every completed run, in milliseconds.
    for (const h of [stats.computeHistogram, stats.queueWaitHistogram]) {
      expect(h.count).toBe(5);
      expect(h.counts.reduce((a, b) => a + b, 0)).toBe(5);
      expect(h.counts.length).toBe(h.boundsMs.length + 1);
    }
    expect(stats.computeHistogram.sumMs).toBeGreaterThanOrEqual(5 * 19);
    await pool.close();
  });

  test('before any run the percentiles are null; runs the artifact fails are counted apart', async () => {
    const pool = createPool(fixture('status'), {
      size: 1,
      offload: 'always',
      setup: (rt) => {
        rt.set('copy_status', 0);
        rt.set('bind_status', 0);
        rt.set('buf', [1, 2]);
      },
    });
    expect(pool.stats()).toMatchObject({ completed: 0, failed: 0, queueWaitMs: { p50: null, p90: null, p99: null } });
    await expect(pool.run({ run_status: 8 })).rejects.toMatchObject({ code: 'ERR_ZGC_MISSING_BINDING' });
    // Refused while staging (a wrong array): never queued, so not a run at all.
    await expect(pool.run({ run_status: new Float32Array(1) })).rejects.toMatchObject({ code: 'ERR_ZGC_DTYPE' });
    expect((await pool.run({ run_status: 0 }))[0].data[0]).toBe(3);
    expect(pool.stats()).toMatchObject({ completed: 1, failed: 1 });
    await pool.close();
  });
});
