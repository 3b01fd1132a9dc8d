'use strict';

// zgc-runtime/client against MLServer 1.7 (in the machine's cache, made by
// scripts/prepare-reference.js), serving the add fixture through the Python reference runtime
// (bench/python-servers/mlserver_zgc.py): MLServer lists no binary_tensor_data, so the client
// sends JSON there unless told otherwise; its metadata lists no inputs, so they are described
// by their arrays. Over REST and gRPC.
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { connect } = require('../../lib/client');
const { fixture, rng, randomF32 } = require('../helpers');

const VENV = path.join(os.homedir(), '.cache', 'zgc-runtime', 'bench-venvs', 'mlserver', 'bin', 'mlserver');
const hasMlserver = process.platform === 'linux' && fs.existsSync(VENV);

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

(hasMlserver ? describe : describe.skip)('the client against MLServer 1.7', () => {
  let ml;
  beforeAll(async () => {
    const { startMlserver } = require('../../bench/python-servers');
    ml = await startMlserver({ add: fixture('add') }, [await freePort(), await freePort(), await freePort()], 1);
  }, 150000);
  afterAll(async () => {
    if (ml) await ml.stop();
  }, 30000);

  test.each([['REST', () => ml.url], ['gRPC', () => `grpc://${ml.grpc}`]])('over %s: a + b, to the float; its refusals with their codes', async (kind, address) => {
    const client = await connect(address());
    try {
      expect(await client.metadata()).toMatchObject({ name: 'mlserver', version: '1.7.1' });
      const add = await client.model('add');
      expect([add.sources, add.outputs]).toEqual([[], []]);
      const next = rng(8);
      for (let i = 0; i < 4; i++) {
        const a = randomF32(next, 4);
        const b = randomF32(next, 4);
        const [sum] = await add.runAsync({ a, b });
        expect([sum.name, sum.dtype]).toEqual(['output_0', 'f32']);
        expect(Array.from(sum.data)).toEqual(Array.from(a, (v, k) => Math.fround(v + b[k])));
      }
      const missing = await client.model('nope').catch((e) => e);
      expect(missing).toMatchObject({ code: 'ERR_ZGC_REMOTE_NOT_FOUND', status: kind === 'gRPC' ? 5 : 404 });
      expect(missing.message).toMatch(/Model nope (with version )?.*not found/);
    } finally {
      client.close();
    }
  });
});
