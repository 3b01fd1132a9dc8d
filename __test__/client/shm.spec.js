'use strict';

// sharedMemory: 'auto' against serve on this host (--allow-client-shm): tensors go through
// regions of /dev/shm that are registered once, reused by later runs, and always unregistered
// and removed (at close(), and their files when the process exits); answers as over the wire.
const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { connect } = require('../../lib/client');
const { makeRepository, servedRepo } = require('../serve/setup');
const { rng, randomF32 } = require('../helpers');

const ours = () => fs.readdirSync('/dev/shm').filter((f) => f.startsWith(`zgc-client-${process.pid}-`));
const serverRegions = async (url) => (await (await fetch(`${url}/v2/systemsharedmemory/status`)).json()).map((r) => r.name);

(process.platform === 'linux' ? describe : describe.skip)("sharedMemory: 'auto'", () => {
  const live = servedRepo(() => makeRepository().repo, ['--allow-client-shm']);
  const addresses = () => [live.server.url, `grpc://127.0.0.1:${live.grpcPort}`];

  test.each([['REST', 0], ['gRPC', 1]])('over %s: runs go through regions, reused, answering as over the wire; close() unregisters and removes them', async (_, i) => {
    const client = await connect(addresses()[i], { sharedMemory: 'auto' });
    const wire = await connect(addresses()[i]);
    expect([client.sharedMemory, wire.sharedMemory]).toEqual([true, false]);
    const [add, add1m, plain] = [await client.model('add'), await client.model('add1m'), await wire.model('add1m')];
    const next = rng(4);
    for (let k = 0; k < 5; k++) {
      const a = randomF32(next, 4);
      const b = randomF32(next, 4);
      expect(Array.from((await add.runAsync({ a, b }))[0].data)).toEqual(Array.from(a, (v, j) => Math.fround(v + b[j])));
    }
    const n = 1 << 20;
    const big = { a: randomF32(next, n), b: randomF32(next, n) };
    const [viaShm] = await add1m.runAsync(big);
    const [viaWire] = await plain.runAsync(big);
    expect(Buffer.compare(Buffer.from(viaShm.data.buffer, viaShm.data.byteOffset, 4 * n), Buffer.from(viaWire.data.buffer, viaWire.data.byteOffset, 4 * n))).toBe(0);
    // One run at a time: one small region and one large, each registered once and reused.
    expect(ours()).toHaveLength(2);
    expect((await serverRegions(live.server.url)).filter((r) => r.startsWith(`zgc-client-${process.pid}-`))).toHaveLength(2);
    await client.close();
    wire.close();
    expect(ours()).toEqual([]);
    expect((await serverRegions(live.server.url)).filter((r) => r.startsWith(`zgc-client-${process.pid}-`))).toEqual([]);
  });

  test('a refused run gives its region back; runs beyond the regions at once go over the wire', async () => {
    const client = await connect(live.server.url, { sharedMemory: 'auto' });
    try {
      const add = await client.model('add');
      // The server refuses it (no b): its region is back for the next.
      await expect(add.runAsync({ a: [1, 2, 3, 4] })).rejects.toMatchObject({ code: 'ERR_ZGC_REMOTE_INVALID' });
      expect(Array.from((await add.runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] }))[0].data)).toEqual([2, 3, 4, 5]);
      expect(ours()).toHaveLength(1);
      const many = await Promise.all(Array.from({ length: 40 }, (_, k) => add.runAsync({ a: [k, 0, 0, 0], b: [1, 1, 1, 1] })));
      expect(many.map((o) => o[0].data[0])).toEqual(Array.from({ length: 40 }, (_, k) => k + 1));
      expect(ours().length).toBeLessThanOrEqual(16);
    } finally {
      await client.close();
    }
    expect(ours()).toEqual([]);
  });

  test('a run given up (its timeoutMs passed) drops its region: the server may still write it', async () => {
    const client = await connect(live.server.url, { sharedMemory: 'auto' });
    try {
      const slow = await client.model('slowtimeout');
      await expect(slow.runAsync({ x: [1, 2, 3, 4] }, { timeoutMs: 20 })).rejects.toMatchObject({ code: 'ERR_ZGC_REMOTE_TIMEOUT' });
      // Removed at once; the server is told to let it go.
      expect(ours()).toEqual([]);
      const add = await client.model('add');
      expect(Array.from((await add.runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] }))[0].data)).toEqual([2, 3, 4, 5]);
      expect(ours()).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  test("a server that does not list system_shared_memory, or one not on this host, is sent tensors over the wire", async () => {
    const other = require('../serve/setup').listenInProcess;
    const plain = await other([live.repo]);
    try {
      const client = await connect(plain.url, { sharedMemory: 'auto' });
      expect(client.sharedMemory).toBe(false);
      expect(Array.from((await (await client.model('add')).runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] }))[0].data)).toEqual([2, 3, 4, 5]);
      client.close();
    } finally {
      await plain.stop();
    }
    await expect(connect(live.server.url, { sharedMemory: 'always' })).rejects.toThrow("connect() option sharedMemory must be 'auto' or 'off', got always");
  });

  test('a process that ends without close() leaves no region file behind', async () => {
    const script = `
      const { connect } = require(${JSON.stringify(path.join(__dirname, '..', '..', 'lib', 'client'))});
      const fs = require('node:fs');
      (async () => {
        const client = await connect(${JSON.stringify(live.server.url)}, { sharedMemory: 'auto' });
        const add = await client.model('add');
        await add.runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] });
        console.log(fs.readdirSync('/dev/shm').filter((f) => f.startsWith('zgc-client-' + process.pid + '-')).length, process.pid);
        process.exit(0);
      })();
    `;
    // Async: the server answering it is in this process.
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', script], { encoding: 'utf8' });
    const [during, pid] = stdout.trim().split(' ');
    expect(during).toBe('1');
    expect(fs.readdirSync('/dev/shm').filter((f) => f.startsWith(`zgc-client-${pid}-`))).toEqual([]);
  });
});
