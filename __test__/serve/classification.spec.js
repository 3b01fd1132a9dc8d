'use strict';

// The classification extension (issue 38) through the real tritonclient, HTTP (binary and
// JSON) and gRPC: an output asked for with class_count=k answers its top k per row as
// "score:index[:label]" strings. Expected strings are made here from the same outputs' plain
// values, with labels from the file the model's config names.
const fs = require('node:fs');
const path = require('node:path');
const { rng, randomF32 } = require('../helpers');
const { makeRepository, writeModel, servedRepo, pythonClient, hasClients } = require('../serve/setup');


const client = (protocol, port, plan) => pythonClient('classification_client.py', protocol, [protocol, `127.0.0.1:${port}`], JSON.stringify(plan));

/** The top k of each row (the last dimension) of `values` in `shape`, highest first, ties by index. */
function topK(values, shape, k, labels = []) {
  const n = shape[shape.length - 1];
  const out = [];
  for (let row = 0; row * n < values.length; row++) {
    const entries = values.slice(row * n, row * n + n).map((v, i) => [v, i]);
    entries.sort((p, q) => q[0] - p[0] || p[1] - q[1]);
    for (const [v, i] of entries.slice(0, Math.min(k, n))) out.push(`${v.toFixed(6)}:${i}${i < labels.length ? `:${labels[i]}` : ''}`);
  }
  return [out, [...shape.slice(0, -1), Math.min(k, n)]];
}

(hasClients ? describe : describe.skip)('the classification extension (issue 38)', () => {
  const LABELS = ['cat', 'dog', 'bird'];
  const live = servedRepo(() => {
    const { repo } = makeRepository();
    // Three labels for four classes: the fourth has none.
    writeModel(repo, 'labelled', { 1: 'add' }, { outputs: ['scores'], labels: { scores: 'labels.txt' } }, { 'labels.txt': `${LABELS.join('\n')}\n` });
    return repo;
  });

  for (const protocol of ['http', 'grpc']) {
    test(`${protocol}: each row's top k as score:index[:label], over FP32, FP16 and INT8`, async () => {
      const next = rng(protocol === 'http' ? 3801 : 3802);
      const ints = (n, lo, hi) => Array.from({ length: n }, () => lo + Math.floor(next() * (hi - lo + 1)));
      const plan = {
        dtypes: { x: Array.from(randomF32(next, 6)), h: ints(4, -64, 64).map((v) => v / 8), q: ints(5, -128, 127), m: ints(5, 0, 1).map(Boolean) },
        add: [Array.from(randomF32(next, 4)), Array.from(randomF32(next, 4))],
      };
      const seen = await client(protocol, protocol === 'http' ? live.server.port : live.grpcPort, plan);
      const expected = {
        o0: topK(seen.plain.o0, [2, 3], 2),
        o1: topK(seen.plain.o1, [4], 3),
        // k past the row: the whole row, sorted.
        o2: topK(seen.plain.o2, [5], 10),
      };
      expect(seen.classes).toEqual(expected);
      if (protocol === 'http') expect(seen.classes_json).toEqual(expected);
      const sums = plan.add[0].map((v, i) => Math.fround(Math.fround(v) + Math.fround(plan.add[1][i])));
      expect(seen.labelled).toEqual(topK(sums, [4], 4, LABELS));
      expect(seen.bool).toEqual([protocol === 'http' ? '400' : 'StatusCode.INVALID_ARGUMENT', 'output "o3": classification needs numbers, the output is BOOL']);
    }, 60000);
  }

  test('a labels file for no output, or that cannot be read, keeps the model from loading', async () => {
    const { createServer } = require('../../lib/serve');
    const bad = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'zgc-labels-'));
    try {
      writeModel(bad, 'm', { 1: 'add' }, { labels: { nope: 'labels.txt' } }, { 'labels.txt': 'a\n' });
      expect(() => createServer({ models: bad })).toThrow(/config "labels" names "nope", which is no output \(outputs: output_0\)/);
      writeModel(bad, 'm', { 1: 'add' }, { labels: { output_0: 'missing.txt' } });
      expect(() => createServer({ models: bad })).toThrow(/parameter file "missing.txt" not found/);
    } finally {
      fs.rmSync(bad, { recursive: true, force: true });
    }
  });
});

describe('classify: the top k of each row', () => {
  const { classify } = require('../../lib/serve/classification');
  test('NaN ranks last, infinities by value, ties by index; labels where the file has them', () => {
    const values = Float32Array.of(1, NaN, Infinity, -Infinity, 1, 2);
    const { shape, strings } = classify(values, [6], 6, ['a', 'b'], Number);
    expect(shape).toEqual([6]);
    expect(strings).toEqual(['inf:2', '2.000000:5', '1.000000:0:a', '1.000000:4', '-inf:3', 'nan:1:b']);
  });
  test('two NaN keep their order; each row of a [2, 3] output on its own', () => {
    expect(classify(Float32Array.of(NaN, 0, NaN), [3], 3, undefined, Number).strings).toEqual(['0.000000:1', 'nan:0', 'nan:2']);
    expect(classify(Float32Array.of(3, 1, 2, -1, -3, -2), [2, 3], 2, undefined, Number)).toEqual({ shape: [2, 2], strings: ['3.000000:0', '2.000000:2', '-1.000000:0', '-2.000000:2'] });
  });
  test('a row of no elements gives nothing', () => {
    expect(classify(new Float32Array(0), [2, 0], 3, undefined, Number)).toEqual({ shape: [2, 0], strings: [] });
  });
});
