const path = require('node:path');
const { load } = require('zgc-runtime');

// The MLP of examples/mlp.c, written again in JavaScript: what the artifact must compute.
function reference(x, { w1, b1, w2, b2 }) {
  const hidden = b1.map((b, j) => Math.max(0, x.reduce((acc, xi, i) => acc + xi * w1[i * 8 + j], b)));
  return b2.map((b, k) => hidden.reduce((acc, h, j) => acc + h * w2[j * 3 + k], b));
}

const weights = {
  w1: Array.from({ length: 32 }, (_, k) => Math.sin(k) / 2),
  b1: Array.from({ length: 8 }, (_, k) => k / 10),
  w2: Array.from({ length: 24 }, (_, k) => Math.cos(k) / 3),
  b2: [0.1, -0.2, 0.05], // EMBEDDED in the artifact
};

// From the test file, not from where Jest runs: the test passes from any directory.
const artifact = path.join(__dirname, '..', 'build', 'mlp.so');

let rt;
beforeAll(() => {
  rt = load(artifact);
  for (const name of ['w1', 'b1', 'w2']) rt.set(name, weights[name]);
});
// `?.`: when the load failed, its error is the one Jest reports, not a second TypeError here.
afterAll(() => rt?.close());

test('logits match the JavaScript reference within f32 rounding', () => {
  const x = [0.5, -1, 2, 0.25];
  const [logits] = rt.run({ x });
  expect(logits).toMatchTensor({ dtype: 'f32', shape: [1, 3], data: reference(x, weights) }, { rtol: 1e-5, atol: 1e-6 });
});

test('async runs give the same, as arrays of this test realm', async () => {
  const x = [1, 2, 3, 4];
  const [logits, probs] = await rt.runAsync({ x });
  expect(logits.data).toBeInstanceOf(Float32Array);
  expect(logits).toMatchTensor(rt.run({ x })[0], { rtol: 0, atol: 0 });
  expect(probs.data.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 6);
});

test('a wrong input is refused by name, and the runtime stays usable', () => {
  expect(() => rt.run({ x: [1, 2] })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_SIZE', source: 'x' }));
  expect(rt.run({ x: [0, 0, 0, 0] })[0]).toMatchTensor(reference([0, 0, 0, 0], weights), { atol: 1e-6 });
});
