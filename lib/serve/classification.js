'use strict';

// Triton's classification extension: a requested output's `classification: k` parameter
// answers, in place of its values, the k largest of each row (its last dimension) as BYTES
// strings "score:index" or "score:index:label", labels from the file config.json names for
// that output. Scores are written as Triton writes them (six decimals). The request's
// `classification` parameter is checked in parameters.js.

const score = (v) => (Number.isNaN(v) ? 'nan' : v === Infinity ? 'inf' : v === -Infinity ? '-inf' : v.toFixed(6));

/**
 * The top `k` classes of each row of `values` (an output of `shape`): `{ shape, strings }`,
 * the shape with its last dimension k (or the row length, if shorter). Ties keep index order;
 * NaN ranks last.
 */
function classify(values, shape, k, labels, decode) {
  const n = shape[shape.length - 1];
  const top = Math.min(k, n);
  // A row of no elements makes no rows (values.length / 0 is NaN, and r < NaN is false).
  const rows = values.length / n;
  const strings = [];
  const order = [];
  for (let r = 0; r < rows; r++) {
    const base = r * n;
    for (let i = 0; i < n; i++) order[i] = i;
    const at = (i) => decode(values[base + i]);
    order.sort((a, b) => {
      const x = at(a);
      const y = at(b);
      if (Number.isNaN(x)) return Number.isNaN(y) ? a - b : 1;
      if (Number.isNaN(y)) return -1;
      return y - x || a - b;
    });
    for (let j = 0; j < top; j++) {
      const i = order[j];
      const label = labels !== undefined && i < labels.length ? `:${labels[i]}` : '';
      strings.push(`${score(at(i))}:${i}${label}`);
    }
  }
  return { shape: [...shape.slice(0, -1), top], strings };
}

/** BYTES elements as the protocol sends them in binary: each a 4-byte little-endian length, then its bytes. */
function bytesTensor(strings) {
  const parts = strings.map((s) => Buffer.from(s));
  const out = Buffer.allocUnsafe(parts.reduce((n, p) => n + 4 + p.length, 0));
  let pos = 0;
  for (const p of parts) {
    out.writeUInt32LE(p.length, pos);
    p.copy(out, pos + 4);
    pos += 4 + p.length;
  }
  return out;
}

module.exports = { classify, bytesTensor };
