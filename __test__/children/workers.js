'use strict';

// The addon and the same artifact in 4 worker threads and the main thread at once.
// Prints one JSON line; exits by itself (a hang fails the spawning test by timeout).
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const { load, createPool, createBatcher } = require('../..');
const { fixture } = require('../fixtures/manifest');

async function work(seed) {
  const rt = load(fixture('add'));
  let checked = 0;
  for (let i = 0; i < 500; i++) {
    const a = [seed, i, -i, 0.5];
    const b = [1, 2, 3, seed];
    const [out] = i % 2 ? await rt.runAsync({ a, b }) : rt.run({ a, b });
    for (let k = 0; k < 4; k++) if (out.data[k] !== Math.fround(a[k] + b[k])) throw new Error(`seed ${seed} run ${i}: ${Array.from(out.data)}`);
    checked += 1;
  }
  rt.close();
  const pool = createPool(fixture('slow'), { size: 2, setup: (r) => r.set('sleep_ms', 1) });
  const outs = await Promise.all(Array.from({ length: 50 }, (_, i) => pool.run({ x: [seed, i, 0, 0] })));
  outs.forEach(([y], i) => {
    if (y.data[0] !== 2 * seed || y.data[1] !== 2 * i) throw new Error(`pool seed ${seed} run ${i}`);
    checked += 1;
  });
  await pool.close();
  // A batcher of its own in each thread: total is each row's sum, run in batches of up to 8.
  const batcher = createBatcher({ 1: fixture('affine-b1'), 4: fixture('affine-b4'), 8: fixture('affine-b8') }, { maxQueueDelayMs: 1, instances: 2 });
  const rows = await Promise.all(Array.from({ length: 40 }, (_, i) => batcher.run({ x: [seed, i, 1, 0], s: [1] })));
  rows.forEach(([, total], i) => {
    if (total.data.length !== 1 || total.data[0] !== seed + i + 1) throw new Error(`batcher seed ${seed} request ${i}: ${Array.from(total.data)}`);
    checked += 1;
  });
  await batcher.close();
  return checked;
}

if (isMainThread) {
  const workers = Array.from({ length: 4 }, (_, i) => new Worker(__filename, { workerData: { seed: i + 1 } }));
  const results = workers.map(
    (w) =>
      new Promise((resolve, reject) => {
        let checked = null;
        w.on('message', (m) => {
          checked = m;
        });
        w.on('error', reject);
        w.on('exit', (code) => (code === 0 ? resolve(checked) : reject(new Error(`worker exit ${code}`))));
      }),
  );
  Promise.all([work(100), ...results]).then(
    (counts) => console.log(JSON.stringify({ counts })),
    (err) => {
      console.log(JSON.stringify({ error: String(err && err.stack) }));
      process.exitCode = 1;
    },
  );
} else {
  work(workerData.seed).then((checked) => parentPort.postMessage(checked));
}
