#!/usr/bin/env node
'use strict';

// The figures docs/benchmarks.md shows, from a bench run's JSON:
//   node scripts/bench-chart.js [bench/results.json]
// copies the JSON to docs/bench/results.json, draws docs/bench/chart.svg from it and prints the
// Markdown table for the page. The doc tests check that the committed chart and the page's
// table are what this makes of the committed JSON, so the figures and the chart cannot part.
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const out = path.join(root, 'docs', 'bench');

const COLUMNS = ['floor', 'run', 'into', 'runAsync', 'koffi', 'python'];
const NAMES = { floor: 'C floor', run: 'run', into: 'run {into}', runAsync: 'runAsync', koffi: 'koffi', python: 'Python reference' };
const COLOURS = { run: '#2563eb', into: '#60a5fa', runAsync: '#7c3aed', koffi: '#f59e0b', python: '#dc2626' };

function fmt(ns) {
  if (ns === undefined) return '—';
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(2)} µs`;
  return `${ns.toFixed(0)} ns`;
}

/** The per-workload table: median times, and each ratio to the C floor of the same run. */
function table(results) {
  const header = ['workload', ...COLUMNS.map((c) => NAMES[c])];
  const rows = results.workloads.map((w) => [w.id, ...COLUMNS.map((c) => (w.ns[c] === undefined ? '—' : c === 'floor' ? fmt(w.ns[c]) : `${fmt(w.ns[c])} (${(w.ns[c] / w.ns.floor).toFixed(2)}x)`))]);
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** Grouped horizontal bars: each contender's time over the C floor's, on a log scale. */
function svg(results) {
  const contenders = COLUMNS.filter((c) => c !== 'floor');
  const left = 120;
  const width = 760;
  const plot = width - left - 20;
  const bar = 9;
  const groups = results.workloads.map((w) => ({ id: w.id, bars: contenders.filter((c) => w.ns[c] !== undefined).map((c) => ({ c, ratio: w.ns[c] / w.ns.floor })) }));
  const maxLog = Math.ceil(Math.log10(Math.max(...groups.flatMap((g) => g.bars.map((b) => b.ratio)))));
  const minLog = Math.min(-1, Math.floor(Math.log10(Math.min(...groups.flatMap((g) => g.bars.map((b) => b.ratio))))));
  const x = (ratio) => left + ((Math.log10(ratio) - minLog) / (maxLog - minLog)) * plot;
  const lines = [];
  let y = 50;
  for (const g of groups) {
    const h = g.bars.length * (bar + 2);
    lines.push(`<text x="${left - 8}" y="${y + h / 2 + 4}" text-anchor="end" font-size="12">${esc(g.id)}</text>`);
    for (const b of g.bars) {
      const x0 = x(1);
      const x1 = x(b.ratio);
      lines.push(`<rect x="${Math.min(x0, x1).toFixed(1)}" y="${y}" width="${Math.max(1, Math.abs(x1 - x0)).toFixed(1)}" height="${bar}" fill="${COLOURS[b.c]}"><title>${esc(NAMES[b.c])}: ${b.ratio.toFixed(2)}x</title></rect>`);
      lines.push(`<text x="${(Math.max(x0, x1) + 3).toFixed(1)}" y="${y + bar - 1}" font-size="9">${b.ratio.toFixed(2)}x</text>`);
      y += bar + 2;
    }
    y += 10;
  }
  const height = y + 40;
  const axis = [];
  for (let p = minLog; p <= maxLog; p++) {
    const v = 10 ** p;
    axis.push(`<line x1="${x(v).toFixed(1)}" y1="40" x2="${x(v).toFixed(1)}" y2="${y}" stroke="${p === 0 ? '#111' : '#ddd'}"/>`);
    axis.push(`<text x="${x(v).toFixed(1)}" y="${y + 14}" text-anchor="middle" font-size="10">${v >= 1 ? v : v.toFixed(-p)}x</text>`);
  }
  const legend = contenders.map((c, i) => `<rect x="${left + i * 120}" y="14" width="10" height="10" fill="${COLOURS[c]}"/><text x="${left + i * 120 + 14}" y="23" font-size="11">${esc(NAMES[c])}</text>`);
  const m = results.machine;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    ...legend,
    ...axis,
    ...lines,
    `<text x="${left}" y="${height - 6}" font-size="10">time over the C floor's (log scale; 1x = straight through the ABI in C). ${esc(m.model)}, ${m.cpus} CPUs, Node ${esc(m.node)}, ${esc(m.date.slice(0, 10))}</text>`,
    '</svg>',
    '',
  ].join('\n');
}

/** The page's tables: per workload, the service figures, isolation (when measured), and serving. */
function figures(results) {
  const { report } = require('../bench/services');
  const { reportServing } = require('../bench/serving');
  const { reportIsolation } = require('../bench/isolation');
  return [table(results), report(results.service), ...(results.isolation ? [reportIsolation(results.isolation)] : []), reportServing(results.serving)];
}

module.exports = { table, svg, figures };

if (require.main === module) {
  const source = path.resolve(process.argv[2] || path.join(root, 'bench', 'results.json'));
  const results = JSON.parse(fs.readFileSync(source, 'utf8'));
  fs.mkdirSync(out, { recursive: true });
  if (source !== path.join(out, 'results.json')) fs.writeFileSync(path.join(out, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
  fs.writeFileSync(path.join(out, 'chart.svg'), svg(results));
  console.log(figures(results).join('\n\n'));
}
