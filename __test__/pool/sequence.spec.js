'use strict';

// pool.sequence() (issue 39): runs that keep their own STATE between them. accum.c keeps a
// running sum and a step count in its BOUND STATE source h; each sequence is checked against
// the same inputs run alone, synchronously, on a runtime of its own, and against the sums
// done here.
const { createPool, load, Sequence } = require('../..');
const { fixture, rng } = require('../helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The sequence's inputs run one after another on a fresh runtime: each run's y and steps. */
function alone(inputs, initial = [0, 0, 0, 0, 0]) {
  const rt = load(fixture('accum'));
  try {
    rt.storage('h').set(initial);
    return inputs.map((x) => {
      const [y, steps] = rt.run({ x });
      return [Array.from(y.data), steps.data[0]];
    });
  } finally {
    rt.close();
  }
}

const MODES = [{ offload: 'always' }, { offload: 'auto' }];

describe.each(MODES)('pool.sequence() (%j)', (mode) => {
  test('50 interleaved sequences over a pool of 2: each run sees its own sequence\'s state alone', async () => {
    const pool = createPool(fixture('accum'), { size: 2, ...mode, setup: (rt) => rt.storage('h') });
    try {
      const random = rng(50);
      const sequences = Array.from({ length: 50 }, () => ({ seq: pool.sequence(), inputs: [] }));
      expect(sequences[0].seq).toBeInstanceOf(Sequence);
      expect(sequences[0].seq.strategy).toBe('lent');
      expect(sequences[0].seq.ended).toBe(null);
      // 400 runs in a random order of sequences, all in flight at once.
      const pending = [];
      for (let i = 0; i < 400; i++) {
        const s = sequences[Math.floor(random() * 50)];
        const x = Array.from({ length: 4 }, () => Math.round(random() * 32 - 16) / 2);
        s.inputs.push(x);
        const at = s.inputs.length - 1;
        pending.push(s.seq.run({ x }).then(([y, steps]) => ({ s, at, y: Array.from(y.data), steps: steps.data[0] })));
      }
      const results = await Promise.all(pending);
      for (const s of sequences) s.expected = alone(s.inputs);
      for (const { s, at, y, steps } of results) {
        expect([y, steps]).toEqual(s.expected[at]);
        // The running sum, done here.
        const sum = [0, 1, 2, 3].map((k) => s.inputs.slice(0, at + 1).reduce((a, x) => a + x[k], 0));
        expect(y).toEqual(sum);
        expect(steps).toBe(at + 1);
      }
      expect(sequences.reduce((n, s) => n + s.seq.runs, 0)).toBe(400);
      await Promise.all(sequences.map((s) => s.seq.close()));
    } finally {
      await pool.close();
    }
  }, 60000);

  test("a plain run between sequence runs keeps its instance's own state", async () => {
    const pool = createPool(fixture('accum'), { size: 1, ...mode, setup: (rt) => rt.storage('h') });
    try {
      const seq = pool.sequence();
      const out = await Promise.all([seq.run({ x: [1, 0, 0, 0] }), pool.run({ x: [0, 10, 0, 0] }), seq.run({ x: [1, 0, 0, 0] }), pool.run({ x: [0, 10, 0, 0] })]);
      expect(out.map(([y, steps]) => [Array.from(y.data), steps.data[0]])).toEqual([
        [[1, 0, 0, 0], 1],
        [[0, 10, 0, 0], 1],
        [[2, 0, 0, 0], 2],
        [[0, 20, 0, 0], 2],
      ]);
      await seq.close();
    } finally {
      await pool.close();
    }
  });

  test('initialState is where a sequence starts; a new sequence starts there again', async () => {
    const pool = createPool(fixture('accum'), { size: 2, ...mode, setup: (rt) => rt.storage('h') });
    try {
      const initial = [10, 20, 30, 40, 5];
      const a = pool.sequence({ initialState: { h: initial } });
      const b = pool.sequence({ initialState: { h: Float32Array.from(initial) } });
      const [[ya, sa], [yb, sb]] = await Promise.all([a.run({ x: [1, 1, 1, 1] }), b.run({ x: [2, 2, 2, 2] })]);
      expect([Array.from(ya.data), sa.data[0]]).toEqual(alone([[1, 1, 1, 1]], initial)[0]);
      expect([Array.from(yb.data), sb.data[0]]).toEqual([[12, 22, 32, 42], 6]);
      await Promise.all([a.close(), b.close()]);
    } finally {
      await pool.close();
    }
  });
});

describe('pool.sequence() refuses, naming the problem', () => {
  let pool;
  beforeAll(() => {
    pool = createPool(fixture('accum'), { size: 1, offload: 'always', setup: (rt) => rt.storage('h') });
  });
  afterAll(() => pool.close());

  test('inputs that name the state, and a state of the wrong size', async () => {
    const seq = pool.sequence();
    await expect(seq.run({ x: [1, 1, 1, 1], h: [0, 0, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_VALUE', source: 'h', message: 'source "h" is the sequence\'s STATE: it is kept between runs, not given to one (set it with initialState)' });
    expect(() => pool.sequence({ initialState: { h: [1, 2] } })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_SIZE', source: 'h' }));
    expect(() => pool.sequence({ initialState: { x: [1, 2, 3, 4] } })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_UNKNOWN_SOURCE', message: 'initialState names "x", which is no STATE source (the artifact\'s: h)' }));
    expect(() => pool.sequence({ state: {} })).toThrow(/has no option "state"/);
    expect(() => pool.sequence(null)).toThrow(new TypeError('pool.sequence() options must be an object'));
    expect(() => pool.sequence({ initialState: null })).toThrow(new TypeError('pool.sequence() option initialState must be an object of STATE source names to values'));
    for (const waitMs of [-1, NaN, Infinity, '5']) expect(() => pool.sequence({ waitMs })).toThrow(new RangeError(`pool.sequence() option waitMs must be a finite number >= 0, got ${String(waitMs)}`));
    await expect(seq.run({ x: [1, 1, 1, 1] }, { timeoutMs: 5 })).rejects.toThrow(/sequence\.run\(\) has no option "timeoutMs"/);
    await expect(seq.run({ x: [1, 1, 1, 1] }, { signal: 'stop' })).rejects.toThrow(new TypeError('sequence.run option signal must be an AbortSignal'));
    await expect(seq.run({ x: [1, 1, 1, 1] }, { priority: 0.5 })).rejects.toThrow(/sequence\.run\(\) option priority/);
    // Refusals left the sequence as it was.
    const [y, steps] = await seq.run({ x: [1, 1, 1, 1] });
    expect([Array.from(y.data), steps.data[0]]).toEqual([[1, 1, 1, 1], 1]);
    // No inputs: a run as pool.run() makes one, on the instance's own inputs (x as the last run left it).
    const [y2, steps2] = await seq.run();
    expect([Array.from(y2.data), steps2.data[0]]).toEqual([[2, 2, 2, 2], 2]);
    await seq.close();
  });

  test('a closed sequence, after its runs are over', async () => {
    const seq = pool.sequence();
    const last = seq.run({ x: [3, 0, 0, 0] });
    const closing = seq.close();
    await expect(seq.run({ x: [1, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED', message: 'sequence is closed' });
    await closing;
    // The run made before close() was still run.
    expect((await last)[0].data[0]).toBe(3);
    expect(seq.closed).toBe(true);
  });

  test('an aborted run never runs: the next one continues from the state before it', async () => {
    const seq = pool.sequence();
    const controller = new AbortController();
    const first = seq.run({ x: [1, 0, 0, 0] });
    const aborted = seq.run({ x: [100, 0, 0, 0] }, { signal: controller.signal });
    controller.abort(new Error('not wanted'));
    const third = seq.run({ x: [1, 0, 0, 0] });
    await expect(aborted).rejects.toThrow('not wanted');
    expect((await first)[1].data[0]).toBe(1);
    const [y, steps] = await third;
    expect([y.data[0], steps.data[0]]).toEqual([2, 2]);
    await expect(seq.run({}, { signal: AbortSignal.abort(new Error('already')) })).rejects.toThrow('already');
    await seq.close();
  });

  test.each([
    ['no STATE source', () => createPool(fixture('add'), { size: 1 }), /has no STATE source: a sequence keeps STATE between its runs/],
    ...(process.platform === 'linux' ? [['no STATE source, isolated', () => createPool(fixture('add'), { size: 1, isolate: 'process' }), /has no STATE source/]] : []),
  ])('%s: ERR_ZGC_SEQUENCE', async (_, make, message) => {
    const p = make();
    try {
      expect(() => p.sequence()).toThrow(expect.objectContaining({ code: 'ERR_ZGC_SEQUENCE', message: expect.stringMatching(message) }));
    } finally {
      await p.close();
    }
  });

  test('a closed pool', async () => {
    const p = createPool(fixture('accum'), { size: 1, setup: (rt) => rt.storage('h') });
    const seq = p.sequence();
    await p.close();
    await expect(seq.run({ x: [1, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED', message: 'pool is closed' });
    expect(() => p.sequence()).toThrow(expect.objectContaining({ code: 'ERR_ZGC_CLOSED' }));
    await sleep(0);
  });
});

/** accum-owned's steps run alone on a fresh runtime (its OWNED state starts at its init's zeros). */
function aloneOwned(inputs, initial) {
  const rt = load(fixture('accum-owned'));
  try {
    if (initial) rt.set('h', initial);
    return inputs.map((x) => {
      const [y, steps] = rt.run({ x });
      return [Array.from(y.data), steps.data[0]];
    });
  } finally {
    rt.close();
  }
}

const DIRECT = [
  ['OWNED state', (size) => createPool(fixture('accum-owned'), { size, offload: 'always' }), aloneOwned],
  ...(process.platform === 'linux' ? [['an isolated pool', (size) => createPool(fixture('accum'), { size, isolate: 'process', setup: (rt) => rt.storage('h') }), (inputs, initial) => alone(inputs, initial)]] : []),
];

describe.each(DIRECT)('direct sequences: %s (each holds an instance of its own)', (_, makePool, reference) => {
  test('6 sequences over 2 instances: each waits its turn for one, and sees its own state alone', async () => {
    const pool = makePool(2);
    try {
      const random = rng(6);
      const runs = Array.from({ length: 6 }, (__, s) => {
        const inputs = Array.from({ length: 4 }, () => [Math.round(random() * 20), s, 0, 1]);
        const initial = s % 2 === 0 ? undefined : [s * 10, 0, 0, 0, 0];
        const seq = pool.sequence({ waitMs: 30000, ...(initial ? { initialState: { h: initial } } : {}) });
        expect(seq.strategy).toBe('direct');
        return Promise.all(inputs.map((x) => seq.run({ x }))).then(async (out) => {
          await seq.close();
          return { inputs, initial, out: out.map(([y, steps]) => [Array.from(y.data), steps.data[0]]) };
        });
      });
      for (const { inputs, initial, out } of await Promise.all(runs)) expect(out).toEqual(reference(inputs, initial || [0, 0, 0, 0, 0]));
    } finally {
      await pool.close();
    }
  }, 60000);

  test('with every instance held, a sequence that cannot wait is refused ERR_ZGC_QUEUE_FULL; one that waits gets the instance let go', async () => {
    const pool = makePool(1);
    try {
      const holder = pool.sequence();
      await holder.run({ x: [1, 0, 0, 0] });
      const refused = pool.sequence();
      await expect(refused.run({ x: [1, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_QUEUE_FULL', message: expect.stringMatching(/every instance is held by a sequence \(1\), and none was let go within waitMs 0/) });
      const waiting = pool.sequence({ waitMs: 30000 });
      const next = waiting.run({ x: [5, 0, 0, 0] });
      await holder.close();
      // A new instance: its state starts again.
      const [y, steps] = await next;
      expect([y.data[0], steps.data[0]]).toEqual([5, 1]);
      await Promise.all([waiting.close(), refused.close()]);
    } finally {
      await pool.close();
    }
  }, 30000);
});

describe.each(DIRECT)('direct sequences: %s, their runs and their instances', (_, makePool) => {
  test("inputs are copied at the call: arrays changed while the run waits behind the sequence's earlier one change nothing", async () => {
    const pool = makePool(1);
    try {
      const seq = pool.sequence();
      const x = Float32Array.of(2, 0, 0, 0);
      const plain = [3, 0, 0, 0];
      const runs = [seq.run({ x: [1, 0, 0, 0] }), seq.run({ x }), seq.run({ x: plain })];
      x.fill(100);
      plain.fill(100);
      expect((await Promise.all(runs)).map(([y]) => y.data[0])).toEqual([1, 3, 6]);
      await seq.close();
    } finally {
      await pool.close();
    }
  }, 30000);

  test('a run refused for its inputs leaves the sequence going, its state as it was; a run with none uses the last', async () => {
    const pool = makePool(1);
    try {
      const seq = pool.sequence();
      await seq.run({ x: [1, 0, 0, 0] });
      // No inputs: x as the last run left it on the instance the sequence holds.
      expect((await seq.run())[1].data[0]).toBe(2);
      await seq.run({ x: [-1, 0, 0, 0] });
      await expect(seq.run({ x: [1, 2] })).rejects.toMatchObject({ code: 'ERR_ZGC_SIZE' });
      expect(seq.ended).toBe(null);
      const [y, steps] = await seq.run({ x: [1, 0, 0, 0] });
      expect([y.data[0], steps.data[0]]).toEqual([2, 4]);
      await seq.close();
    } finally {
      await pool.close();
    }
  }, 30000);

  test('closing the pool refuses a sequence waiting for an instance, and closes the ones held', async () => {
    const pool = makePool(1);
    const holder = pool.sequence();
    await holder.run({ x: [1, 0, 0, 0] });
    const waiting = pool.sequence({ waitMs: 30000 }).run({ x: [1, 0, 0, 0] });
    await sleep(20);
    const started = Date.now();
    await pool.close();
    await expect(waiting).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED', message: 'pool is closed' });
    expect(Date.now() - started).toBeLessThan(10000);
    await expect(holder.run({ x: [1, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
  }, 30000);
});

test("a direct sequence's instance runs the pool's setup with its own slot, 0 to size - 1", async () => {
  const slots = [];
  const pool = createPool(fixture('accum-owned'), { size: 2, offload: 'always', setup: (rt, slot) => slots.push(slot) });
  try {
    const seqs = [pool.sequence(), pool.sequence()];
    await Promise.all(seqs.map((q) => q.run({ x: [1, 0, 0, 0] })));
    // The pool's own two instances, then one for each sequence.
    expect(slots.slice(0, 2)).toEqual([0, 1]);
    expect(slots.slice(2).sort()).toEqual([0, 1]);
    await Promise.all(seqs.map((q) => q.close()));
  } finally {
    await pool.close();
  }
});

test("a direct sequence's instance whose setup throws: the run rejects with it, and the instance's place is free again", async () => {
  let calls = 0;
  const pool = createPool(fixture('accum-owned'), {
    size: 1,
    offload: 'always',
    setup: () => {
      calls += 1;
      // The pool's own instance, then the first sequence's.
      if (calls === 2) throw new Error('no weights today');
    },
  });
  try {
    const first = pool.sequence();
    await expect(first.run({ x: [1, 0, 0, 0] })).rejects.toThrow('no weights today');
    const second = pool.sequence();
    const [y] = await second.run({ x: [2, 0, 0, 0] });
    expect(y.data[0]).toBe(2);
    await Promise.all([first.close(), second.close()]);
  } finally {
    await pool.close();
  }
});

(process.platform === 'linux' ? test : test.skip)("a run queued behind the one whose instance died is refused too: it never runs on the restarted process's empty state", async () => {
  const pool = createPool(fixture('accum-crashy'), { size: 1, isolate: 'process', setup: (rt) => rt.storage('h') });
  try {
    const seq = pool.sequence();
    await seq.run({ x: [1, 0, 0, 0] });
    const crash = seq.run({ x: [-999, 0, 0, 0] });
    const behind = seq.run({ x: [1, 0, 0, 0] });
    await expect(crash).rejects.toMatchObject({ code: 'ERR_ZGC_INSTANCE_CRASHED' });
    await expect(behind).rejects.toMatchObject({ code: 'ERR_ZGC_SEQUENCE' });
    await seq.close();
  } finally {
    await pool.close();
  }
}, 30000);

(process.platform === 'linux' ? test : test.skip)('an isolated instance that dies ends its sequence, with a clear error after; other sequences never notice', async () => {
  const pool = createPool(fixture('accum-crashy'), { size: 2, isolate: 'process', setup: (rt) => rt.storage('h') });
  try {
    const doomed = pool.sequence();
    const other = pool.sequence();
    await Promise.all([doomed.run({ x: [1, 0, 0, 0] }), other.run({ x: [1, 0, 0, 0] })]);
    await expect(doomed.run({ x: [-999, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_INSTANCE_CRASHED' });
    expect(doomed.ended).toBe("its instance's process died");
    await expect(doomed.run({ x: [1, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_SEQUENCE', message: "the sequence ended: its instance's process died, and its state with it; start another" });
    const [y, steps] = await other.run({ x: [1, 0, 0, 0] });
    expect([y.data[0], steps.data[0]]).toEqual([2, 2]);
    await Promise.all([doomed.close(), other.close()]);
  } finally {
    await pool.close();
  }
}, 30000);
