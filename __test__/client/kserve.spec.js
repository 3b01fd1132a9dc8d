'use strict';

// zgc-runtime/client against KServe's own Python model server (the kserve SDK's ModelServer,
// kserve_server.py): a model its metadata describes, and one it does not (a custom model's
// metadata lists no inputs or outputs), over REST and gRPC. KServe answers JSON even when
// binary outputs are asked for, and writes absent fields as null: the client reads both.
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { connect } = require('../../lib/client');
const { PYTHON } = require('../serve/setup');
const { rng, randomF32 } = require('../helpers');

const hasKserve = fs.existsSync(PYTHON.grpc);

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startKserve() {
  const [http, grpc] = [await freePort(), await freePort()];
  const child = spawn(PYTHON.grpc, [path.join(__dirname, 'kserve_server.py'), String(http), String(grpc)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10000);
    await exited;
    clearTimeout(killer);
  };
  for (let i = 0; i < 300 && child.exitCode === null; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${http}/v2/health/ready`)).status === 200) return { http, grpc, stop };
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error(`KServe's server did not start:\n${log.slice(-3000)}`);
}

(hasKserve ? describe : describe.skip)("the client against KServe's Python model server", () => {
  let kserve;
  beforeAll(async () => {
    kserve = await startKserve();
  }, 60000);
  afterAll(async () => {
    if (kserve) await kserve.stop();
  }, 20000);

  const KINDS = [
    // KServe lists no binary_tensor_data, so JSON is the default; it takes binary when asked.
    ['REST (binary)', () => `http://127.0.0.1:${kserve.http}`, { binary: true }],
    ['REST (JSON)', () => `http://127.0.0.1:${kserve.http}`, {}],
    ['gRPC', () => `grpc://127.0.0.1:${kserve.grpc}`, {}],
  ];

  test.each(KINDS)('over %s: a described model answers a + b; an undescribed one takes any input, its dtype from the array', async (kind, url, options) => {
    const client = await connect(url(), options);
    try {
      expect(await client.metadata()).toMatchObject({ name: 'kserve' });
      const add = await client.model('add');
      expect(add.sources).toEqual([
        { name: 'a', dtype: 'f32', shape: [4] },
        { name: 'b', dtype: 'f32', shape: [4] },
      ]);
      const next = rng(21);
      for (let i = 0; i < 5; i++) {
        const a = randomF32(next, 4);
        const b = randomF32(next, 4);
        const [sum] = await add.runAsync({ a, b });
        expect([sum.name, sum.dtype, sum.shape]).toEqual(['output_0', 'f32', [4]]);
        expect(Array.from(sum.data)).toEqual(Array.from(a, (v, k) => Math.fround(v + b[k])));
      }
      const twice = await client.model('twice');
      expect([twice.sources, twice.outputs]).toEqual([[], []]);
      const [y] = await twice.runAsync({ anything: Int32Array.of(1, -2, 2 ** 30) });
      expect([y.name, y.dtype, y.shape, Array.from(y.data)]).toEqual(['y', 'i32', [3], [2, -4, -(2 ** 31)]]);
      const [z] = await twice.runAsync({ x: { shape: [2, 2], data: [1.5, 2, 3, -4], dtype: 'f64' } });
      expect([z.dtype, z.shape, Array.from(z.data)]).toEqual(['f64', [2, 2], [3, 4, 6, -8]]);
      await expect(twice.runAsync({ x: [1, 2] })).rejects.toMatchObject({ code: 'ERR_ZGC_DTYPE', source: 'x', message: expect.stringContaining('give a TypedArray, or { shape, data, dtype }') });
      const missing = await client.model('nope').catch((e) => e);
      expect(missing).toMatchObject({ code: 'ERR_ZGC_REMOTE_NOT_FOUND', status: kind === 'gRPC' ? 5 : 404 });
      expect(missing.message).toContain('Model with name nope does not exist');
    } finally {
      client.close();
    }
  });

  test("a FastAPI refusal (422, its words under detail) is ERR_ZGC_REMOTE_INVALID with the server's words", async () => {
    const { RestTransport } = require('../../lib/client/rest');
    const t = new RestTransport(new URL(`http://127.0.0.1:${kserve.http}`), {});
    try {
      // No inputs: the request body fails KServe's schema, before any model sees it.
      const err = await t.json('POST', '/v2/models/twice/infer', { outputs: [] }).catch((e) => e);
      expect(err).toMatchObject({ code: 'ERR_ZGC_REMOTE_INVALID', status: 422 });
      expect(err.message).toContain('inputs');
      expect(err.message).not.toBe(`http://127.0.0.1:${kserve.http}: HTTP 422`);
    } finally {
      t.close();
    }
  });
});
