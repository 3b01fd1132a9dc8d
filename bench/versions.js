#!/usr/bin/env node
'use strict';

// This checkout against another git ref, side by side in one run: tiny run(), run({ into }),
// an awaited runAsync and pool.run, and an isolated runtime's and pool's awaited runs. Each
// round measures every case once in a fresh process per side, the sides alternating; each
// figure is the median of its rounds, and new/old is their ratio (within noise: about 1).
//   node bench/versions.js --baseline REF [--rounds N]
// REF is checked out and built from its own Rust outside this checkout (bench/baseline.js).
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { baselineCheckout } = require('./baseline');
const { median } = require('./measure');

const root = path.join(__dirname, '..');
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);

/** What one side measures, in a child process whose package is `dir`: ns per operation by case. */
function side(dir) {
  const script = `
    const { load, createPool } = require(${JSON.stringify(dir)});
    const { fixture } = require(${JSON.stringify(path.join(root, '__test__', 'fixtures', 'manifest'))});
    const { measure, measureAsync } = require(${JSON.stringify(path.join(__dirname, 'measure'))});
    (async () => {
      const a = new Float32Array([1, 2, 3, 4]);
      const b = new Float32Array([0.5, 0.5, 0.5, 0.5]);
      const out = {};
      const rt = load(fixture('add'));
      const into = [new Float32Array(4)];
      out['tiny run()'] = measure(() => rt.run({ a, b })).median_ns;
      out['tiny run({ into })'] = measure(() => rt.run({ a, b }, { into })).median_ns;
      out['tiny awaited runAsync'] = (await measureAsync(() => rt.runAsync({ a, b }))).median_ns;
      rt.close();
      const pool = createPool(fixture('add'), { size: 2 });
      out['tiny awaited pool.run'] = (await measureAsync(() => pool.run({ a, b }))).median_ns;
      await pool.close();
      if (process.platform === 'linux') {
        const iso = load(fixture('add'), { isolate: 'process' });
        out['isolated awaited runAsync'] = (await measureAsync(() => iso.runAsync({ a, b }))).median_ns;
        out['isolated run()'] = measure(() => iso.run({ a, b })).median_ns;
        iso.close();
        const ipool = createPool(fixture('add'), { size: 2, isolate: 'process' });
        out['isolated awaited pool.run'] = (await measureAsync(() => ipool.run({ a, b }))).median_ns;
        await ipool.close();
      }
      process.stdout.write(JSON.stringify(out));
    })();
  `;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 600000 });
  if (r.status !== 0) throw new Error(`measuring ${dir} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

function main() {
  const ref = arg('--baseline', null);
  if (ref === null) throw new Error('usage: node bench/versions.js --baseline REF [--rounds N]');
  const rounds = Number(arg('--rounds', '3'));
  const sides = { old: baselineCheckout(ref, true), new: root };
  const runs = { old: [], new: [] };
  for (let k = 0; k < rounds; k++) {
    // Alternating which goes first, so that a drift of the machine falls on both.
    for (const name of k % 2 === 0 ? ['old', 'new'] : ['new', 'old']) runs[name].push(side(sides[name]));
  }
  const cases = Object.keys(runs.new[0]);
  console.log(`new (${path.basename(root)}) against ${ref}, medians of ${rounds} rounds, ns per operation\n`);
  console.log('| case | old | new | new/old |');
  console.log('|---|---|---|---|');
  for (const c of cases) {
    const o = median(runs.old.map((r) => r[c]));
    const n = median(runs.new.map((r) => r[c]));
    console.log(`| ${c} | ${o.toFixed(0)} | ${n.toFixed(0)} | ${(n / o).toFixed(2)} |`);
  }
}

main();
