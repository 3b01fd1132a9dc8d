'use strict';

// pool.run({ priority }) (issue 38): with the pool's one instance busy, queued runs start by
// priority, higher first, and in call order within one priority, in-process and isolated.
const { createPool } = require('../..');
const { fixture } = require('../helpers');

const MODES = [{ offload: 'always' }, ...(process.platform === 'linux' ? [{ isolate: 'process' }] : [])];

describe.each(MODES)('pool.run priority (%j)', (mode) => {
  test('queued runs start higher priority first, in call order within a priority', async () => {
    // slow-gated: the instance's run k waits until gate[0] >= k and says it began in
    // started[0], so the first run is held on the instance, by construction, while the others queue.
    let gate;
    let started;
    const pool = createPool(fixture('slow-gated'), {
      size: 1,
      ...mode,
      setup: (rt) => {
        rt.set('sleep_ms', 0);
        gate = rt.storage('gate');
        started = rt.storage('started');
      },
    });
    try {
      const order = [];
      const run = (label, priority) => pool.run({ x: [label, 0, 0, 0] }, priority === undefined ? undefined : { priority }).then(([y]) => order.push(y.data[0] / 2));
      const busy = run(100);
      // The instance has taken the first run, and holds it: the others wait.
      while (started[0] < 1) await new Promise((r) => setImmediate(r));
      const queued = [run(1, 0), run(2, 5), run(3, -1), run(4, 5), run(5, 9), run(6), run(7, -2147483648), run(8, 2147483647)];
      gate[0] = Infinity;
      await Promise.all([busy, ...queued]);
      expect(order).toEqual([100, 8, 5, 2, 4, 1, 6, 3, 7]);
    } finally {
      await pool.close();
    }
  }, 20000);

  test('a priority that is no 32-bit integer is refused, naming it', async () => {
    const pool = createPool(fixture('slow'), { size: 1, ...mode, setup: (rt) => rt.set('sleep_ms', 0) });
    try {
      for (const bad of [1.5, 2 ** 31, -(2 ** 31) - 1, '3', NaN]) {
        const shown = typeof bad === 'number' ? bad : JSON.stringify(bad);
        await expect(pool.run({ x: [1, 2, 3, 4] }, { priority: bad })).rejects.toThrow(new RangeError(`pool.run() option priority must be an integer from -2147483648 to 2147483647, got ${shown}`));
      }
      // And the pool runs on.
      expect(Array.from((await pool.run({ x: [1, 2, 3, 4] }, { priority: 3 }))[0].data)).toEqual([2, 4, 6, 8]);
    } finally {
      await pool.close();
    }
  });
});
