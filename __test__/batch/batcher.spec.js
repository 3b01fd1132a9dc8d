'use strict';

// createBatcher (issue 39): requests of a few rows run together on batch variants of one graph
// (affine.c in batch sizes 1, 4 and 8). Every answer is checked against the same rows run
// alone, synchronously, on the batch-1 variant, and against the graph's arithmetic done here.
const { createBatcher, load } = require('../..');
const { fixture, rng } = require('../helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const AFFINE = { 1: fixture('affine-b1'), 4: fixture('affine-b4'), 8: fixture('affine-b8') };
const W = [[1, 0, -1], [0.5, 2, 0], [0, -1, 0.25], [3, 0, 1]];
const C = [0.5, -2, 4];

/** y = s (x W) + c and the row sum, in f32 as the graph computes them, row by row. */
function affine(x, s) {
  const rows = s.length;
  const y = new Float32Array(rows * 3);
  const total = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let sum = 0;
    for (let k = 0; k < 4; k++) sum = Math.fround(sum + x[r * 4 + k]);
    total[r] = sum;
    for (let j = 0; j < 3; j++) {
      let dot = 0;
      for (let k = 0; k < 4; k++) dot = Math.fround(dot + Math.fround(x[r * 4 + k] * W[k][j]));
      y[r * 3 + j] = Math.fround(Math.fround(s[r] * dot) + C[j]);
    }
  }
  return [y, total];
}

/** A request of `rows` rows of small random values (exact in f32, so that any order sums them alike). */
function request(random, rows) {
  const x = Float32Array.from({ length: rows * 4 }, () => Math.round(random() * 64 - 32) / 4);
  const s = Float32Array.from({ length: rows }, () => Math.round(random() * 16 - 8) / 2);
  return { x, s };
}

/** The rows run one by one on the batch-1 variant: what a batched answer must equal. */
function alone(rt, { x, s }) {
  const y = [];
  const total = [];
  for (let r = 0; r < s.length; r++) {
    const [yr, tr] = rt.run({ x: x.subarray(r * 4, r * 4 + 4), s: s.subarray(r, r + 1) });
    y.push(...yr.data);
    total.push(...tr.data);
  }
  return [Float32Array.from(y), Float32Array.from(total)];
}

const MODES = [{ offload: 'always' }, { offload: 'auto' }, ...(process.platform === 'linux' ? [{ isolate: 'process' }] : [])];

describe.each(MODES)('createBatcher (%j)', (mode) => {
  test('200 concurrent requests of 1 to 3 rows: each answer is its own rows, as run alone', async () => {
    const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 2, instances: 2, ...mode });
    const rt = load(AFFINE[1]);
    try {
      const random = rng(39);
      const requests = Array.from({ length: 200 }, () => request(random, 1 + Math.floor(random() * 3)));
      const answers = await Promise.all(requests.map((r) => batcher.run(r)));
      let rows = 0;
      answers.forEach((answer, i) => {
        const n = requests[i].s.length;
        rows += n;
        const [y, total] = answer;
        expect(y.shape).toEqual([n, 3]);
        expect(total.shape).toEqual([n]);
        // Results belong to the caller's realm, and hold their own rows only: no padding, no neighbour.
        expect(y.data).toBeInstanceOf(Float32Array);
        expect(y.data.buffer.byteLength).toBe(n * 3 * 4);
        expect(total.data.buffer.byteLength).toBe(n * 4);
        const [ay, atotal] = alone(rt, requests[i]);
        expect(Array.from(y.data)).toEqual(Array.from(ay));
        expect(Array.from(total.data)).toEqual(Array.from(atotal));
        const [ey, etotal] = affine(requests[i].x, requests[i].s);
        expect(Array.from(y.data)).toEqual(Array.from(ey));
        expect(Array.from(total.data)).toEqual(Array.from(etotal));
      });
      const stats = batcher.stats();
      expect(stats.rows).toBe(rows);
      // Batched: fewer runs than requests.
      expect(stats.batches).toBeLessThan(200);
      const runs = Object.entries(stats.runsBySize);
      expect(runs.reduce((a, [, n]) => a + n, 0)).toBe(stats.batches);
      expect(runs.reduce((a, [size, n]) => a + Number(size) * n, 0)).toBe(rows + stats.paddedRows);
      const byRows = Object.entries(stats.runsByRows);
      expect(byRows.reduce((a, [, n]) => a + n, 0)).toBe(stats.batches);
      expect(byRows.reduce((a, [r, n]) => a + Number(r) * n, 0)).toBe(rows);
      // Each variant's pool ran exactly the batches made of it.
      const variants = batcher.variantStats();
      expect(Object.keys(variants)).toEqual(['1', '4', '8']);
      for (const [size, s] of Object.entries(variants)) expect(s.completed).toBe(stats.runsBySize[size] || 0);
      expect(stats.pendingRows).toBe(0);
      expect(batcher.size).toBe(2);
      expect(batcher.isolate).toBe(mode.isolate);
    } finally {
      rt.close();
      await batcher.close();
    }
  }, 60000);

  test('requests within the delay join one run of the smallest variant that holds them', async () => {
    const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 300, ...mode });
    try {
      const random = rng(7);
      const requests = [request(random, 1), request(random, 2)];
      const answers = await Promise.all(requests.map((r) => batcher.run(r)));
      // 3 rows: the batch-4 variant, once, with one row of zeros.
      expect(batcher.stats()).toMatchObject({ batches: 1, rows: 3, paddedRows: 1, runsBySize: { 4: 1 } });
      answers.forEach(([y], i) => expect(Array.from(y.data)).toEqual(Array.from(affine(requests[i].x, requests[i].s)[0])));
    } finally {
      await batcher.close();
    }
  }, 20000);

  test('rows that fill the largest variant go at once, without waiting out the delay', async () => {
    const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 60000, ...mode });
    try {
      const random = rng(8);
      const answers = await Promise.all([request(random, 5), request(random, 3)].map((r) => batcher.run(r)));
      expect(answers.map(([y]) => y.shape[0])).toEqual([5, 3]);
      expect(batcher.stats()).toMatchObject({ batches: 1, rows: 8, paddedRows: 0, runsBySize: { 8: 1 } });
    } finally {
      await batcher.close();
    }
  }, 20000);

  test('preferredBatchSizes: rows reaching the largest preferred size go at once', async () => {
    // Two rows reach 1 but not 4: they wait for the next two.
    const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 60000, preferredBatchSizes: [4, 1], ...mode });
    try {
      const random = rng(9);
      await Promise.all([request(random, 2), request(random, 2)].map((r) => batcher.run(r)));
      expect(batcher.stats()).toMatchObject({ batches: 1, rows: 4, runsBySize: { 4: 1 } });
    } finally {
      await batcher.close();
    }
  }, 20000);

  test('a request with a deadline is not held for others past it', async () => {
    const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 60000, ...mode });
    try {
      const r = request(rng(10), 1);
      const [y] = await batcher.run(r, { timeoutMs: 1000 });
      expect(Array.from(y.data)).toEqual(Array.from(affine(r.x, r.s)[0]));
      expect(batcher.stats()).toMatchObject({ batches: 1, runsBySize: { 1: 1 } });
    } finally {
      await batcher.close();
    }
  }, 20000);

  test('a request whose deadline is far off waits maxQueueDelayMs for others like any', async () => {
    // 2 s: far past the 30 ms between the two, on any machine's load.
    const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 2000, ...mode });
    try {
      const random = rng(14);
      const first = batcher.run(request(random, 1), { timeoutMs: 20000 });
      await sleep(30);
      await Promise.all([first, batcher.run(request(random, 1), { timeoutMs: 20000 })]);
      expect(batcher.stats()).toMatchObject({ batches: 1, rows: 2, runsBySize: { 4: 1 } });
    } finally {
      await batcher.close();
    }
  }, 20000);

  test('close() runs what waits at once, then refuses new requests', async () => {
    const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 60000, ...mode });
    const r = request(rng(11), 2);
    const answer = batcher.run(r);
    await sleep(20);
    expect(batcher.pending).toBe(2);
    await batcher.close();
    const [y] = await answer;
    expect(Array.from(y.data)).toEqual(Array.from(affine(r.x, r.s)[0]));
    expect(batcher.closed).toBe(true);
    await expect(batcher.run(r)).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED', message: 'batcher is closed' });
    // Closing again is the same close.
    expect(batcher.close()).toBe(batcher.close());
  }, 20000);
});

test('races: 300 requests, a third aborted and a third timing out at random moments', async () => {
  // Each request either answers its own rows or rejects with its own reason, whichever came
  // first; the batcher ends idle and keeps answering.
  const batcher = createBatcher({ 1: fixture('affine-slow-b1'), 4: fixture('affine-slow-b4'), 8: fixture('affine-slow-b8') }, { maxQueueDelayMs: 1, instances: 2, offload: 'always' });
  try {
    const random = rng(300);
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) => {
        const r = request(random, 1 + Math.floor(random() * 2));
        const kind = i % 3;
        const controller = new AbortController();
        const reason = new Error(`abort ${i}`);
        if (kind === 0) setTimeout(() => controller.abort(reason), random() * 20);
        const options = kind === 0 ? { signal: controller.signal } : kind === 1 ? { timeoutMs: 1 + random() * 20 } : undefined;
        return batcher.run(r, options).then(
          ([y, total]) => {
            const [ey, etotal] = affine(r.x, r.s);
            return Array.from(y.data).join() === Array.from(ey).join() && Array.from(total.data).join() === Array.from(etotal).join() ? 'answered' : `request ${i}: wrong rows`;
          },
          (err) => (kind === 0 && err === reason ? 'aborted' : kind === 1 && err.code === 'ERR_ZGC_TIMEOUT' ? 'timed out' : `request ${i}: ${err.message}`),
        );
      }),
    );
    const counts = {};
    for (const o of outcomes) counts[o] = (counts[o] || 0) + 1;
    expect(Object.keys(counts).filter((k) => !['answered', 'aborted', 'timed out'].includes(k))).toEqual([]);
    expect(counts.answered).toBeGreaterThanOrEqual(100);
    expect(batcher.stats()).toMatchObject({ pendingRows: 0, running: 0 });
    const [y] = await batcher.run({ x: [1, 2, 3, 4], s: [2] });
    expect(Array.from(y.data)).toEqual(Array.from(affine([1, 2, 3, 4], [2])[0]));
  } finally {
    await batcher.close();
  }
}, 60000);

describe('createBatcher with a busy instance', () => {
  // One 0.4 s run at a time: the requests behind it wait in the batcher's queue.
  const stall = () => createBatcher({ 1: fixture('affine-stall-b1') }, { offload: 'always' });
  const one = (v) => ({ x: [v, 0, 0, 0], s: [1] });

  test('a request whose timeoutMs passes while it waits leaves the queue and rejects ERR_ZGC_TIMEOUT', async () => {
    const batcher = stall();
    try {
      const first = batcher.run(one(1));
      await sleep(50);
      const late = batcher.run(one(2), { timeoutMs: 100 });
      await expect(late).rejects.toMatchObject({ code: 'ERR_ZGC_TIMEOUT', timeoutMs: 100 });
      expect(batcher.pending).toBe(0);
      const [y] = await first;
      expect(y.data[0]).toBe(1.5);
      expect(batcher.stats().batches).toBe(1);
    } finally {
      await batcher.close();
    }
  }, 20000);

  test('an aborted request leaves the queue with the signal\'s reason; one already answered keeps its answer', async () => {
    const batcher = stall();
    try {
      const c1 = new AbortController();
      const first = batcher.run(one(1), { signal: c1.signal });
      await sleep(50);
      const c2 = new AbortController();
      const waiting = batcher.run(one(2), { signal: c2.signal });
      c2.abort(new Error('not needed'));
      await expect(waiting).rejects.toThrow('not needed');
      expect(batcher.pending).toBe(0);
      const [y] = await first;
      c1.abort();
      expect(y.data[0]).toBe(1.5);
      expect(batcher.stats().batches).toBe(1);
      // Aborted before the call: refused at once.
      await expect(batcher.run(one(3), { signal: c1.signal })).rejects.toMatchObject({ name: 'AbortError' });
    } finally {
      await batcher.close();
    }
  }, 20000);

  test('waiting requests go by priority, higher first, then in arrival order', async () => {
    const batcher = stall();
    try {
      const order = [];
      const run = (v, priority) => batcher.run(one(v), priority === undefined ? undefined : { priority }).then(([, total]) => order.push(total.data[0]));
      const busy = run(100);
      await sleep(50);
      await Promise.all([busy, run(1), run(2, 5), run(3, -1), run(4, 5)]);
      expect(order).toEqual([100, 2, 4, 1, 3]);
    } finally {
      await batcher.close();
    }
  }, 20000);
});

describe('createBatcher refuses, naming the problem, and stays usable', () => {
  let batcher;
  beforeAll(() => {
    batcher = createBatcher(AFFINE, { maxQueueDelayMs: 0 });
  });
  afterAll(() => batcher.close());

  test.each([
    ['more rows than the largest variant', { x: new Float32Array(36), s: new Float32Array(9) }, 'ERR_ZGC_SIZE', /9 rows, more than the largest variant's batch of 8/],
    ['inputs with different rows', { x: new Float32Array(8), s: new Float32Array(3) }, 'ERR_ZGC_SIZE', /input "s" has 3 rows and input "x" 2/],
    ['a length that is no whole number of rows', { x: new Float32Array(6), s: new Float32Array(1) }, 'ERR_ZGC_SIZE', /input "x" has 6 elements, which is not a whole number of rows of 4 \(shape \[rows, 4\]\)/],
    ['no rows', { x: new Float32Array(0), s: new Float32Array(0) }, 'ERR_ZGC_SIZE', /input "x" has 0 elements/],
    ['a missing input', { x: new Float32Array(4) }, 'ERR_ZGC_VALUE', /input "s" is missing: a batched run takes every INPUT \(x f32 \[batch, 4\]; s f32 \[batch\]\)/],
    ['an unknown input', { x: new Float32Array(4), s: [1], t: [1] }, 'ERR_ZGC_UNKNOWN_SOURCE', /no INPUT named "t" \(its inputs: x, s\)/],
    ['an array of another dtype', { x: new Float64Array(4), s: [1] }, 'ERR_ZGC_DTYPE', /input "x" \(f32\) takes Float32Array or plain numbers, got Float64Array/],
    ['a value that is no number', { x: [1, 2, 'three', 4], s: [1] }, 'ERR_ZGC_VALUE', /element 2 is string/],
  ])('%s', async (_, inputs, code, message) => {
    const err = await batcher.run(inputs).catch((e) => e);
    expect(err).toMatchObject({ code });
    expect(err.message).toMatch(message);
    const [y] = await batcher.run({ x: [1, 2, 3, 4], s: [2] });
    expect(Array.from(y.data)).toEqual(Array.from(affine([1, 2, 3, 4], [2])[0]));
  });

  test.each([
    ['inputs that are no object', 5, TypeError, /inputs must be an object of input names to values, got number/, undefined],
    ['an unknown option', { x: [1, 2, 3, 4], s: [1] }, TypeError, /has no option "deadline"/, { deadline: 5 }],
    ['a timeoutMs of 0', { x: [1, 2, 3, 4], s: [1] }, RangeError, /timeoutMs must be a number > 0, got 0/, { timeoutMs: 0 }],
    ['a signal that is no AbortSignal', { x: [1, 2, 3, 4], s: [1] }, TypeError, /signal must be an AbortSignal/, { signal: {} }],
    ['a priority past 32 bits', { x: [1, 2, 3, 4], s: [1] }, RangeError, /priority must be an integer from -2147483648 to 2147483647, got 2147483648/, { priority: 2 ** 31 }],
  ])('%s', async (_, inputs, type, message, options) => {
    await expect(batcher.run(inputs, options)).rejects.toThrow(type);
    await expect(batcher.run(inputs, options)).rejects.toThrow(message);
  });

  test('maxQueue: a request past it rejects ERR_ZGC_QUEUE_FULL', async () => {
    const small = createBatcher({ 1: fixture('affine-stall-b1') }, { maxQueue: 1, offload: 'always' });
    try {
      const first = small.run({ x: [1, 0, 0, 0], s: [1] });
      await sleep(50);
      const second = small.run({ x: [2, 0, 0, 0], s: [1] });
      await expect(small.run({ x: [3, 0, 0, 0], s: [1] })).rejects.toMatchObject({ code: 'ERR_ZGC_QUEUE_FULL', message: expect.stringMatching(/1 requests wait \(maxQueue 1\)/) });
      await Promise.all([first, second]);
    } finally {
      await small.close();
    }
  }, 20000);
});

test('variants given in any order are used by batch size; its inputs and outputs are one row of each', async () => {
  const batcher = createBatcher(new Map([[8, AFFINE[8]], [1, AFFINE[1]], [4, AFFINE[4]]]));
  try {
    expect(batcher.batchSizes).toEqual([1, 4, 8]);
    expect(batcher.inputs).toEqual([{ name: 'x', dtype: 'f32', rowShape: [4] }, { name: 's', dtype: 'f32', rowShape: [] }]);
    expect(batcher.outputs).toEqual([{ name: 'output 0', dtype: 'f32', rowShape: [3] }, { name: 'output 1', dtype: 'f32', rowShape: [] }]);
    // Copies: changing them changes nothing.
    batcher.inputs[0].rowShape.push(9);
    expect(batcher.inputs[0].rowShape).toEqual([4]);
    // One row goes as a run of the batch-1 variant, whichever came first in the Map.
    const r = request(rng(12), 1);
    const [y] = await batcher.run(r);
    expect(Array.from(y.data)).toEqual(Array.from(affine(r.x, r.s)[0]));
    expect(batcher.stats().runsBySize).toEqual({ 1: 1 });
  } finally {
    await batcher.close();
  }
});

test('inputs are copied at the call: arrays changed while the request waits for its batch change nothing', async () => {
  const batcher = createBatcher(AFFINE, { maxQueueDelayMs: 50 });
  try {
    const r = request(rng(13), 2);
    const want = affine(r.x, r.s)[0];
    const pending = batcher.run({ x: r.x, s: r.s });
    r.x.fill(100);
    r.s.fill(0);
    const [y] = await pending;
    expect(Array.from(y.data)).toEqual(Array.from(want));
  } finally {
    await batcher.close();
  }
});

test('setup(runtime, index, batchSize) runs once on each instance of each variant', async () => {
  const calls = [];
  const batcher = createBatcher(AFFINE, { instances: 2, setup: (rt, i, size) => calls.push([size, i, rt.sources.find((s) => s.name === 'x').shape[0]]) });
  try {
    // The runtime it is given is that variant's: its x has the batch size's rows.
    expect(calls.sort((a, b) => a[0] - b[0] || a[1] - b[1])).toEqual([[1, 0, 1], [1, 1, 1], [4, 0, 4], [4, 1, 4], [8, 0, 8], [8, 1, 8]]);
  } finally {
    await batcher.close();
  }
});

describe('createBatcher refuses variants that are not one graph in several batch sizes', () => {
  test.each([
    ['another graph', { 1: fixture('affine-b1'), 4: fixture('add') }, /the batch-4 variant's inputs \(a f32 \[batch\]; b f32 \[batch\]\) are not the batch-1 variant's/],
    ['a first dimension that is not the size it is given as', { 1: fixture('affine-b1'), 8: fixture('affine-b4') }, /the batch-8 variant \(.*affine-b4\.\w+\): input "x" has shape \[4, 4\], whose first dimension should be the batch size 8/],
    ['outputs that differ', { 2: fixture('half-2'), 4: fixture('add') }, /the batch-4 variant's inputs \(a f32 \[batch\]; b f32 \[batch\]\) are not the batch-2 variant's \(x f16 \[batch\]\)/],
  ])('%s: ERR_ZGC_BATCH_VARIANTS', (_, variants, message) => {
    let err;
    try {
      createBatcher(variants);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'ERR_ZGC_BATCH_VARIANTS' });
    expect(err.message).toMatch(message);
  });

  test.each([
    ['no variants', {}, TypeError, /at least one entry/, undefined],
    ['a size that is no positive integer', { 0: fixture('affine-b1') }, RangeError, /batch sizes are positive integers, got "0"/, undefined],
    ['a size with a fraction', { 1.5: fixture('affine-b1') }, RangeError, /got "1.5"/, undefined],
    ['a preferred size that is no variant', AFFINE, RangeError, /preferredBatchSizes: 2 is not a variant's batch size \(they are 1, 4, 8\)/, { preferredBatchSizes: [2] }],
    ['a negative delay', AFFINE, RangeError, /maxQueueDelayMs must be a finite number >= 0, got -1/, { maxQueueDelayMs: -1 }],
    ['no instances', AFFINE, RangeError, /instances must be a positive integer, got 0/, { instances: 0 }],
    ['an unknown option', AFFINE, TypeError, /has no option "delayMs"/, { delayMs: 1 }],
  ])('%s', (_, variants, type, message, options) => {
    expect(() => createBatcher(variants, options)).toThrow(type);
    expect(() => createBatcher(variants, options)).toThrow(message);
  });
});

test('f16 rows, given as Float32Array, plain numbers or Uint16Array bits, come back as f16 values', async () => {
  const batcher = createBatcher(new Map([[2, fixture('half-2')], [8, fixture('half-8')]]), { maxQueueDelayMs: 200, offload: 'always' });
  try {
    const answers = await Promise.all([
      batcher.run({ x: Float32Array.of(1.5, -2) }),
      batcher.run({ x: [0.1] }),
      // 0x3c00 is 1, 0xc000 is -2.
      batcher.run({ x: Uint16Array.of(0x3c00, 0xc000, 0x3c00) }),
    ]);
    // 0.1 rounds to the f16 0.0999755859375.
    expect(answers.map(([t]) => Array.from(t.data))).toEqual([[1.5, -2], [0.0999755859375], [1, -2, 1]]);
    expect(answers.map(([t]) => t.dtype)).toEqual(['f16', 'f16', 'f16']);
    expect(batcher.stats()).toMatchObject({ batches: 1, rows: 6, paddedRows: 2, runsBySize: { 8: 1 } });
  } finally {
    await batcher.close();
  }
}, 20000);
