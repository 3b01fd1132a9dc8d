'use strict';

const os = require('node:os');
const { createPool, ZgcError } = require('../..');
const { fixture } = require('../helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('createPool', () => {
  test('10,000 async runs with 64 in flight give correct results, never overlapping inside an instance', async () => {
    // 'always': with 'auto' a graph this small runs inline, on the first instance only.
    const pool = createPool(fixture('slow'), { size: 4, offload: 'always', setup: (rt) => rt.set('sleep_ms', 0) });
    expect(pool.size).toBe(4);
    const total = 10000;
    let next = 0;
    let maxInside = 0;
    let runsSeen = 0;
    async function lane() {
      while (next < total) {
        const i = next++;
        const [y, stats] = await pool.run({ x: [i, -i, i / 2, 1] });
        if (y.data[0] !== 2 * i || y.data[1] !== -2 * i || y.data[2] !== i || y.data[3] !== 2) throw new Error(`run ${i} gave ${Array.from(y.data)}`);
        maxInside = Math.max(maxInside, stats.data[1]);
        runsSeen += 1;
      }
    }
    await Promise.all(Array.from({ length: 64 }, lane));
    expect(runsSeen).toBe(total);
    expect(maxInside).toBe(1);
    // Every instance took part, and their run counts add up.
    const counts = pool.runtimes.map((rt) => rt.output(1).data[0]);
    expect(counts.every((c) => c > 0)).toBe(true);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(total);
    await pool.close();
  });

  test('instances of a pool run in parallel (two sleeping runs overlap in the library)', async () => {
    const pool = createPool(fixture('slow'), { size: 2, setup: (rt) => rt.set('sleep_ms', 100) });
    const results = await Promise.all([pool.run({ x: [1, 1, 1, 1] }), pool.run({ x: [2, 2, 2, 2] })]);
    expect(Math.max(...results.map(([, stats]) => stats.data[2]))).toBe(2);
    await pool.close();
  });

  test('setup applies parameters to every instance', async () => {
    const seen = [];
    const pool = createPool(fixture('malformed-base'), {
      size: 3,
      setup: (rt, i) => {
        seen.push(i);
        rt.set('w', [10, 20, 30, 40]);
      },
    });
    expect(seen).toEqual([0, 1, 2]);
    const outs = await Promise.all(Array.from({ length: 9 }, (_, i) => pool.run({ a: [i, 0, 0, 0] })));
    outs.forEach(([y], i) => expect(Array.from(y.data)).toEqual([10 + i, 20, 30, 40]));
    await pool.close();
  });

  test('a full queue rejects with ERR_ZGC_QUEUE_FULL', async () => {
    const pool = createPool(fixture('slow'), { size: 1, maxQueue: 2, setup: (rt) => rt.set('sleep_ms', 60) });
    const accepted = [pool.run({ x: [1, 1, 1, 1] }), pool.run({ x: [2, 2, 2, 2] }), pool.run({ x: [3, 3, 3, 3] })];
    expect(pool.inFlight).toBe(1);
    expect(pool.pending).toBe(2);
    const err = await pool.run({ x: [4, 4, 4, 4] }).catch((e) => e);
    expect(err).toBeInstanceOf(ZgcError);
    expect(err.code).toBe('ERR_ZGC_QUEUE_FULL');
    expect(err.message).toMatch(/maxQueue 2/);
    const results = await Promise.all(accepted);
    expect(results.map(([y]) => y.data[0])).toEqual([2, 4, 6]);
    await pool.close();
  });

  test('an aborted signal removes a queued run', async () => {
    // Long enough that the second run is still queued behind the first on an emulated platform too.
    const pool = createPool(fixture('slow'), { size: 1, setup: (rt) => rt.set('sleep_ms', 400) });
    const controller = new AbortController();
    const first = pool.run({ x: [1, 1, 1, 1] });
    const second = pool.run({ x: [2, 2, 2, 2] }, { signal: controller.signal }).catch((e) => e);
    expect(pool.pending).toBe(1);
    controller.abort();
    expect(pool.pending).toBe(0);
    expect((await second).name).toBe('AbortError');
    await first;
    await pool.close();
  });

  test('close() drains queued and running work, then refuses new runs', async () => {
    const pool = createPool(fixture('slow'), { size: 2, setup: (rt) => rt.set('sleep_ms', 20) });
    const runs = Array.from({ length: 8 }, (_, i) => pool.run({ x: [i, 0, 0, 0] }));
    const closing = pool.close();
    await expect(pool.run({ x: [0, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
    const results = await Promise.all(runs);
    expect(results.map(([y]) => y.data[0])).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
    await closing;
    expect(pool.closed).toBe(true);
    expect(pool.runtimes.every((rt) => rt.closed)).toBe(true);
    expect(pool.close()).toBe(closing);
  });

  test('defaults to one instance per CPU and validates its options', async () => {
    const pool = createPool(fixture('add'));
    expect(pool.size).toBe(os.availableParallelism());
    await pool.close();
    expect(() => createPool(fixture('add'), { size: 0 })).toThrow(RangeError);
    expect(() => createPool(fixture('add'), { maxQueue: -1 })).toThrow(RangeError);
    expect(() => createPool(fixture('add'), { setup: 5 })).toThrow(TypeError);
    const refused = (options, error) => expect(() => createPool(fixture('add'), options)).toThrow(error);
    refused(null, new TypeError('createPool options must be an object'));
    refused(5, new TypeError('createPool options must be an object'));
    refused({ size: 1.5 }, new RangeError('pool size must be a positive integer, got 1.5'));
    refused({ size: '2' }, new RangeError('pool size must be a positive integer, got 2'));
    refused({ maxQueue: 1.5 }, new RangeError('pool maxQueue must be a non-negative integer, got 1.5'));
    refused({ maxQueue: NaN }, new RangeError('pool maxQueue must be a non-negative integer, got NaN'));
    refused({ maxQueue: -Infinity }, new RangeError('pool maxQueue must be a non-negative integer, got -Infinity'));
    refused({ setup: 'rt.set()' }, new TypeError('pool setup must be a function'));
    expect(() => createPool(fixture('not-a-library'))).toThrow(expect.objectContaining({ code: 'ERR_ZGC_LOAD' }));
    expect(() =>
      createPool(fixture('add'), {
        setup: () => {
          throw new Error('setup failed');
        },
      }),
    ).toThrow('setup failed');
  });

  test('maxQueue 0 runs only on a free instance; Infinity never refuses', async () => {
    const none = createPool(fixture('slow'), { size: 1, maxQueue: 0, offload: 'always', setup: (rt) => rt.set('sleep_ms', 30) });
    const running = none.run({ x: [1, 1, 1, 1] });
    await expect(none.run({ x: [2, 2, 2, 2] })).rejects.toMatchObject({ code: 'ERR_ZGC_QUEUE_FULL' });
    expect((await running)[0].data[0]).toBe(2);
    await none.close();
    const unbounded = createPool(fixture('slow'), { size: 1, maxQueue: Infinity, offload: 'always', setup: (rt) => rt.set('sleep_ms', 0) });
    const results = await Promise.all(Array.from({ length: 3000 }, (_, i) => unbounded.run({ x: [i, 0, 0, 0] })));
    expect(results.every(([y], i) => y.data[0] === 2 * i)).toBe(true);
    await unbounded.close();
  });

  test('run() options: null means none, a signal must be an AbortSignal, its reason is the rejection', async () => {
    const pool = createPool(fixture('add'), { size: 1 });
    expect(Array.from((await pool.run({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] }, null))[0].data)).toEqual([2, 3, 4, 5]);
    await expect(pool.run({}, { signal: 'stop' })).rejects.toEqual(new TypeError('pool.run option signal must be an AbortSignal'));
    const reason = new Error('deadline');
    await expect(pool.run({}, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await pool.close();
    // Closed comes first, whatever else is wrong.
    await expect(pool.run({ nope: 1 }, { signal: 'stop' })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED', message: 'pool is closed' });
  });

  test("the server's inline path refuses a closed pool too", async () => {
    const { runNow } = require('../../lib/pool');
    const pool = createPool(fixture('add'), { size: 1, offload: 'never' });
    expect(Array.from(runNow(pool, { a: [1, 1, 1, 1], b: [2, 2, 2, 2] })[0].data)).toEqual([3, 3, 3, 3]);
    await pool.close();
    expect(() => runNow(pool, {})).toThrow(expect.objectContaining({ code: 'ERR_ZGC_CLOSED', message: 'pool is closed' }));
  });

  test('Symbol.asyncDispose closes the pool', async () => {
    const pool = createPool(fixture('add'), { size: 2 });
    const closing = pool[Symbol.asyncDispose]();
    expect(pool.closed).toBe(true);
    await closing;
    expect(pool.runtimes.every((rt) => rt.closed)).toBe(true);
  });

  test("f16 outputs of a pool's runs are float32 values, or their bits with { f16: 'bits' }", async () => {
    const tag = (array) => Object.prototype.toString.call(array).slice(8, -1);
    const x = Float32Array.from({ length: 1 << 20 }, (_, k) => k / 4);
    const { f16Bits, f16Round } = require('../helpers');
    for (const offload of ['always', 'never']) {
      const values = createPool(fixture('half'), { size: 1, offload });
      const [v] = await values.run({ x });
      expect(tag(v.data)).toBe('Float32Array');
      expect([v.data[3], v.data[4097]]).toEqual([f16Round(0.75), f16Round(4097 / 4)]);
      await values.close();
      const bits = createPool(fixture('half'), { size: 1, offload, f16: 'bits' });
      const [b] = await bits.run({ x });
      expect(tag(b.data)).toBe('Uint16Array');
      expect([b.data[3], b.data[4097]]).toEqual([f16Bits(0.75), f16Bits(4097 / 4)]);
      await bits.close();
    }
  });

  test('pool inputs are taken at call time, even while they wait in the queue', async () => {
    const pool = createPool(fixture('slow'), { size: 1, setup: (rt) => rt.set('sleep_ms', 30) });
    const busy = pool.run({ x: [0, 0, 0, 0] });
    const x = new Float32Array([5, 6, 7, 8]);
    const waiting = pool.run({ x });
    x.fill(-1);
    await busy;
    expect(Array.from((await waiting)[0].data)).toEqual([10, 12, 14, 16]);
    await sleep(0);
    await pool.close();
  });
});

describe("a pool's auto policy", () => {
  test('a tiny graph goes inline once measured, but never ahead of runs still queued', async () => {
    const pool = createPool(fixture('slow'), { size: 1, setup: (rt) => rt.set('sleep_ms', 0) });
    const order = [];
    // 16 lanes: runs queue while the policy measures, and later ones arrive while some still wait.
    await Promise.all(
      Array.from({ length: 16 }, async (_, lane) => {
        for (let j = 0; j < 50; j++) {
          const [y, stats] = await pool.run({ x: [lane, j, 0, 0] });
          expect([y.data[0], y.data[1]]).toEqual([2 * lane, 2 * j]);
          order.push(stats.data[0]);
        }
      }),
    );
    // Each run saw the instance's run count one higher than the run that finished before it.
    expect(order).toEqual(Array.from({ length: 800 }, (_, i) => i + 1));
    expect(pool.stats().completed).toBe(800);
    await pool.close();
  });

  test('fast runs bring it inline, a slow one sends it back off the thread, as for a runtime', async () => {
    const pool = createPool(fixture('slow'), { size: 1, setup: (rt) => rt.set('sleep_ms', 0) });
    // Each decision compares measured times: on a busy machine one run may measure slow and
    // go back off the thread, so the fast runs go on until one has run inline (or 500 have not).
    const inline = () => pool.stats().inline > 0 && pool.stats().decision === 'inline';
    for (let i = 0; i < 500 && !inline(); i++) await pool.run({ x: [i % 8, 0, 0, 0], sleep_ms: 0 });
    const before = pool.stats();
    expect(before.inline).toBeGreaterThan(0);
    expect(before.decision).toBe('inline');
    // The first slow run is measured inline, once; the next goes off the thread.
    await pool.run({ x: [1, 1, 1, 1], sleep_ms: 100 });
    const [y] = await pool.run({ x: [2, 2, 2, 2], sleep_ms: 100 });
    expect(Array.from(y.data)).toEqual([4, 4, 4, 4]);
    const after = pool.stats();
    expect(after.inline).toBe(before.inline + 1);
    expect(after.offloaded).toBe(before.offloaded + 1);
    await pool.close();
  });
});
