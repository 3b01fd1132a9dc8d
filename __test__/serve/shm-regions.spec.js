'use strict';

// lib/serve/shm.js's regions, driven directly (issue 38): a region's base offset on both
// reads and writes, every refusal of a register, a FIFO in /dev/shm, the region limit, the
// budget on inputs read, input buffers kept for the next request, and descriptors that stay
// open while a request holds their region after unregister or shutdown.
const fs = require('node:fs');
const { execFileSync } = require('node:child_process');
const { createRegions, MAX_REGIONS } = require('../../lib/serve/shm');
const { createBudget } = require('../../lib/serve/body');

const linux = process.platform === 'linux';
const prefix = `zgc-regions-spec-${process.pid}-`;
const object = (name, bytes) => {
  fs.writeFileSync(`/dev/shm/${prefix}${name}`, bytes);
  return `/${prefix}${name}`;
};
const openDescriptors = () => fs.readdirSync('/proc/self/fd').filter((fd) => {
  try {
    return fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith(`/dev/shm/${prefix}`);
  } catch {
    return false;
  }
}).length;
const refusal = (fn) => {
  try {
    fn();
  } catch (err) {
    return [err.status, err.message];
  }
  return null;
};

(linux ? describe : describe.skip)('client shared memory regions', () => {
  afterEach(() => {
    for (const f of fs.readdirSync('/dev/shm')) if (f.startsWith(prefix)) fs.rmSync(`/dev/shm/${f}`, { force: true });
  });

  test("reads and writes land at the region's own offset plus the request's", async () => {
    const regions = createRegions({ allowed: true });
    const bytes = Buffer.alloc(64);
    Float32Array.from([1, 2, 3, 4]).forEach((v, i) => bytes.writeFloatLE(v, 24 + 4 * i));
    const key = object('base', bytes);
    // The region starts 16 bytes into the object; the input 8 bytes into the region.
    regions.register('r', key, 16, 48);
    const request = { inputs: {}, shmInputs: [{ name: 'x', datatype: 'FP32', count: 4, region: 'r', offset: 8, byteSize: 16 }], shmOutputs: [{ name: 'y', index: 0, region: 'r', offset: 28, byteSize: 16 }] };
    const held = await regions.stage(request, createBudget(1 << 20), { bytes: 0 });
    expect(Array.from(request.inputs.x)).toEqual([1, 2, 3, 4]);
    await regions.deliver(request, held, [{ data: Float32Array.of(5, 6, 7, 8) }]);
    regions.letGo(held);
    const after = fs.readFileSync(`/dev/shm${key}`);
    expect([0, 1, 2, 3].map((i) => after.readFloatLE(16 + 28 + 4 * i))).toEqual([5, 6, 7, 8]);
    // A write past what the object now holds names what it holds past the region's start.
    fs.truncateSync(`/dev/shm${key}`, 40);
    const again = await regions.stage({ inputs: {}, shmOutputs: [{ name: 'y', index: 0, region: 'r', offset: 28, byteSize: 16 }] }, createBudget(1 << 20), { bytes: 0 });
    await expect(regions.deliver({ shmOutputs: [{ name: 'y', index: 0, region: 'r', offset: 28, byteSize: 16 }] }, again, [{ data: new Float32Array(4) }])).rejects.toThrow('output "y": region "r" now holds 24 bytes, 16 were to be written at offset 28: its shared memory object was truncated');
    regions.letGo(again);
    regions.close();
  });

  test('every refusal of a register names what is wrong', () => {
    const regions = createRegions({ allowed: true });
    const key = object('k', Buffer.alloc(32));
    const notKey = (k) => [400, `region "r": the key must be a POSIX shared memory name, "/" then 1 to 250 of A-Z a-z 0-9 . _ -, got ${JSON.stringify(k)}`];
    expect(refusal(() => regions.register('r', '/.', 0, 4))).toEqual(notKey('/.'));
    expect(refusal(() => regions.register('r', '/..', 0, 4))).toEqual(notKey('/..'));
    expect(refusal(() => regions.register('r', 7, 0, 4))).toEqual([400, 'region "r": the key must be a POSIX shared memory name, "/" then 1 to 250 of A-Z a-z 0-9 . _ -, got 7']);
    expect(refusal(() => regions.register(5, key, 0, 4))).toEqual([400, 'a region name must be 1 to 128 of A-Z a-z 0-9 . _ : -, got 5']);
    expect(refusal(() => regions.register('r', key, -1, 4))).toEqual([400, 'region "r": offset must be a non-negative integer, got -1']);
    expect(refusal(() => regions.register('r', key, 1.5, 4))).toEqual([400, 'region "r": offset must be a non-negative integer, got 1.5']);
    expect(refusal(() => regions.register('r', key, 0, '4'))).toEqual([400, 'region "r": byte_size must be a non-negative integer, got "4"']);
    expect(refusal(() => regions.register('r', key, 0, 33))).toEqual([400, `region "r": offset 0 + byte_size 33 runs past the end of "${key}" (32 bytes)`]);
    // A FIFO placed in /dev/shm opens at once (no wait for a writer) and is refused.
    execFileSync('mkfifo', [`/dev/shm/${prefix}fifo`]);
    expect(refusal(() => regions.register('r', `/${prefix}fifo`, 0, 0))).toEqual([400, `region "r": "/${prefix}fifo" is not a shared memory object`]);
    expect(openDescriptors()).toBe(0);
    regions.close();
    expect(refusal(() => regions.register('s', key, 0, 4))).toEqual([503, 'the server is shutting down']);
  });

  test(`at most ${MAX_REGIONS} regions; unregistering all leaves the ones in use, naming them`, async () => {
    const regions = createRegions({ allowed: true });
    const key = object('many', Buffer.alloc(8));
    for (let i = 0; i < MAX_REGIONS; i++) regions.register(`r${i}`, key, 0, 8);
    expect(refusal(() => regions.register('one-more', key, 0, 8))).toEqual([400, `the server holds ${MAX_REGIONS} shared memory regions already, its most: unregister one first`]);
    expect(regions.count).toBe(MAX_REGIONS);
    expect(regions.bytes).toBe(8 * MAX_REGIONS);
    const busy = (region) => regions.stage({ inputs: {}, shmOutputs: [{ name: 'y', index: 0, region, offset: 0, byteSize: 8 }] }, createBudget(1 << 20), { bytes: 0 });
    const held = [...(await busy('r1')), ...(await busy('r2'))];
    expect(refusal(() => regions.unregister(''))).toEqual([400, 'shared memory regions "r1", "r2" are in use and stay registered; the others are unregistered']);
    expect(regions.status().map((r) => r.name)).toEqual(['r1', 'r2']);
    regions.letGo(held.slice(1));
    expect(refusal(() => regions.unregister(undefined))).toEqual([400, 'shared memory region "r1" is in use and stays registered; the others are unregistered']);
    regions.letGo(held.slice(0, 1));
    regions.unregister();
    expect(regions.count).toBe(0);
    expect(openDescriptors()).toBe(0);
  });

  test('inputs read count against the in-flight budget; a refusal lets go of the regions', async () => {
    const regions = createRegions({ allowed: true });
    const key = object('budget', Buffer.alloc(1 << 20));
    regions.register('r', key, 0, 1 << 20);
    const budget = createBudget(1 << 19);
    const claim = { bytes: 0 };
    const request = { inputs: {}, shmInputs: [{ name: 'x', datatype: 'INT8', count: 1 << 20, region: 'r', offset: 0, byteSize: 1 << 20 }] };
    await expect(regions.stage(request, budget, claim)).rejects.toMatchObject({ status: 503, reason: 'over_budget' });
    expect(claim.bytes).toBe(0);
    // Nothing holds the region: it unregisters.
    regions.unregister('r');
    regions.register('r', key, 0, 1 << 20);
    const roomy = createBudget(4 << 20);
    const held = await regions.stage(request, roomy, claim);
    expect([claim.bytes, roomy.held]).toEqual([1 << 20, 1 << 20]);
    regions.letGo(held);
    regions.close();
  });

  test('input buffers of 64 KB and up serve the next request, four of a size at most', async () => {
    const regions = createRegions({ allowed: true });
    const key = object('spare', Buffer.alloc(1 << 17));
    regions.register('r', key, 0, 1 << 17);
    const input = (bytes) => ({ name: 'x', datatype: 'INT8', count: bytes, region: 'r', offset: 0, byteSize: bytes });
    const read = async (bytes) => {
      const request = { inputs: {}, shmInputs: [input(bytes)] };
      regions.letGo(await regions.stage(request, createBudget(1 << 30), { bytes: 0 }));
      return request;
    };
    const first = await read(1 << 16);
    const buffer = first.inputs.x.buffer;
    regions.recycle(first);
    expect(first.inputs.x).toBeUndefined();
    expect((await read(1 << 16)).inputs.x.buffer).toBe(buffer);
    // Smaller ones are not kept.
    const small = await read(1024);
    regions.recycle(small);
    expect((await read(1024)).inputs.x.buffer).not.toBe(small.inputs.x);
    // Six given back, four kept: the fifth read after them gets a new buffer.
    const six = await Promise.all(Array.from({ length: 6 }, () => read(1 << 16)));
    const given = new Set(six.map((r) => r.inputs.x.buffer));
    for (const r of six) regions.recycle(r);
    const next = await Promise.all(Array.from({ length: 5 }, () => read(1 << 16)));
    expect(next.filter((r) => given.has(r.inputs.x.buffer))).toHaveLength(4);
    regions.close();
  });

  test("a region unregistered or shut down under a request keeps its descriptor until the request lets go", async () => {
    const regions = createRegions({ allowed: true });
    const key = object('late', Buffer.alloc(16));
    regions.register('r', key, 0, 16);
    const held = await regions.stage({ inputs: {}, shmOutputs: [{ name: 'y', index: 0, region: 'r', offset: 0, byteSize: 16 }] }, createBudget(1 << 20), { bytes: 0 });
    regions.close();
    expect(regions.count).toBe(0);
    expect(openDescriptors()).toBe(1);
    // The request still writes through it, then lets go.
    await regions.deliver({ shmOutputs: [{ name: 'y', index: 0, region: 'r', offset: 0, byteSize: 16 }] }, held, [{ data: Float32Array.of(1, 2, 3, 4) }]);
    regions.letGo(held);
    expect(openDescriptors()).toBe(0);
    const written = fs.readFileSync(`/dev/shm${key}`);
    expect([0, 1, 2, 3].map((i) => written.readFloatLE(4 * i))).toEqual([1, 2, 3, 4]);
  });
});
