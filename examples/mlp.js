'use strict';

// The main job: build the bundled MLP artifact from C, load it, bind its weights zero-copy,
// run it on a few inputs, and check every output against the same MLP computed in JavaScript.
//   npm run demo
const path = require('node:path');
const { load } = require('..');
const { buildExamples, weights } = require('./build');

const artifact = buildExamples().mlp;

const rt = load(artifact);
console.log(`loaded ${path.relative(process.cwd(), rt.path)}  ABI v${rt.abiVersion}  fingerprint ${rt.fingerprintHex}`);
console.log(`runtime storage ${rt.runtimeSize} bytes, aligned to ${rt.runtimeAlignment}; ${rt.mutableBytes} mutable bytes`);
console.table(rt.sources.map((s) => ({ name: s.name, kind: s.kind, binding: s.binding, dtype: s.dtype, shape: `[${s.shape}]`, strides: `[${s.strides}]`, elements: s.elementCount })));

// Deterministic weights, in logical (row-major) order.
const { w1, b1, w2 } = weights;
const b2 = [0.1, -0.2, 0.05].map(Math.fround);

// w1 zero-copy: its physical storage is column-major, so lay the values out that way.
const w1Storage = new Float32Array(32);
for (let i = 0; i < 4; i++) for (let j = 0; j < 8; j++) w1Storage[i + j * 4] = w1[i * 8 + j];
rt.bind('w1', w1Storage);
// w2 given logically: the runtime packs it into its padded layout and keeps that storage.
rt.set('w2', w2);
rt.set('b1', b1);

function reference(x) {
  const f = Math.fround;
  const hidden = Array.from({ length: 8 }, (_, j) => {
    let acc = b1[j];
    for (let i = 0; i < 4; i++) acc = f(acc + f(x[i] * w1[i * 8 + j]));
    return acc > 0 ? acc : 0;
  });
  const logits = [0, 1, 2].map((k) => {
    let acc = b2[k];
    for (let j = 0; j < 8; j++) acc = f(acc + f(hidden[j] * w2[j * 3 + k]));
    return acc;
  });
  const top = Math.max(...logits);
  const e = logits.map((v) => Math.exp(v - top));
  const sum = e.reduce((a, b) => a + b, 0);
  return { logits, probs: e.map((v) => v / sum) };
}

const inputs = [
  [1, 0, 0, 0],
  [0.5, -1.25, 2, 0.75],
  [-2, 3, 0.25, -0.5],
];
let worst = 0;
for (const x of inputs) {
  const [logits, probs] = rt.run({ x: new Float32Array(x) });
  const want = reference(Float32Array.from(x));
  logits.data.forEach((v, k) => {
    if (v !== want.logits[k]) throw new Error(`logit ${k} is ${v}, JavaScript says ${want.logits[k]}`);
  });
  probs.data.forEach((v, k) => {
    worst = Math.max(worst, Math.abs(v - want.probs[k]));
  });
  const cls = probs.data.indexOf(Math.max(...probs.data));
  console.log(`x = [${x.join(', ')}]  logits = [${Array.from(logits.data, (v) => v.toFixed(4)).join(', ')}]  probs = [${Array.from(probs.data, (v) => v.toFixed(4)).join(', ')}]  class ${cls}`);
}
if (worst > 1e-6) throw new Error(`probabilities differ from JavaScript's by ${worst}`);
console.log(`all outputs match the JavaScript reference (logits exactly, probabilities within ${worst.toExponential(1)})`);
rt.close();
