'use strict';

const os = require('node:os');
const { createPool, ZgcError } = require('..');
const { fixture } = require('./helpers');

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
    const pool = createPool(fixture('slow'), { size: 1, setup: (rt) => rt.set('sleep_ms', 50) });
    const controller = new AbortController();
    const first = pool.run({ x: [1, 1, 1, 1] });
    const second = pool.run({ x: [2, 2, 2, 2] }, { signal: controller.signal }).catch((e) => e);
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
    expect(() => createPool(fixture('not-a-library'))).toThrow(expect.objectContaining({ code: 'ERR_ZGC_LOAD' }));
    expect(() =>
      createPool(fixture('add'), {
        setup: () => {
          throw new Error('setup failed');
        },
      }),
    ).toThrow('setup failed');
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
