'use strict';

// Several servers (lib/client/servers.js), against real servers: which failures send a
// request on to the next server and which do not, how long a server is left out, and calls
// that go to every server. A 503 is made by construction: serve refuses a body larger than its
// in-flight budget before reading it; a lost connection by killing a server that holds a run
// (the faulty fixture's mode 7 waits until a file exists).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { connect } = require('../../lib/client');
const { Servers } = require('../../lib/client/servers');
const { RestTransport } = require('../../lib/client/rest');
const { buildRequest } = require('../../lib/client/request');
const { makeRepository, writeModel, listenInProcess } = require('../serve/setup');

const N = 1 << 20;
const big = { a: new Float32Array(N).fill(1), b: new Float32Array(N).fill(2) };

/** The add1m model as the client describes it, for requests made here by hand. */
const add1m = { name: 'add1m', sources: [{ name: 'a', dtype: 'f32', shape: [N] }, { name: 'b', dtype: 'f32', shape: [N] }], outputs: [{ name: 'output_0', dtype: 'f32', shape: [N] }] };

function servers(urls, options = {}) {
  return new Servers(urls.map((url) => ({ url, transport: new RestTransport(new URL(url), { binary: true }) })), options);
}

describe('which failures go on to the next server', () => {
  let repo;
  let tight;
  let roomy;
  beforeAll(async () => {
    repo = makeRepository().repo;
    // 1 MiB of request bodies at once: an 8 MiB request is refused with a 503 before it is read.
    tight = await listenInProcess([repo, '--max-inflight-bytes', '1m']);
    roomy = await listenInProcess([repo]);
  });
  afterAll(async () => {
    await tight.stop();
    await roomy.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });

  test.each([['a plain infer', true], ['a sequence step (not idempotent)', false]])("a 503 (the server did not run it) sends %s on; the server is left out for its Retry-After", async (_, idempotent) => {
    const s = servers([tight.url, roomy.url], { retryAfterMs: 60000 });
    try {
      const prepared = s.prepare('add1m', undefined, buildRequest(add1m, big, undefined, true).request);
      const { server, response } = await s.call((t) => t.infer('add1m', undefined, prepared, { idempotent }), { idempotent });
      expect(server.url).toBe(roomy.url);
      expect(response.outputs[0].name).toBe('output_0');
      expect(s.stats()).toEqual([
        { url: tight.url, requests: 1, outstanding: 0, failures: 1, failovers: 1, available: false },
        { url: roomy.url, requests: 1, outstanding: 0, failures: 0, failovers: 0, available: true },
      ]);
      // Left out for the server's Retry-After (1 s), not retryAfterMs: the probe finds it ready.
      const deadline = Date.now() + 10000;
      while (!s.stats()[0].available && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(s.stats()[0].available).toBe(true);
    } finally {
      s.close();
    }
  });

  test('a refusal that is no 503 (an invalid request) is not sent on; nor is anything once every server was tried', async () => {
    const s = servers([roomy.url, tight.url]);
    try {
      const bad = await s.call((t) => t.json('POST', '/v2/models/add/infer', { inputs: [] }), { idempotent: true }).catch((e) => e);
      expect(bad).toMatchObject({ code: 'ERR_ZGC_REMOTE_INVALID', status: 400 });
      expect(s.stats().map((x) => x.requests)).toEqual([1, 0]);
      // Both refuse it with a 503 on a server whose budget is tight: tried once each, then the last 503.
      const t2 = servers([tight.url, tight.url]);
      const prepared = t2.prepare('add1m', undefined, buildRequest(add1m, big, undefined, true).request);
      const err = await t2.call((t) => t.infer('add1m', undefined, prepared, {}), { idempotent: true }).catch((e) => e);
      expect(err).toMatchObject({ code: 'ERR_ZGC_REMOTE_UNAVAILABLE', status: 503, retryAfterMs: 1000 });
      expect(t2.stats().map((x) => [x.requests, x.failures])).toEqual([[1, 1], [1, 1]]);
      t2.close();
    } finally {
      s.close();
    }
  });

  test('model control goes to every server', async () => {
    const control = makeRepository().repo;
    const [a, b] = [await listenInProcess([control, '--model-control', 'explicit']), await listenInProcess([control, '--model-control', 'explicit'])];
    const client = await connect([a.url, b.url]);
    try {
      await client.unloadModel('status');
      for (const url of [a.url, b.url]) expect((await fetch(`${url}/v2/models/status/ready`)).status).not.toBe(200);
      await client.loadModel('status');
      for (const url of [a.url, b.url]) expect((await fetch(`${url}/v2/models/status/ready`)).status).toBe(200);
    } finally {
      client.close();
      await a.stop();
      await b.stop();
      fs.rmSync(control, { recursive: true, force: true });
    }
  });
});

describe('which server a request goes to', () => {
  let repo;
  let a;
  let b;
  let hold;
  beforeAll(async () => {
    repo = makeRepository().repo;
    writeModel(repo, 'faulty', { 1: 'faulty' }, { instances: 1 });
    [a, b] = [await listenInProcess([repo]), await listenInProcess([repo])];
  });
  afterAll(async () => {
    delete process.env.ZGC_FAULTY_HOLD;
    await a.stop();
    await b.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });
  const faulty = { name: 'faulty', sources: [{ name: 'x', dtype: 'f32', shape: [4] }, { name: 'mode', dtype: 'f32', shape: [] }, { name: 'id', dtype: 'f32', shape: [] }], outputs: [{ name: 'output_0', dtype: 'f32', shape: [4] }] };
  const add = { name: 'add', sources: [{ name: 'a', dtype: 'f32', shape: [4] }, { name: 'b', dtype: 'f32', shape: [4] }], outputs: [{ name: 'output_0', dtype: 'f32', shape: [4] }] };
  // faulty (mode 7: held in the server until the hold file exists) or add.
  const run = (s, model, mode = 0) => {
    const inputs = model === faulty ? { x: [1, 2, 3, 4], mode, id: 1 } : { a: [1, 2, 3, 4], b: [1, 1, 1, 1] };
    const prepared = s.prepare(model.name, undefined, buildRequest(model, inputs, undefined, true).request);
    return s.call((t) => t.infer(model.name, undefined, prepared, {}), { idempotent: true }).then((r) => r.server.url);
  };

  test('the one with the fewest outstanding: a second request while the first is out goes to the other', async () => {
    // The servers run in this process: the fixture reads the hold file's name when it runs.
    hold = path.join(repo, 'release');
    process.env.ZGC_FAULTY_HOLD = hold;
    const s = servers([a.url, b.url]);
    try {
      // Held on a until released: out for as long as this test needs it.
      const first = run(s, faulty, 7);
      // A quick call in between, taken in turn by b, brings the turn back to a: only the count
      // of outstanding requests sends the second one to b.
      expect((await s.call((t) => t.ready(), { idempotent: true })).server.url).toBe(b.url);
      expect(s.stats().map((x) => x.outstanding)).toEqual([1, 0]);
      expect(await run(s, add)).toBe(b.url);
      fs.writeFileSync(hold, '');
      expect(await first).toBe(a.url);
    } finally {
      fs.writeFileSync(hold, '');
      s.close();
    }
  });

  test('a server left out takes nothing while another can, however busy; a lone server is never left out', async () => {
    const s = servers([a.url, b.url], { retryAfterMs: 60000 });
    const lone = servers([a.url], { retryAfterMs: 60000 });
    try {
      s.leaveOut(s.list[0], 60000);
      expect(await Promise.all([run(s, add), run(s, add), run(s, add)])).toEqual([b.url, b.url, b.url]);
      expect(s.stats().map((x) => [x.requests, x.available])).toEqual([[0, false], [3, true]]);
      lone.leaveOut(lone.list[0], 60000);
      expect(lone.stats()[0].available).toBe(true);
      expect(await run(lone, add)).toBe(a.url);
    } finally {
      s.close();
      lone.close();
    }
  });

  test('an aborted signal stops a request from going on to the next server', async () => {
    const dead = `http://127.0.0.1:${await new Promise((resolve) => {
      const srv = require('node:net').createServer();
      srv.listen(0, '127.0.0.1', () => {
        const { port } = srv.address();
        srv.close(() => resolve(port));
      });
    })}`;
    const s = servers([dead, a.url]);
    try {
      const controller = new AbortController();
      controller.abort(new Error('enough'));
      // The transport is asked all the same (the abort reaches it as its signal); the refused
      // connection is then not sent on.
      const err = await s.call((t) => t.ready(), { idempotent: true, signal: controller.signal }).catch((e) => e);
      expect(err).toMatchObject({ code: 'ERR_ZGC_CONNECTION', sent: false });
      expect(s.stats().map((x) => x.requests)).toEqual([1, 0]);
    } finally {
      s.close();
    }
  });
});

describe('a lost connection', () => {
  test('a request that is not idempotent, lost with its server, is not sent on; an idempotent one is', async () => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-client-servers-'));
    writeModel(repo, 'faulty', { 1: 'faulty' }, { instances: 1 });
    const other = await listenInProcess([repo]);
    const start = () =>
      new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [path.join(__dirname, '..', '..', 'bin', 'zgc-runtime.js'), 'serve', repo, '--port', '0'], { env: { ...process.env, ZGC_FAULTY_HOLD: path.join(repo, 'never') }, stdio: ['ignore', 'pipe', 'ignore'] });
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
          const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
          if (m) resolve({ child, url: m[1] });
        });
        child.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
      });
    const held = { name: 'faulty', sources: [{ name: 'x', dtype: 'f32', shape: [4] }, { name: 'mode', dtype: 'f32', shape: [] }, { name: 'id', dtype: 'f32', shape: [] }], outputs: [] };
    const inFlight = async (url) => {
      for (;;) {
        const m = /^zgc_http_requests_in_flight (\d+)/m.exec(await (await fetch(`${url}/metrics`)).text());
        if (m && Number(m[1]) > 0) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    try {
      for (const idempotent of [false, true]) {
        const dying = await start();
        // The dying server first: both have nothing outstanding, and the turn starts there.
        const s = servers([dying.url, other.url]);
        const prepared = s.prepare('faulty', undefined, buildRequest(held, { x: [1, 2, 3, 4], mode: 0, id: 1 }, undefined, true).request);
        const holding = s.prepare('faulty', undefined, buildRequest(held, { x: [1, 2, 3, 4], mode: 7, id: 2 }, undefined, true).request);
        // mode 7 holds on the dying server; on the other one, mode 7 would hold too: the other
        // answers the plain request instead, which is what a resend would send.
        let sentTo = 0;
        const call = s.call((t) => (sentTo++ === 0 ? t.infer('faulty', undefined, holding, { idempotent }) : t.infer('faulty', undefined, prepared, { idempotent })), { idempotent });
        await inFlight(dying.url);
        dying.child.kill('SIGKILL');
        const result = await call.then((r) => r.server.url, (e) => e);
        if (idempotent) expect(result).toBe(other.url);
        else expect(result).toMatchObject({ code: 'ERR_ZGC_CONNECTION', sent: true });
        expect(s.stats().map((x) => x.requests)).toEqual(idempotent ? [1, 1] : [1, 0]);
        s.close();
      }
    } finally {
      await other.stop();
      fs.rmSync(repo, { recursive: true, force: true });
    }
  });
});
