'use strict';

// Timing the same way as floor.c: calibrate a batch to at least MIN_BATCH_MS, then the
// median nanoseconds per operation over BATCHES batches.
const BATCHES = 15;
const MIN_BATCH_MS = 40;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function measure(op) {
  let iters = 1;
  for (;;) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) op();
    if (Number(process.hrtime.bigint() - t0) >= (MIN_BATCH_MS * 1e6) / 4) break;
    iters *= 2;
  }
  iters *= 4;
  const batches = [];
  for (let b = 0; b < BATCHES; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) op();
    batches.push(Number(process.hrtime.bigint() - t0) / iters);
  }
  return { median_ns: median(batches), batches_ns: batches };
}

async function measureAsync(op) {
  let iters = 1;
  for (;;) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) await op();
    if (Number(process.hrtime.bigint() - t0) >= (MIN_BATCH_MS * 1e6) / 4) break;
    iters *= 2;
  }
  iters *= 4;
  const batches = [];
  for (let b = 0; b < BATCHES; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) await op();
    batches.push(Number(process.hrtime.bigint() - t0) / iters);
  }
  return { median_ns: median(batches), batches_ns: batches };
}

module.exports = { measure, measureAsync, median, BATCHES, MIN_BATCH_MS };
