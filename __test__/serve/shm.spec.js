'use strict';

// Client system shared memory (issue 38) through the real tritonclient, HTTP and gRPC, with
// regions made by tritonclient.utils.shared_memory: tensors in and out of regions compared
// with in-process runs, and every abuse a local client can try (bad keys, a symlink, sizes
// past a region, an object truncated before and during a request, a region unregistered in
// use), after which the server still answers.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { load } = require('../..');
const { fixture } = require('../fixtures/manifest');
const { parseNpy } = require('../../lib/npy');
const { rng, randomF32 } = require('../helpers');
const { makeRepository, writeModel, servedRepo, listenInProcess, pythonClient, hasClients } = require('../serve/setup');

const runnable = process.platform === 'linux' && hasClients;

const client = (protocol, port, plan) => pythonClient('shm_client.py', protocol, [protocol, `127.0.0.1:${port}`], JSON.stringify(plan));

/** Descriptors this process holds open on /dev/shm objects whose names start with `prefix`. */
function openObjects(prefix) {
  const out = [];
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(`/dev/shm${prefix}`)) out.push(target);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

const STATUS = {
  http: { bad: '400', off: '403' },
  grpc: { bad: 'StatusCode.INVALID_ARGUMENT', off: 'StatusCode.PERMISSION_DENIED' },
};

(runnable ? describe : describe.skip)('client system shared memory (issue 38)', () => {
  const add = load(fixture('add'));
  const add1m = load(fixture('add-1m'));
  const live = servedRepo(() => {
    const { repo } = makeRepository();
    // The 1M add as one batch variant of 1,048,576 one-element rows, its requests held 100 ms for others.
    writeModel(repo, 'widebatch', { 1: 'add-1m' }, { instances: 1, dynamicBatching: { variants: { 1048576: 'model.so' }, maxQueueDelayMs: 100 } });
    return repo;
  }, ['--allow-client-shm']);
  afterAll(() => {
    // A client that failed midway leaves its objects behind: /dev/shm is memory.
    for (const f of fs.readdirSync('/dev/shm')) if (f.startsWith(`zgc-shm-spec-${process.pid}-`)) fs.rmSync(`/dev/shm/${f}`, { force: true });
  });

  for (const protocol of ['http', 'grpc']) {
    test(`${protocol}: tensors in and out of regions, and every abuse refused while the server goes on`, async () => {
      const next = rng(protocol === 'http' ? 381 : 382);
      const plan = {
        prefix: `/zgc-shm-spec-${process.pid}-${protocol}-`,
        dir: fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-shm-')),
        add: [Array.from(randomF32(next, 4)), Array.from(randomF32(next, 4))],
        slow_x: Array.from(randomF32(next, 4)),
      };
      const seen = await client(protocol, protocol === 'http' ? live.server.port : live.grpcPort, plan);
      const bad = STATUS[protocol].bad;
      const [a, b] = plan.add.map((v) => Float32Array.from(v));
      const sum = Array.from(add.run({ a, b })[0].data);

      expect(seen.round_trip).toEqual(sum);
      expect(seen.mixed).toEqual(sum);
      expect(seen.after_all).toEqual(sum);
      // 1M floats: the region's output is an in-process run's, bit for bit.
      const read = (f) => parseNpy(fs.readFileSync(path.join(plan.dir, f))).data;
      const expected = add1m.run({ a: read('a.npy'), b: read('b.npy') })[0].data;
      expect(Buffer.from(read('sum.npy').buffer).equals(Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength))).toBe(true);
      fs.rmSync(plan.dir, { recursive: true, force: true });

      const key = (n) => `${plan.prefix}${n}`;
      expect(seen.status).toEqual([
        ['big', key('big'), 0, 8 << 20],
        ['bigout', key('bigout'), 0, 4 << 20],
        ['in', key('in'), 0, 32],
        ['out', key('out'), 0, 16],
      ]);
      const k = seen.bad_keys;
      const notAName = (given) => [bad, `region "bad": the key must be a POSIX shared memory name, "/" then 1 to 250 of A-Z a-z 0-9 . _ -, got ${JSON.stringify(given.length > 130 ? `${given.slice(0, 130)}…` : given)}`];
      expect(k['/../etc/passwd']).toEqual(notAName('/../etc/passwd'));
      expect(k['etc/passwd']).toEqual(notAName('etc/passwd'));
      expect(k['/a/b']).toEqual(notAName('/a/b'));
      expect(k[`/${'x'.repeat(300)}`]).toEqual(notAName(`/${'x'.repeat(300)}`));
      // A symlink in /dev/shm is not followed.
      expect(k[key('link')]).toEqual([bad, `region "bad": the shared memory object "${key('link')}" cannot be opened (ELOOP): create it first, readable and writable by the server`]);
      expect(k[key('missing')]).toEqual([bad, `region "bad": the shared memory object "${key('missing')}" cannot be opened (ENOENT): create it first, readable and writable by the server`]);
      expect(seen.bad_name).toEqual([bad, 'a region name must be 1 to 128 of A-Z a-z 0-9 . _ : -, got "a*b"']);
      expect(seen.twice).toEqual([bad, 'a shared memory region named "in" is registered already: unregister it first']);
      expect(seen.past_object).toEqual([bad, `region "past": offset 8 + byte_size 32 runs past the end of "${key('in')}" (32 bytes)`]);
      expect(seen.past_region).toEqual([bad, 'input "a": shared_memory_offset 24 + shared_memory_byte_size 16 runs past region "in" (32 bytes)']);
      expect(seen.short_size).toEqual([bad, 'input "a": shared_memory_byte_size is 8 bytes, FP32 of shape [4] takes 16']);
      expect(seen.unknown_region).toEqual([bad, 'no shared memory region "nope" is registered']);
      expect(seen.truncated).toEqual([bad, 'input "a": region "cut" ended after 8 of the 16 bytes at offset 0: its shared memory object was truncated']);

      expect(seen.unregister_in_use).toEqual([bad, 'shared memory region "slowin" is in use by 1 request: unregister it once they are answered']);
      expect(seen.in_use_answer).toEqual(['ok', plan.slow_x.map((v) => Math.fround(v * 2))]);
      expect(seen.unregister_after).toBeNull();
      expect(seen.truncated_mid_request).toEqual([bad, 'output "output_0": region "slowout" now holds 0 bytes, 16 were to be written at offset 0: its shared memory object was truncated']);
      expect(seen.status_after).toEqual([]);
      // Unregistered: no descriptor of the client's objects is left open.
      expect(openObjects(plan.prefix)).toEqual([]);
    }, 120000);
  }

  test("a batched model's requests from shared memory wait for their batch with their own values", async () => {
    // Four requests of 20,000 rows (80 KB an input: buffers the server reuses once run() returns).
    const prefix = `/zgc-shm-spec-${process.pid}-batch-`;
    const rows = 20000;
    const url = live.server.url;
    const region = (name, values) => {
      fs.writeFileSync(`/dev/shm${prefix}${name}`, Buffer.from(values.buffer));
      return fetch(`${url}/v2/systemsharedmemory/region/${name}/register`, { method: 'POST', body: JSON.stringify({ key: `${prefix}${name}`, offset: 0, byte_size: values.byteLength }) });
    };
    const plans = [0, 1, 2, 3].map((k) => ({ k, a: Float32Array.from({ length: rows }, (_, i) => k * 100000 + i), b: new Float32Array(rows).fill(0.5) }));
    try {
      for (const { k, a, b } of plans) {
        expect((await region(`a${k}`, a)).status).toBe(200);
        expect((await region(`b${k}`, b)).status).toBe(200);
      }
      const input = (name, k) => ({ name, datatype: 'FP32', shape: [rows], parameters: { shared_memory_region: `${name}${k}`, shared_memory_byte_size: rows * 4 } });
      const answers = await Promise.all(plans.map(({ k }) =>
        fetch(`${url}/v2/models/widebatch/infer`, { method: 'POST', body: JSON.stringify({ inputs: [input('a', k), input('b', k)], parameters: { binary_data_output: true } }) }).then(async (r) => {
          const head = Number(r.headers.get('inference-header-content-length'));
          const bytes = Buffer.from(await r.arrayBuffer());
          return new Float32Array(bytes.buffer.slice(bytes.byteOffset + head, bytes.byteOffset + bytes.length));
        })));
      for (const { k, a } of plans) expect(answers[k]).toEqual(a.map((v) => v + 0.5));
      const text = await (await fetch(`${url}/metrics`)).text();
      // In fewer runs than requests: they waited for each other.
      expect(Number(/^zgc_batch_rows_count\{model="widebatch",version="1"\} (\d+)$/m.exec(text)[1])).toBeLessThan(4);
    } finally {
      for (const { k } of plans) for (const n of [`a${k}`, `b${k}`]) await fetch(`${url}/v2/systemsharedmemory/region/${n}/unregister`, { method: 'POST' });
    }
  }, 30000);

  test('/metrics counts the regions and their bytes; shutdown closes their descriptors', async () => {
    const prefix = `/zgc-shm-spec-${process.pid}-metrics-`;
    const files = ['one', 'two'].map((n) => `/dev/shm${prefix}${n}`);
    fs.writeFileSync(files[0], Buffer.alloc(64));
    fs.writeFileSync(files[1], Buffer.alloc(4096));
    const other = await listenInProcess([live.repo, '--allow-client-shm']);
    try {
      const register = (name, key, byteSize, offset = 0) =>
        fetch(`${other.url}/v2/systemsharedmemory/region/${name}/register`, { method: 'POST', body: JSON.stringify({ key, offset, byte_size: byteSize }) });
      expect((await register('one', `${prefix}one`, 64)).status).toBe(200);
      expect((await register('two', `${prefix}two`, 1000, 96)).status).toBe(200);
      const metrics = await (await fetch(`${other.url}/metrics`)).text();
      expect(metrics).toMatch(/^zgc_shm_regions 2$/m);
      expect(metrics).toMatch(/^zgc_shm_region_bytes 1064$/m);
      const status = await (await fetch(`${other.url}/v2/systemsharedmemory/region/two/status`)).json();
      expect(status).toEqual([{ name: 'two', key: `${prefix}two`, offset: 96, byte_size: 1000 }]);
      expect(openObjects(prefix).sort()).toEqual(files);
      // The switch's method rules, as every endpoint's.
      const get = await fetch(`${other.url}/v2/systemsharedmemory/region/one/register`);
      expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST']);
    } finally {
      await other.stop();
      for (const f of files) fs.rmSync(f, { force: true });
    }
    expect(openObjects(prefix)).toEqual([]);
  });

  test('off unless allowed: registering is refused with how to allow it, and the metadata does not list it', async () => {
    const plain = await listenInProcess([live.repo]);
    try {
      const grpc = await plain.server.listenGrpc(0, '127.0.0.1');
      const why = 'client shared memory is off: start the server with --allow-client-shm (createServer option allowClientShm) to allow it';
      for (const protocol of ['http', 'grpc']) {
        const seen = await client(protocol, protocol === 'http' ? plain.port : grpc, { prefix: `/zgc-shm-spec-${process.pid}-off-${protocol}-`, off: true });
        expect(seen.register).toEqual([STATUS[protocol].off, why]);
        expect(seen.status).toEqual([STATUS[protocol].off, why]);
      }
      const meta = await (await fetch(`${plain.url}/v2`)).json();
      expect(meta.extensions).not.toContain('system_shared_memory');
      const infer = await fetch(`${plain.url}/v2/models/add/infer`, {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], parameters: { shared_memory_region: 'r', shared_memory_byte_size: 16 } }, { name: 'b', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }] }),
      });
      expect([infer.status, (await infer.json()).error]).toEqual([403, why]);
      const { createServer } = require('../../lib/serve');
      expect(() => createServer({ models: live.repo, allowClientShm: 'yes' })).toThrow(new TypeError('createServer option allowClientShm must be true or false, got "yes"'));
    } finally {
      await plain.stop();
    }
  }, 60000);
});
