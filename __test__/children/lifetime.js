'use strict';

// Run with `node --expose-gc lifetime.js <scenario>`: each scenario prints one JSON line.
// A crash (SIGSEGV, abort) shows as a non-zero exit in the spec that spawns this.

const { load, createPool } = require('../..');
const { fixture } = require('../fixtures/manifest');

const N = 1 << 20;
const gc = () => {
  for (let i = 0; i < 3; i++) global.gc();
};
// Pressure that reuses freed memory, so a dangling pointer would read other values.
const churn = () => {
  const junk = [];
  for (let i = 0; i < 32; i++) junk.push(new Float32Array(N).fill(-7));
  return junk.length;
};

function ramp(offset) {
  const a = new Float32Array(N);
  for (let k = 0; k < N; k++) a[k] = (k % 1000) + offset;
  return a;
}

function checkSum(y, xv, offset) {
  for (let k = 0; k < N; k += 997) if (y[k] !== Math.fround(xv + (k % 1000) + offset)) return `y[${k}] = ${y[k]}`;
  return null;
}

const scenarios = {
  // The bound array is kept alive by the runtime after JS drops every reference to it.
  'bind-drop-gc'() {
    const rt = load(fixture('big'));
    rt.bind('w', ramp(0.5));
    gc();
    churn();
    gc();
    const x = new Float32Array(N).fill(2);
    const bad = checkSum(rt.run({ x })[0].data, 2, 0.5);
    rt.close();
    return { ok: bad === null, bad };
  },

  // Transfer detaches the bound buffer: the next run refuses, and a new binding works.
  'transfer-detach'() {
    const rt = load(fixture('big'));
    const w = ramp(1);
    rt.bind('w', w);
    const moved = structuredClone(w, { transfer: [w.buffer] });
    let code = null;
    let message = null;
    try {
      rt.run({ x: new Float32Array(N) });
    } catch (err) {
      ({ code, message } = err);
    }
    moved.fill(0);
    gc();
    churn();
    rt.bind('w', ramp(3));
    const bad = checkSum(rt.run({ x: new Float32Array(N).fill(1) })[0].data, 1, 3);
    rt.close();
    return { ok: bad === null, code, message, bad, detachedLength: w.length };
  },

  // A resizable buffer shrunk under a bound view is refused; grown back, it is usable again.
  'resizable-shrink'() {
    const rt = load(fixture('big'));
    const ab = new ArrayBuffer(N * 4, { maxByteLength: N * 8 });
    const w = new Float32Array(ab);
    w.set(ramp(0));
    rt.bind('w', w);
    ab.resize(N * 2);
    let code = null;
    try {
      rt.run({ x: new Float32Array(N) });
    } catch (err) {
      code = err.code;
    }
    ab.resize(N * 4);
    // Growing zero-fills the regained half; the first half kept its values.
    const y = rt.run({ x: new Float32Array(N) })[0].data;
    let bad = null;
    for (let k = 0; k < N && !bad; k += 991) if (y[k] !== (k < N / 2 ? k % 1000 : 0)) bad = `y[${k}] = ${y[k]}`;
    rt.close();
    return { ok: bad === null, code, bad };
  },

  // Runtimes dropped without close() are finalised (deinit runs) and never crash.
  'collected-unclosed'() {
    let collected = 0;
    const registry = new FinalizationRegistry(() => {
      collected += 1;
    });
    for (let i = 0; i < 50; i++) {
      const rt = load(fixture('big'));
      rt.bind('w', ramp(i));
      rt.run({ x: new Float32Array(N) });
      registry.register(rt, i);
    }
    // Finalisers run when the engine gets to them (under emulation and load, seconds late):
    // collect until one has, bounded only far beyond any machine's pace.
    return new Promise((resolve) => {
      const giveUp = Date.now() + 40000;
      const tick = (round) => {
        gc();
        churn();
        if (collected >= 40 || (collected > 0 && round >= 50) || Date.now() > giveUp) resolve({ ok: collected > 0, collected });
        else setTimeout(() => tick(round + 1), 10);
      };
      tick(0);
    });
  },

  // Async runs copy their inputs at call time: JS may collect an input while its run is
  // still in flight, and the run is unaffected.
  'async-input-collected'() {
    const rt = load(fixture('slow'));
    rt.set('sleep_ms', 300);
    let collectedBeforeResult = false;
    let resolved = false;
    const registry = new FinalizationRegistry(() => {
      if (!resolved) collectedBeforeResult = true;
    });
    const run = (() => {
      const x = new Float32Array([1, 2, 3, 4]);
      registry.register(x, 'x');
      return rt.runAsync({ x });
    })();
    const pump = setInterval(() => {
      gc();
      churn();
    }, 20);
    return run.then(([y]) => {
      resolved = true;
      clearInterval(pump);
      rt.close();
      return { ok: Array.from(y.data).join() === '2,4,6,8' && collectedBeforeResult, collectedBeforeResult, y: Array.from(y.data) };
    });
  },

  // Many async runs on a pool whose instances read JS-bound storage, with GC and garbage
  // churn running throughout, a storage() view dropped, and a bound buffer transferred
  // away mid-stream.
  async 'async-gc-load'() {
    const { createPool } = require('../..');
    const pool = createPool(fixture('big'), { size: 2, setup: (rt, i) => rt.bind('w', ramp(i)) });
    const pump = setInterval(() => {
      gc();
      churn();
    }, 5);
    const x = new Float32Array(N).fill(1);
    const runs = [];
    for (let i = 0; i < 60; i++) runs.push(pool.run({ x }));
    const results = await Promise.all(runs);
    let bad = null;
    for (const [y] of results) {
      const offset = y.data[0] - 1; // 0 or 1: which instance ran it
      if (offset !== 0 && offset !== 1) bad = `y[0] = ${y.data[0]}`;
      else bad = bad || checkSum(y.data, 1, offset);
    }
    await pool.close();

    const owned = load(fixture('big'));
    owned.storage('w').fill(3); // the view is dropped at once
    gc();
    churn();
    const fromStorage = (await owned.runAsync({ x }))[0].data[777];
    owned.close();

    const rt = load(fixture('big'));
    const w = ramp(5);
    rt.bind('w', w);
    const inFlight = rt.runAsync({ x });
    structuredClone(w, { transfer: [w.buffer] });
    gc();
    churn();
    const before = checkSum((await inFlight)[0].data, 1, 5);
    let after = null;
    try {
      await rt.runAsync({ x });
    } catch (err) {
      after = err.code;
    }
    rt.close();
    clearInterval(pump);
    return { ok: bad === null && fromStorage === 4 && before === null && after === 'ERR_ZGC_DETACHED', bad, fromStorage, before, after };
  },

  // close() releases the bound array; a closed runtime collected later is harmless.
  // Sequences dropped by JavaScript, unclosed, while their runs wait and run: each run holds
  // a share of its sequence's state, so every queued run still reads and writes it.
  'sequence-dropped'() {
    const pool = createPool(fixture('accum'), { size: 2, offload: 'always', setup: (rt) => rt.storage('h') });
    const runs = [];
    for (let s = 0; s < 20; s++) {
      const seq = pool.sequence({ initialState: { h: [s, 0, 0, 0, 0] } });
      for (let k = 0; k < 10; k++) runs.push(seq.run({ x: [1, 0, 0, 0] }).then(([y, steps]) => (y.data[0] === s + k + 1 && steps.data[0] === k + 1 ? null : `sequence ${s} run ${k}: ${y.data[0]}, ${steps.data[0]}`)));
    }
    const pump = setInterval(() => {
      gc();
      churn();
    }, 5);
    return Promise.all(runs).then(async (bad) => {
      clearInterval(pump);
      await pool.close();
      const wrong = bad.filter((b) => b !== null);
      return { ok: wrong.length === 0, wrong: wrong.slice(0, 3) };
    });
  },

  'close-while-bound'() {
    const rt = load(fixture('big'));
    rt.bind('w', ramp(0));
    rt.close();
    gc();
    churn();
    gc();
    return { ok: rt.closed };
  },
};

Promise.resolve(scenarios[process.argv[2]]()).then(
  (result) => {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  },
  (err) => {
    process.stdout.write(`${JSON.stringify({ ok: false, error: String(err && err.stack) })}\n`);
    process.exitCode = 1;
  },
);
