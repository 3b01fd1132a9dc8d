'use strict';

// What every options object and flag shares: unknown keys refused with the nearest valid name
// (a misspelt option silently ignored is a setting the user thinks they made), and sizes in
// bytes with the same units everywhere.

/** Edit distance (insertions, deletions, substitutions), case-insensitive. */
function distance(a, b) {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length];
}

/** The valid name closest to `given`, if one is close enough to be what was meant. */
function nearest(given, valid) {
  let best;
  let bestDistance = Infinity;
  for (const name of valid) {
    const d = distance(given, name);
    if (d < bestDistance) [best, bestDistance] = [name, d];
  }
  return bestDistance <= Math.max(2, Math.floor(given.length / 3)) ? best : undefined;
}

/** "did you mean …?" for `given`, or '' when no valid name is near. */
function didYouMean(given, valid) {
  const near = nearest(given, valid);
  return near === undefined ? '' : ` (did you mean ${JSON.stringify(near)}?)`;
}

/** Throws a TypeError naming the first own key of `options` that is not in `valid`. */
function refuseUnknownKeys(what, options, valid, elsewhere = {}) {
  for (const key of Object.keys(options)) {
    if (!valid.includes(key)) {
      if (Object.hasOwn(elsewhere, key)) throw new TypeError(`${what} option ${key} ${elsewhere[key]}`);
      throw new TypeError(`${what} has no option ${JSON.stringify(key)}${didYouMean(key, valid)}; it takes ${valid.join(', ')}`);
    }
  }
}

const UNITS = { '': 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3 };
const SIZE = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i;
const SIZE_RULE = 'a size: whole bytes, or a string with a unit such as "512k", "64m", "1.5g" (k, m, g and kb, mb, gb, kib, mib, gib: powers of 1024)';

/** Bytes from a number or a string with a unit; `null` when `value` is not a size. */
function parseSize(value) {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : null;
  if (typeof value !== 'string') return null;
  const m = SIZE.exec(value);
  if (!m) return null;
  // An unknown unit gives NaN, which is no safe integer.
  const n = Number(m[1]) * UNITS[m[2].toLowerCase()];
  return Number.isSafeInteger(n) ? n : null;
}

/** A run's `priority` option (a 32-bit integer; higher runs first; default 0). */
function priorityOf(what, options) {
  const p = options === undefined || options === null ? undefined : options.priority;
  if (p === undefined) return 0;
  if (!Number.isInteger(p) || p < -(2 ** 31) || p >= 2 ** 31) throw new RangeError(`${what} option priority must be an integer from -2147483648 to 2147483647, got ${typeof p === 'number' ? p : JSON.stringify(p) ?? String(p)}`);
  return p;
}

module.exports = { distance, nearest, didYouMean, refuseUnknownKeys, parseSize, priorityOf, SIZE_RULE };
