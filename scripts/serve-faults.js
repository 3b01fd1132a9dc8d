#!/usr/bin/env node
'use strict';

// npm run serve:faults [-- --seconds S]: a sustained load on `zgc-runtime serve` with faults
// mixed in (bad requests, clients that go away mid-body and mid-response, a model returning an
// error status, a reload every second), then SIGTERM while requests are running. Every 200 is
// checked against a + b computed here; prints one JSON line of figures and exits 1 on any wrong
// answer, any accepted request left unanswered, or a server exit other than 0.
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { makeRepository, writeModel, startServer, exited } = require('../__test__/serve/setup');
const { fixture } = require('../__test__/fixtures/manifest');

const args = process.argv.slice(2);
const seconds = Number(args[args.indexOf('--seconds') + 1]) || (args.includes('--seconds') ? NaN : 30);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function post(url, body, { headers = {}, abortAfterBytes, abortOnResponse } = {}) {
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', agent: abortAfterBytes || abortOnResponse ? undefined : agent, headers: { 'content-length': body.length, ...headers } }, (res) => {
      if (abortOnResponse) {
        res.once('data', () => {
          req.destroy();
          resolve({ status: 'gone' });
        });
        return;
      }
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
      res.on('error', (err) => resolve({ status: 'error', error: err.code || err.message }));
    });
    req.on('error', (err) => resolve({ status: 'error', error: err.code || err.message }));
    if (abortAfterBytes) {
      req.write(body.subarray(0, abortAfterBytes));
      setTimeout(() => {
        req.destroy();
        resolve({ status: 'gone' });
      }, 5);
    } else {
      req.end(body);
    }
  });
}

const tensor = (name, data) => ({ name, datatype: 'FP32', shape: [4], data });

async function main() {
  const { repo } = makeRepository();
  const own = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-faults-'));
  const swapDir = writeModel(own, 'swap', { 1: 'add' }, { instances: 2 });
  const server = await startServer([repo, `swap=${swapDir}`, '--model-control', 'poll', '--poll-ms', '100', '--pool-size', '2', '--shutdown-timeout-ms', '10000']);
  const url = (model) => `${server.url}/v2/models/${model}/infer`;
  const rss = async () => {
    const r = await new Promise((resolve) => http.get(`${server.url}/metrics`, (res) => {
      let t = '';
      res.on('data', (d) => (t += d));
      res.on('end', () => resolve(t));
    }));
    return Number(/^process_resident_memory_bytes (\d+)/m.exec(r)[1]) / 2 ** 20;
  };
  const n = { ok: 0, wrong: 0, bad: 0, badWrong: 0, gone: 0, statusErrors: 0, unexpected: [], reloads: 0, slowAtSigterm: 0 };
  let stop = false;
  let seed = 1;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const big = Buffer.from(JSON.stringify({ inputs: [tensor('a', [1, 2, 3, 4]), tensor('b', [1, 2, 3, 4])], pad: 'x'.repeat(200000) }));
  const bigOut = (() => {
    const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [1 << 20], parameters: { binary_data_size: 4 << 20 } }, { name: 'b', datatype: 'FP32', shape: [1 << 20], parameters: { binary_data_size: 4 << 20 } }], parameters: { binary_data_output: true } }));
    return { body: Buffer.concat([head, Buffer.alloc(8 << 20)]), headers: { 'inference-header-content-length': String(head.length) } };
  })();

  async function good(model) {
    const a = Array.from({ length: 4 }, () => Math.fround(rnd() * 200 - 100));
    const b = Array.from({ length: 4 }, () => Math.fround(rnd() * 200 - 100));
    const r = await post(url(model), Buffer.from(JSON.stringify({ inputs: [tensor('a', a), tensor('b', b)] })));
    const expect = a.map((v, i) => Math.fround(v + b[i])).join();
    // The server writes each f32 as its shortest decimal: compared as f32 values.
    if (r.status === 200 && JSON.parse(r.body).outputs[0].data.map(Math.fround).join() === expect) n.ok++;
    else if (r.status === 200) n.wrong++;
    else n.unexpected.push(`${model}: ${r.status} ${r.error || r.body}`);
  }

  async function fault(kind) {
    if (kind === 0) {
      const r = await post(url('add'), Buffer.from(JSON.stringify({ inputs: [tensor('a', [1, 'x', 3, 4]), tensor('b', [1, 2, 3, 4])] })));
      if (r.status === 400) n.bad++;
      else n.badWrong++;
    } else if (kind === 1) {
      await post(url('add'), big, { abortAfterBytes: 1000 });
      n.gone++;
    } else if (kind === 2) {
      await post(url('add1m'), bigOut.body, { headers: bigOut.headers, abortOnResponse: true });
      n.gone++;
    } else {
      const i8 = (name, v) => ({ name, datatype: 'INT8', shape: [], data: [v] });
      const r = await post(url('status'), Buffer.from(JSON.stringify({ inputs: [i8('run_status', 5), i8('copy_status', 0), i8('bind_status', 0), { name: 'buf', datatype: 'FP32', shape: [2], data: [1, 2] }] })));
      if (r.status === 500) n.statusErrors++;
      else n.unexpected.push(`status: ${r.status} ${r.body}`);
    }
  }

  const worker = async (w) => {
    for (let i = 0; !stop; i++) {
      if (i % 10 === 9) await fault((w + i) % 4);
      else await good(i % 2 ? 'add' : 'swap');
    }
  };
  // A reload a second: the swap model's file alternates between two copies of the same artifact.
  const so = path.join(swapDir, '1', 'model.so');
  const reloader = setInterval(() => {
    fs.copyFileSync(fixture('add'), `${so}.tmp`);
    fs.renameSync(`${so}.tmp`, so);
  }, 1000);
  for (let i = 0; i < 20; i++) await good('add');
  const rssStart = await rss();
  const workers = Array.from({ length: 16 }, (_, w) => worker(w));
  const t0 = Date.now();
  const rssSamples = [];
  while (Date.now() - t0 < seconds * 1000) {
    await new Promise((r) => setTimeout(r, 1000));
    rssSamples.push(await rss());
  }
  clearInterval(reloader);
  const rssEnd = await rss();
  // SIGTERM with slow requests accepted: each must be answered.
  const slow = [0, 1].map((i) => post(url('slow'), Buffer.from(JSON.stringify({ inputs: [tensor('x', [i, i, i, i])] }))));
  await new Promise((r) => setTimeout(r, 100));
  stop = true;
  server.child.kill('SIGTERM');
  const slowReplies = await Promise.all(slow);
  n.slowAtSigterm = slowReplies.filter((r, i) => r.status === 200 && JSON.parse(r.body).outputs[0].data[0] === 2 * i).length;
  await Promise.all(workers);
  const code = await exited(server.child);
  n.reloads = (server.stderr().match(/model "swap" reloaded/g) || []).length;
  agent.destroy();
  fs.rmSync(repo, { recursive: true, force: true });
  fs.rmSync(own, { recursive: true, force: true });
  // A request the shutdown closed before it arrived (a keep-alive race) is not an accepted one;
  // anything else unexpected is a failure.
  const refused = n.unexpected.filter((u) => /ECONNRESET|ECONNREFUSED|socket hang up/.test(u) && stop);
  const unexpected = n.unexpected.filter((u) => !refused.includes(u));
  const result = {
    seconds,
    answeredRight: n.ok,
    wrongAnswers: n.wrong,
    badRequestsAnswered400: n.bad,
    badRequestsOtherwise: n.badWrong,
    clientsGone: n.gone,
    modelErrorStatus500: n.statusErrors,
    reloads: n.reloads,
    slowAnsweredAfterSigterm: `${n.slowAtSigterm}/2`,
    refusedAtShutdown: refused.length,
    unexpected,
    exitCode: code,
    rssMb: { start: +rssStart.toFixed(1), end: +rssEnd.toFixed(1), max: +Math.max(...rssSamples).toFixed(1), every5s: rssSamples.filter((_, i) => i % 5 === 4).map((v) => Math.round(v)) },
  };
  console.log(JSON.stringify(result));
  const ok = n.wrong === 0 && n.badWrong === 0 && unexpected.length === 0 && n.slowAtSigterm === 2 && code === 0 && n.reloads > 0;
  process.exit(ok ? 0 : 1);
}

if (require.main === module) main();
