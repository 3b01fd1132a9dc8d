'use strict';

// Isolated instances on the one engine (issue 47): runs answered inline or, past a short wait,
// by the instance's worker, with their deadlines and aborts; a pool's runs the same way; the
// stats of a pool's processes. Races are held by construction: a run of the faulty fixture
// (mode 7) waits in its child until the test releases it.
const { load, createPool, ZgcError } = require('../..');
const { fixture } = require('../helpers');
const { ISO, x, expected, alive, holdFile, clearFaultyEnv } = require('./faulty');

clearFaultyEnv();

describe('isolated instances run on the one engine (issue 47)', () => {
  test("an async run is answered inline or, past a short wait, by the instance's worker: a held one leaves the call at once", async () => {
    const hold = holdFile();
    const rt = load(fixture('faulty'), { ...ISO, offload: 'never' });
    for (let i = 0; i < 20; i++) expect(Array.from((await rt.runAsync({ x, mode: 0, id: i }))[0].data)).toEqual(expected(x));
    // Each answered inline or, past the short wait (a slow machine, an emulator), by the
    // worker: counted once either way.
    const before = rt.stats();
    expect(before.completed).toBe(20);
    expect(before.inline + before.offloaded).toBe(20);
    // Held in the child until released: were the call waiting for it, this test could never
    // release it.
    const held = rt.runAsync({ x, mode: 7, id: 100 });
    expect(rt.stats().inFlight).toBe(1);
    expect(() => rt.set('x', x)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_BUSY' }));
    hold.release();
    expect(Array.from((await held)[0].data)).toEqual(expected(x));
    expect(rt.stats()).toMatchObject({ completed: 21, inline: before.inline, offloaded: before.offloaded + 1, inFlight: 0 });
    // The instance takes the next inline run as before.
    expect(Array.from((await rt.runAsync({ x, mode: 0, id: 101 }))[0].data)).toEqual(expected(x));
    rt.close();
  });

  test('a run left going keeps its deadline and its abort', async () => {
    const rt = load(fixture('faulty'), { ...ISO, offload: 'never' });
    await expect(rt.runAsync({ x, mode: 4, id: 1 }, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'ERR_ZGC_TIMEOUT', timeoutMs: 100 });
    const controller = new AbortController();
    const hung = rt.runAsync({ x, mode: 4, id: 2 }, { signal: controller.signal });
    controller.abort(new Error('enough'));
    await expect(hung).rejects.toThrow('enough');
    expect(rt.stats()).toMatchObject({ timeouts: 1, aborts: 1, restarts: 2, alive: 1 });
    expect(Array.from((await rt.runAsync({ x, mode: 0, id: 3 }))[0].data)).toEqual(expected(x));
    rt.close();
  });

  test("a pool's runs go inline while nothing waits; one held on its instance is left to that instance's worker, and the other takes the next", async () => {
    const hold = holdFile();
    const pool = createPool(fixture('faulty'), { ...ISO, size: 2, offload: 'never' });
    for (let i = 0; i < 10; i++) expect(Array.from((await pool.run({ x, mode: 0, id: i }))[0].data)).toEqual(expected(x));
    const before = pool.stats();
    expect(before.completed).toBe(10);
    expect(before.inline + before.offloaded).toBe(10);
    // Held in the child until released: were the call waiting for it, nothing below could run.
    const held = pool.run({ x, mode: 7, id: 100 });
    expect(Array.from((await pool.run({ x, mode: 0, id: 101 }))[0].data)).toEqual(expected(x));
    hold.release();
    expect(Array.from((await held)[0].data)).toEqual(expected(x));
    expect(pool.stats()).toMatchObject({ completed: 12, inline: before.inline, offloaded: before.offloaded + 2, inFlight: 0, queueDepth: 0 });
    await pool.close();
  });

  test('a run left going counts as running, not waiting, against maxQueue', async () => {
    const hold = holdFile();
    const pool = createPool(fixture('faulty'), { ...ISO, size: 1, maxQueue: 2, offload: 'never' });
    // Held in its child: left going by the inline call, whatever the machine's speed.
    const held = pool.run({ x, mode: 7, id: 0 });
    const queued = [1, 2].map((id) => pool.run({ x, mode: 0, id }));
    expect(pool.stats()).toMatchObject({ inFlight: 1, queueDepth: 2 });
    const err = await pool.run({ x, mode: 0, id: 3 }).catch((e) => e);
    expect(err).toBeInstanceOf(ZgcError);
    expect([err.code, err.message]).toEqual(['ERR_ZGC_QUEUE_FULL', 'queue is full: 2 runs wait for 1 instance(s) (maxQueue 2)']);
    hold.release();
    for (const run of [held, ...queued]) expect(Array.from((await run)[0].data)).toEqual(expected(x));
    await pool.close();
  });

  test("a pool's stats add each instance's faults and pid; a closed one's are kept, without pids", async () => {
    const pool = createPool(fixture('faulty'), { ...ISO, size: 2 });
    const pids = pool.stats().pids;
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(alive(pid)).toBe(true);
    await expect(pool.run({ x, mode: 1, id: 1 })).rejects.toMatchObject({ code: 'ERR_ZGC_INSTANCE_CRASHED' });
    expect(pool.stats()).toMatchObject({ crashes: 1, restarts: 1, alive: 2, failed: 1, offload: 'process' });
    await pool.close();
    expect(pool.stats()).toMatchObject({ crashes: 1, restarts: 1, alive: 0, pids: [null, null] });
    expect(pool.runtimes.map((rt) => rt.pid)).toEqual([undefined, undefined]);
  });
});
