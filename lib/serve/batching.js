'use strict';

// A model's dynamic batching (config.json "dynamicBatching"): its batch variants, files beside
// the version's model.so, run through the library's batcher (lib/batcher.js), and the
// batcher as the rest of the server reads a version's pool: its size, queue, liveness and the
// run histograms of its variants' pools together.

const { createBatcher } = require('../batcher');
const { mergeHistograms } = require('../stats');

const FILE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const RULE = '"dynamicBatching" must be { "variants": { "<batch size>": "<file beside model.so>", ... }, "maxQueueDelayMs": ms, "preferredBatchSizes": [sizes] }';

/** "dynamicBatching" as config.json gives it, checked; undefined when absent. */
function checkBatching(value, where) {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${where}: ${RULE}, got ${JSON.stringify(value)}`);
  for (const key of Object.keys(value)) {
    if (!['variants', 'maxQueueDelayMs', 'preferredBatchSizes'].includes(key)) throw new Error(`${where}: "dynamicBatching" has an unknown key "${key}" (known: variants, maxQueueDelayMs, preferredBatchSizes)`);
  }
  const { variants, maxQueueDelayMs = 0, preferredBatchSizes } = value;
  if (variants === null || typeof variants !== 'object' || Array.isArray(variants) || Object.keys(variants).length === 0) throw new Error(`${where}: ${RULE}; "variants" names none`);
  for (const [size, file] of Object.entries(variants)) {
    if (!/^[1-9][0-9]{0,8}$/.test(size)) throw new Error(`${where}: "dynamicBatching" variant batch sizes are positive integers, got "${size}"`);
    if (typeof file !== 'string' || !FILE.test(file)) throw new Error(`${where}: "dynamicBatching" variant ${size} must name a file in the version directory (no path), got ${JSON.stringify(file)}`);
  }
  if (typeof maxQueueDelayMs !== 'number' || !Number.isFinite(maxQueueDelayMs) || maxQueueDelayMs < 0) throw new Error(`${where}: "dynamicBatching" "maxQueueDelayMs" must be a number >= 0, got ${JSON.stringify(maxQueueDelayMs)}`);
  if (preferredBatchSizes !== undefined && (!Array.isArray(preferredBatchSizes) || !preferredBatchSizes.every((p) => Object.hasOwn(variants, String(p))))) {
    throw new Error(`${where}: "dynamicBatching" "preferredBatchSizes" must list variant batch sizes (${Object.keys(variants).join(', ')}), got ${JSON.stringify(preferredBatchSizes)}`);
  }
  return { variants, maxQueueDelayMs, preferredBatchSizes };
}

/**
 * The batcher of one version, as a pool: `read(file)` gives a variant's artifact (its bytes
 * in-process, its path isolated), `options` are the pool options of every variant.
 */
function batchedPool(batching, read, options) {
  const variants = {};
  for (const [size, file] of Object.entries(batching.variants)) variants[size] = read(file);
  const batcher = createBatcher(variants, {
    ...options,
    maxQueueDelayMs: batching.maxQueueDelayMs,
    ...(batching.preferredBatchSizes === undefined ? {} : { preferredBatchSizes: batching.preferredBatchSizes }),
  });
  const pools = () => Object.values(batcher.variantStats());
  return {
    batcher,
    get size() {
      return batcher.size;
    },
    get pending() {
      return batcher.stats().pendingRows;
    },
    get inFlight() {
      return batcher.stats().running;
    },
    get closed() {
      return batcher.closed;
    },
    isolate: batcher.isolate,
    run: (inputs, runOptions) => batcher.run(inputs, runOptions),
    /** The variants' pools' figures together: a batch's instance is one of any variant's. */
    stats() {
      const all = pools();
      const sum = (key) => all.reduce((n, s) => n + (s[key] || 0), 0);
      return {
        queueWaitHistogram: all.map((s) => s.queueWaitHistogram).reduce(mergeHistograms),
        computeHistogram: all.map((s) => s.computeHistogram).reduce(mergeHistograms),
        // A batch can run while every variant has an instance alive.
        alive: Math.min(...all.map((s) => (s.alive === undefined ? batcher.size : s.alive))),
        crashes: sum('crashes'),
        memoryKills: sum('memoryKills'),
        restarts: sum('restarts'),
        timeouts: sum('timeouts'),
      };
    },
    close: () => batcher.close(),
  };
}

module.exports = { checkBatching, batchedPool };
