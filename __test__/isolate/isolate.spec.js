'use strict';

// isolate: 'process': an artifact that crashes, hangs or runs away fails the one run it was
// executing, never the process, and its instance comes back. The faulty fixture fails on
// request (mode: 1 segfault, 2 abort, 3 _exit(3), 4 loop forever, 5 unbounded memory, 6 a
// 200 ms run) and logs every run it executes, so "never twice" is counted, not assumed.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { spawnSync } = require('node:child_process');
const { load, createPool } = require('../..');
const { fixture, rng, randomF32, f16Bits, toPhysical } = require('../helpers');
const { expectDtypes, randomDtypeValues } = require('../dtypes-model');
const { ISO, x, expected, alive, fdCount, tempLog, executions, holdFile, clearFaultyEnv } = require('./faulty');

clearFaultyEnv();

describe('isolate: process gives the same answers as in-process (issue 26)', () => {
  test('every dtype, kind and BOUND layout, against the model and an in-process runtime', () => {
    const iso = load(fixture('dtypes'), ISO);
    const local = load(fixture('dtypes'));
    expect(iso.isolate).toBe('process');
    expect(iso.sources).toEqual(local.sources);
    expect(iso.outputs).toEqual(local.outputs);
    expect(iso.fingerprint).toBe(local.fingerprint);
    const src = (name) => iso.sources.find((s) => s.name === name);
    let state = 0;
    for (let seed = 40; seed < 46; seed++) {
      const v = randomDtypeValues(seed);
      for (const rt of [iso, local]) {
        rt.bind('wt', toPhysical(src('wt'), v.wt, Float32Array));
        rt.bind('wp', toPhysical(src('wp'), v.wp, Float32Array));
        rt.bind('wn', toPhysical(src('wn'), v.wn, Float32Array));
        rt.bind('hb', toPhysical(src('hb'), v.hb.map(f16Bits), Uint16Array));
        rt.set('qb', v.qb);
        rt.set('mb', v.mb);
        rt.set('g', v.g);
      }
      const got = iso.run({ x: v.x, h: v.h, q: v.q, m: v.m });
      const want = expectDtypes(v, state);
      state = want.state;
      got.forEach((o, i) => expect(Array.from(o.data, Number)).toEqual(want.outputs[i]));
      expect(local.run({ x: v.x, h: v.h, q: v.q, m: v.m }).map((o) => Array.from(o.data, Number))).toEqual(want.outputs);
      expect(got[1].data).toBeInstanceOf(Float32Array);
      expect(got[2].data).toBeInstanceOf(Int8Array);
      expect(got[3].data).toBeInstanceOf(Uint8Array);
    }
    iso.close();
    local.close();
  });

  test('runAsync and a pool agree with a synchronous in-process run on random inputs', async () => {
    const iso = load(fixture('add'), ISO);
    const local = load(fixture('add'));
    const pool = createPool(fixture('add'), { ...ISO, size: 2 });
    const next = rng(26);
    const inputs = Array.from({ length: 200 }, () => ({ a: randomF32(next, 4), b: randomF32(next, 4) }));
    const [single, pooled] = await Promise.all([Promise.all(inputs.map((i) => iso.runAsync(i))), Promise.all(inputs.map((i) => pool.run(i)))]);
    inputs.forEach((i, k) => {
      const want = Array.from(local.run(i)[0].data);
      expect(Array.from(single[k][0].data)).toEqual(want);
      expect(Array.from(pooled[k][0].data)).toEqual(want);
    });
    expect(new Set(pool.stats().pids).size).toBe(2);
    await pool.close();
    iso.close();
    local.close();
  });

  test('errors name the source, as in-process, and leave the instance usable', async () => {
    const iso = load(fixture('add'), ISO);
    const local = load(fixture('add'));
    const bad = { a: new Float32Array(3), b: new Float32Array(4) };
    const inProcess = (() => {
      try {
        local.run(bad);
      } catch (err) {
        return err;
      }
    })();
    expect(() => iso.run(bad)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_SIZE', source: 'a', message: inProcess.message }));
    await expect(iso.runAsync({ a: new Int8Array(4), b: x })).rejects.toMatchObject({ code: 'ERR_ZGC_DTYPE', source: 'a' });
    await expect(iso.runAsync({ c: x })).rejects.toMatchObject({ code: 'ERR_ZGC_UNKNOWN_SOURCE' });
    expect(Array.from((await iso.runAsync({ a: x, b: x }))[0].data)).toEqual([2, 4, 6, 8]);
    iso.close();
    local.close();
  });

  test('storage() is a view of the shared region: written in place, read by the child without a copy', async () => {
    const iso = load(fixture('add-bound-1m'), ISO);
    const a = iso.storage('a');
    const b = iso.storage('b');
    expect(a).toBeInstanceOf(Float32Array);
    expect(a.length).toBe(1 << 20);
    for (let i = 0; i < a.length; i += 4099) {
      a[i] = i;
      b[i] = 0.5;
    }
    const out = (await iso.runAsync())[0].data;
    for (let i = 0; i < a.length; i += 4099) expect(out[i]).toBe(i + 0.5);
    b[4099] = 100;
    expect(iso.run()[0].data[4099]).toBe(4199);
    iso.close();
  });

  test('bind() on an isolated runtime copies the array at each run start (there is no shared address)', async () => {
    const iso = load(fixture('add-bound-1m'), ISO);
    const a = new Float32Array(1 << 20).fill(1);
    const b = new Float32Array(1 << 20).fill(2);
    iso.bind('a', a);
    iso.bind('b', b);
    expect((await iso.runAsync())[0].data[7]).toBe(3);
    a[7] = 10;
    expect(iso.run()[0].data[7]).toBe(12);
    expect(() => iso.bind('a', new Float32Array(3))).toThrow(expect.objectContaining({ code: 'ERR_ZGC_SIZE', source: 'a' }));
    iso.close();
  });
});

describe('a fault fails one run, and the instance comes back (issue 26)', () => {
  const faults = [
    { mode: 1, what: 'a segfault', fields: { signal: 'SIGSEGV', exitCode: null } },
    { mode: 2, what: 'abort()', fields: { signal: 'SIGABRT', exitCode: null }, stderr: /faulty: aborting as run 2 asked/ },
    { mode: 3, what: '_exit(3)', fields: { signal: null, exitCode: 3 } },
  ];
  test.each(faults)('$what rejects its run with ERR_ZGC_INSTANCE_CRASHED, and the next run answers', async ({ mode, fields, stderr }) => {
    const rt = load(fixture('faulty'), ISO);
    const before = rt.pid;
    const err = await rt.runAsync({ x, mode, id: mode }).catch((e) => e);
    expect(err).toMatchObject({ name: 'ZgcError', code: 'ERR_ZGC_INSTANCE_CRASHED', ...fields });
    expect(err.message).toContain(`pid ${before}`);
    if (stderr) expect(err.stderr).toMatch(stderr);
    expect(Array.from((await rt.runAsync({ x, mode: 0, id: 0 }))[0].data)).toEqual(expected(x));
    expect(rt.pid).not.toBe(before);
    expect(alive(before)).toBe(false);
    expect(rt.stats()).toMatchObject({ crashes: 1, restarts: 1, completed: 1, failed: 1, alive: 1 });
    rt.close();
  });

  test('a synchronous run that crashes throws, and the instance is back for the next call', () => {
    const rt = load(fixture('faulty'), ISO);
    expect(() => rt.run({ x, mode: 1, id: 1 })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_INSTANCE_CRASHED', signal: 'SIGSEGV' }));
    expect(Array.from(rt.run({ x, mode: 0, id: 2 })[0].data)).toEqual(expected(x));
    rt.close();
  });

  test('values given with set() are given again to the new process; STATE starts afresh', async () => {
    const rt = load(fixture('dtypes'), ISO);
    const v = randomDtypeValues(5);
    for (const name of ['wt', 'wp', 'wn', 'hb', 'qb', 'mb', 'g']) rt.set(name, v[name]);
    const first = await rt.runAsync({ x: v.x, h: v.h, q: v.q, m: v.m });
    const want = expectDtypes(v, 0);
    expect(Array.from(first[4].data)).toEqual(want.outputs[4]);
    process.kill(rt.pid, 'SIGKILL');
    // The death shows at the next run, which is then the one that fails.
    const killed = await rt.runAsync({ x: v.x, h: v.h, q: v.q, m: v.m }).catch((e) => e);
    expect(killed).toMatchObject({ code: 'ERR_ZGC_INSTANCE_CRASHED', signal: 'SIGKILL' });
    expect(killed.message).toContain('its STATE is lost');
    const again = await rt.runAsync({ x: v.x, h: v.h, q: v.q, m: v.m });
    // The parameters came back; the running sum s started again from 0.
    again.slice(0, 4).forEach((o, i) => expect(Array.from(o.data, Number)).toEqual(want.outputs[i]));
    expect(Array.from(again[4].data)).toEqual(want.outputs[4]);
    rt.close();
  });

  test('a hung run with timeoutMs rejects ERR_ZGC_TIMEOUT, its process killed, and the instance serves again', async () => {
    const rt = load(fixture('faulty'), { ...ISO, timeoutMs: 5000 });
    const pid = rt.pid;
    const t0 = performance.now();
    await expect(rt.runAsync({ x, mode: 4, id: 1 }, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'ERR_ZGC_TIMEOUT', timeoutMs: 100 });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(99);
    expect(alive(pid)).toBe(false);
    expect(Array.from((await rt.runAsync({ x, mode: 0, id: 2 }))[0].data)).toEqual(expected(x));
    // The runtime-wide default applies to synchronous runs too.
    const sync = load(fixture('faulty'), { ...ISO, timeoutMs: 80 });
    expect(() => sync.run({ x, mode: 4, id: 3 })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_TIMEOUT' }));
    expect(Array.from(sync.run({ x, mode: 6, id: 4 }, { timeoutMs: 2000 })[0].data)).toEqual(expected(x));
    expect(rt.stats()).toMatchObject({ timeouts: 1, restarts: 1 });
    rt.close();
    sync.close();
  });

  test('an AbortSignal stops a run midway (the child killed) or takes back one not started', async () => {
    const log = tempLog();
    const rt = load(fixture('faulty'), ISO);
    const running = new AbortController();
    const waiting = new AbortController();
    const hung = rt.runAsync({ x, mode: 4, id: 1 }, { signal: running.signal });
    const queued = rt.runAsync({ x, mode: 0, id: 2 }, { signal: waiting.signal });
    const after = rt.runAsync({ x, mode: 0, id: 3 });
    waiting.abort(new Error('not wanted'));
    await expect(queued).rejects.toThrow('not wanted');
    setTimeout(() => running.abort(), 30);
    await expect(hung).rejects.toMatchObject({ name: 'AbortError' });
    expect(Array.from((await after)[0].data)).toEqual(expected(x));
    const ran = executions(log);
    expect([...ran.keys()].sort()).toEqual([1, 3]);
    expect(rt.stats()).toMatchObject({ aborts: 1, restarts: 1 });
    rt.close();
  });

  test('aborting a run the child has finished, before JavaScript has looked, kills nothing: the run behind it is answered', async () => {
    // Runs on the instance's worker, whose answers wait for this thread.
    const rt = load(fixture('faulty'), { ...ISO, offload: 'always' });
    for (let i = 0; i < 5; i++) await rt.runAsync({ x, mode: 0, id: i });
    const first = new AbortController();
    const done = rt.runAsync({ x, mode: 0, id: 10 }, { signal: first.signal });
    const behind = rt.runAsync({ x, mode: 6, id: 11 });
    // The first finishes at once, the second sleeps 200 ms. This thread looks at neither until
    // the abort.
    const until = Date.now() + 50;
    while (Date.now() < until);
    first.abort();
    await expect(done).rejects.toMatchObject({ name: 'AbortError' });
    expect(Array.from((await behind)[0].data)).toEqual(expected(x));
    expect(rt.stats()).toMatchObject({ crashes: 0, restarts: 0 });
    rt.close();
  });

  test('maxMemoryMb: a run that allocates without bound rejects ERR_ZGC_MEMORY_LIMIT', async () => {
    const rt = load(fixture('faulty'), { ...ISO, maxMemoryMb: 128 });
    const err = await rt.runAsync({ x, mode: 5, id: 1 }).catch((e) => e);
    expect(err).toMatchObject({ code: 'ERR_ZGC_MEMORY_LIMIT', maxMemoryMb: 128 });
    expect(err.residentBytes).toBeGreaterThan(128 * 2 ** 20);
    expect(Array.from((await rt.runAsync({ x, mode: 0, id: 2 }))[0].data)).toEqual(expected(x));
    expect(rt.stats().memoryKills).toBe(1);
    rt.close();
  });

  test('an instance that cannot start again fails its runs with ERR_ZGC_INSTANCE_FAILED after its attempts', async () => {
    // Its file gone after the load: every new process fails to load it.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-gone-'));
    const copy = path.join(dir, 'faulty.so');
    fs.copyFileSync(fixture('faulty'), copy);
    const rt = load(copy, ISO);
    fs.rmSync(dir, { recursive: true });
    await expect(rt.runAsync({ x, mode: 1, id: 1 })).rejects.toMatchObject({ code: 'ERR_ZGC_INSTANCE_CRASHED' });
    const err = await new Promise((resolve) => {
      const poll = () => rt.runAsync({ x, mode: 0, id: 2 }).then(() => setTimeout(poll, 20), resolve);
      setTimeout(poll, 20);
    }).catch((e) => e);
    // Tried again 10, 50, 250 and 1000 ms apart, then failed for good.
    expect(err.code).toBe('ERR_ZGC_INSTANCE_FAILED');
    expect(err.message).toMatch(/could not be restarted after 5 attempts; the last said: .*faulty\.so/);
    expect(rt.stats()).toMatchObject({ alive: 0, startFailures: 5, pids: [null] });
    await expect(rt.runAsync({ x, mode: 0, id: 3 })).rejects.toMatchObject({ code: 'ERR_ZGC_INSTANCE_FAILED' });
    expect(() => rt.run({ x, mode: 0, id: 4 })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_INSTANCE_FAILED' }));
    rt.close();
  }, 15000);

  test('load() reports what the host process said when the artifact cannot load there', () => {
    expect(() => load(fixture('malformed-dtype'), ISO)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_INVALID_ARTIFACT', message: expect.stringMatching(/unknown dtype 9/) }));
    process.env.ZGC_FAULTY_ABORT_AT_LOAD = '1';
    expect(() => load(fixture('faulty'), ISO)).toThrow(expect.objectContaining({ code: 'ERR_ZGC_INSTANCE_START', message: expect.stringMatching(/SIGABRT.*before it had loaded/) }));
  });

  test('options: isolation-only options are refused in-process, bytes are refused isolated', () => {
    expect(() => load(fixture('add'), { timeoutMs: 10 })).toThrow(/timeoutMs needs isolate: 'process'/);
    expect(() => load(fixture('add'), { isolate: 'thread' })).toThrow(/must be 'none' or 'process'/);
    expect(() => load(fs.readFileSync(fixture('add')), ISO)).toThrow(/takes a path/);
    expect(() => load(fixture('add'), { ...ISO, timeoutMs: -1 })).toThrow(RangeError);
    const rt = load(fixture('add'));
    return expect(rt.runAsync({}, { timeoutMs: 5 })).rejects.toThrow("runAsync() option timeoutMs needs isolate: 'process'");
  });
});

describe('a pool under faults (issue 26)', () => {
  test('10,000 runs, one in 50 crashing: every other answer right, each crash its own run, none executed twice, nothing left after close', async () => {
    const log = tempLog();
    const fds = fdCount();
    const pool = createPool(fixture('faulty'), { ...ISO, size: 2, maxQueue: Infinity });
    const pids = new Set(pool.stats().pids);
    const next = rng(50);
    const runs = Array.from({ length: 10000 }, (_, id) => {
      const mode = id % 50 === 17 ? 1 + (id % 3) : 0;
      const xs = randomF32(next, 4);
      return { id, mode, xs, done: pool.run({ x: xs, mode, id }) };
    });
    const settled = await Promise.allSettled(runs.map((r) => r.done));
    let crashed = 0;
    runs.forEach((r, i) => {
      const s = settled[i];
      if (r.mode === 0) {
        expect(s.status).toBe('fulfilled');
        expect(Array.from(s.value[0].data)).toEqual(expected(r.xs));
      } else {
        crashed++;
        expect(s.status).toBe('rejected');
        expect(s.reason.code).toBe('ERR_ZGC_INSTANCE_CRASHED');
        expect(s.reason.signal).toBe({ 1: 'SIGSEGV', 2: 'SIGABRT', 3: null }[r.mode]);
      }
    });
    expect(crashed).toBe(200);
    const ran = executions(log);
    expect(ran.size).toBe(10000);
    expect([...ran.values()].every((n) => n === 1)).toBe(true);
    const stats = pool.stats();
    expect(stats).toMatchObject({ completed: 9800, failed: 200, crashes: 200, restarts: 200 });
    for (const pid of stats.pids) pids.add(pid);
    await pool.close();
    for (const pid of pids) expect(alive(pid)).toBe(false);
    // Descriptors at once; the mappings when their views are collected (the --expose-gc test below).
    expect(fdCount()).toBe(fds);
  }, 60000);

  test('close() then GC leaves no mapping: the region lives exactly as long as a view of it', () => {
    const script = `
      const fs = require('node:fs');
      const { createPool } = require(${JSON.stringify(path.join(testDir, '..'))});
      const maps = () => fs.readFileSync('/proc/self/maps', 'utf8').split('\\n').filter((l) => l.includes('zgc-runtime-region')).length;
      const settle = () => new Promise((r) => setImmediate(r));
      (async () => {
        const pool = createPool(${JSON.stringify(fixture('add-bound-1m'))}, { isolate: 'process', size: 2, setup: (rt) => { rt.storage('a').fill(1); rt.storage('b'); } });
        let view = pool.runtimes[0].storage('b');
        view[0] = 2;
        const out = await pool.run();
        const during = maps();
        await pool.close();
        for (let i = 0; i < 3; i++) { gc(); await settle(); }
        const held = maps();
        view = null;
        for (let i = 0; i < 3; i++) { gc(); await settle(); }
        console.log(JSON.stringify({ during, held, after: maps(), first: out[0].data[0] }));
      })();`;
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    const got = JSON.parse(r.stdout);
    // Both instances' regions while open; one kept by the storage() view after close; none after.
    expect(got).toEqual({ during: 2, held: 1, after: 0, first: expect.any(Number) });
    expect([1, 3]).toContain(got.first);
  });

  test('a restarted instance gets what setup gave the old one, without setup running again', async () => {
    const seen = [];
    const b = new Float32Array([10, 20, 30, 40]);
    const pool = createPool(fixture('add'), {
      ...ISO,
      size: 1,
      setup: (rt, i) => {
        seen.push(i);
        rt.set('b', b);
      },
    });
    const a = new Float32Array([1, 2, 3, 4]);
    expect(Array.from((await pool.run({ a }))[0].data)).toEqual([11, 22, 33, 44]);
    process.kill(pool.stats().pids[0], 'SIGKILL');
    await expect(pool.run({ a })).rejects.toMatchObject({ code: 'ERR_ZGC_INSTANCE_CRASHED' });
    // b given again to the new process (a new one starts with zeros: the answer would be a).
    expect(Array.from((await pool.run({ a }))[0].data)).toEqual([11, 22, 33, 44]);
    expect(seen).toEqual([0]);
    expect(pool.stats()).toMatchObject({ crashes: 1, restarts: 1, alive: 1 });
    await pool.close();
  });


});

describe('serve: an isolated model next to a healthy one (issue 26)', () => {
  const http = require('node:http');
  const { writeModel, listenInProcess } = require('../serve/setup');

  function post(agent, url, body) {
    return new Promise((resolve, reject) => {
      const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text || 'null'), reused: req.reusedSocket }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  }
  const tensor = (name, shape, data) => ({ name, shape, datatype: 'FP32', data });

  test('crashes and hangs answer error statuses with the code; every healthy answer is right; the connection stays usable', async () => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-iso-serve-'));
    // The hung runs (mode 4) are killed at timeoutMs; a healthy run must never come near it,
    // even under emulation on a loaded machine (300 ms did, in a CI run under qemu).
    writeModel(repo, 'faulty', { 1: 'faulty' }, { instances: 2, isolate: 'process', timeoutMs: 1500 });
    writeModel(repo, 'add', { 1: 'add' }, { instances: 2 });
    const server = await listenInProcess([repo, '--poll-ms', '0']);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    try {
      const next = rng(2626);
      const jobs = [];
      for (let i = 0; i < 300; i++) {
        const a = randomF32(next, 4);
        const b = randomF32(next, 4);
        jobs.push(
          post(agent, `${server.url}/v2/models/add/infer`, { inputs: [tensor('a', [4], Array.from(a)), tensor('b', [4], Array.from(b))] }).then((r) => ({
            kind: 'add',
            r,
            want: Array.from(a, (v, k) => Math.fround(v + b[k])),
          })),
        );
        const mode = i % 10 === 3 ? 1 : i % 10 === 6 ? 2 : i % 50 === 9 ? 4 : 0;
        const xs = randomF32(next, 4);
        jobs.push(
          post(agent, `${server.url}/v2/models/faulty/infer`, { inputs: [tensor('x', [4], Array.from(xs)), tensor('mode', [], [mode]), tensor('id', [], [i])] }).then((r) => ({
            kind: 'faulty',
            mode,
            r,
            want: expected(xs),
          })),
        );
      }
      const results = await Promise.all(jobs);
      const wrong = [];
      for (const { kind, mode, r, want } of results) {
        if (kind === 'add' || mode === 0) {
          // Floats come as the shortest text that reads back to the same f32.
          if (r.status !== 200 || JSON.stringify(r.body.outputs[0].data.map(Math.fround)) !== JSON.stringify(want)) wrong.push({ kind, status: r.status, body: r.body });
        } else if (mode === 4) {
          expect(r.status).toBe(504);
        } else {
          expect(r).toMatchObject({ status: 500, body: { code: 'ERR_ZGC_INSTANCE_CRASHED' } });
          expect(r.body.error).toMatch(mode === 1 ? /SIGSEGV/ : /SIGABRT/);
        }
      }
      // Each wrong answer whole, so that a failure says what came back.
      expect(wrong).toEqual([]);
      // After a crash, the same connection answers the next request.
      const single = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const crash = await post(single, `${server.url}/v2/models/faulty/infer`, { inputs: [tensor('x', [4], [1, 2, 3, 4]), tensor('mode', [], [1]), tensor('id', [], [1000])] });
      const after = await post(single, `${server.url}/v2/models/faulty/infer`, { inputs: [tensor('x', [4], [1, 2, 3, 4]), tensor('mode', [], [0]), tensor('id', [], [1001])] });
      expect(crash.status).toBe(500);
      expect(after).toMatchObject({ status: 200, reused: true });
      expect(after.body.outputs[0].data).toEqual(expected([1, 2, 3, 4]));
      single.destroy();
      const ready = await new Promise((resolve) => http.get(`${server.url}/v2/models/faulty/ready`, (res) => resolve(res.statusCode)));
      expect(ready).toBe(200);
      const metrics = await new Promise((resolve) => http.get(`${server.url}/metrics`, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve(text));
      }));
      const crashes = Number(/zgc_instance_crashes_total\{model="faulty",version="1"\} (\d+)/.exec(metrics)[1]);
      expect(crashes).toBe(61);
      expect(Number(/zgc_instance_restarts_total\{model="faulty",version="1"\} (\d+)/.exec(metrics)[1])).toBeGreaterThanOrEqual(crashes + 6);
      expect(metrics).toMatch(/zgc_inference_requests_total\{model="faulty",version="1",outcome="instance_crashed",protocol="rest"\} 61/);
      expect(metrics).toMatch(/zgc_instances_alive\{model="add",version="1"\} 2/);
    } finally {
      agent.destroy();
      await server.stop();
    }
  }, 60000);

  test('metrics show a held request in flight, and nothing once it is answered', async () => {
    const hold = holdFile();
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-iso-serve-'));
    writeModel(repo, 'faulty', { 1: 'faulty' }, { instances: 1, isolate: 'process' });
    const server = await listenInProcess([repo, '--poll-ms', '0']);
    const scrape = () => new Promise((resolve) => http.get(`${server.url}/metrics`, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve(text));
    }));
    try {
      // Mode 7: the run waits in the child until the hold file exists.
      const answer = post(false, `${server.url}/v2/models/faulty/infer`, { inputs: [tensor('x', [4], [1, 2, 3, 4]), tensor('mode', [], [7]), tensor('id', [], [1])] });
      let text = await scrape();
      while (!/^zgc_runs_in_flight\{model="faulty",version="1"\} 1$/m.test(text)) text = await scrape();
      expect(text).toMatch(/^zgc_http_requests_in_flight 1$/m);
      hold.release();
      const r = await answer;
      expect([r.status, r.body.outputs[0].data]).toEqual([200, expected([1, 2, 3, 4])]);
      text = await scrape();
      expect(text).toMatch(/^zgc_http_requests_in_flight 0$/m);
      expect(text).toMatch(/^zgc_runs_in_flight\{model="faulty",version="1"\} 0$/m);
    } finally {
      hold.release();
      await server.stop();
    }
  }, 60000);
});

describe('serve: a model reloaded while a run of its old pool is held', () => {
  const { writeModel, listenInProcess } = require('../serve/setup');
  const { request } = require('../serve/wire');

  test("Triton's counters and the statistics never go down while the old pool drains", async () => {
    const hold = holdFile();
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-iso-reload-'));
    writeModel(repo, 'faulty', { 1: 'faulty' }, { instances: 1, isolate: 'process' });
    const server = await listenInProcess([repo, '--poll-ms', '0', '--model-control', 'explicit']);
    const body = (mode, id) => JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }, { name: 'mode', datatype: 'FP32', shape: [], data: [mode] }, { name: 'id', datatype: 'FP32', shape: [], data: [id] }] });
    const infer = (mode, id) => request(`${server.url}/v2/models/faulty/infer`, { body: body(mode, id) });
    const scrape = async () => (await request(`${server.url}/metrics`, { method: 'GET' })).text;
    const count = (text, name) => Number(new RegExp(`^${name}\\{model="faulty",version="1"\\} (\\S+)$`, 'm').exec(text)[1]);
    try {
      for (let i = 0; i < 3; i++) expect((await infer(0, i)).status).toBe(200);
      // Mode 7: held in the child until the hold file exists.
      const held = infer(7, 3);
      let text = await scrape();
      while (count(text, 'zgc_runs_in_flight') !== 1) text = await scrape();
      // The reload answers once the old pool is closed, so it is not awaited yet.
      const reload = request(`${server.url}/v2/repository/models/faulty/load`, { body: '' });
      // Switched: the version served is the new pool, with nothing in flight.
      while (count(text, 'zgc_runs_in_flight') !== 0) text = await scrape();
      expect(count(text, 'nv_inference_exec_count')).toBe(3);
      const stats = (await request(`${server.url}/v2/models/faulty/stats`, { method: 'GET' })).json.model_stats[0];
      expect(stats.execution_count).toBe(3);
      hold.release();
      expect((await held).status).toBe(200);
      expect((await reload).status).toBe(200);
      expect(count(await scrape(), 'nv_inference_exec_count')).toBe(4);
    } finally {
      hold.release();
      await server.stop();
    }
  }, 60000);
});

describe('where the addon has no isolation (Windows, macOS)', () => {
  test('the package still loads, runs in-process and refuses isolate: \'process\' naming the platform', () => {
    jest.isolateModules(() => {
      const real = jest.requireActual('../../lib/native');
      // What lib/native.js returns there: the addon built without isolation.
      jest.doMock('../../lib/native', () => ({ ...real, hasIsolation: () => false }));
      const pkg = require('../..');
      const rt = pkg.load(fixture('add'));
      expect(Array.from(rt.run({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] })[0].data)).toEqual([2, 3, 4, 5]);
      rt.close();
      expect(() => pkg.load(fixture('add'), { isolate: 'process' })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_INSTANCE_START', message: expect.stringMatching(/runs on Linux only/) }));
    });
    jest.dontMock('../../lib/native');
  });
});
