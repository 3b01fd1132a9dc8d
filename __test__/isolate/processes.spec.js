'use strict';

// isolate: 'process' and its host processes: close() of a runtime or pool ends every process
// it started, whatever state each is in; a parent that dies or a worker that ends takes its
// children with it; and no descriptor of an instance leaks into a process the user spawns.

const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { spawn, spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const { load, createPool } = require('../..');
const { fixture } = require('../helpers');
const { ISO, x, expected, alive, holdFile, clearFaultyEnv } = require('./faulty');

clearFaultyEnv();

describe('close() leaves no host process, however slow its hosts are (issue 46)', () => {
  const { hostChildren } = require('../leftovers');
  const settled = (promise) => {
    const state = { done: false };
    promise.then(() => (state.done = true), () => (state.done = true));
    return state;
  };
  const turn = () => new Promise((r) => setImmediate(r));

  test('a pool of hosts slow to start: close() waits for a held run, after a crash, a hung run killed at its deadline and their restarts; then every process it started is gone', async () => {
    process.env.ZGC_FAULTY_LOAD_MS = '300';
    const hold = holdFile();
    const pool = createPool(fixture('faulty'), { ...ISO, size: 2 });
    const pids = new Set(pool.stats().pids);
    const held = pool.run({ x, mode: 7, id: 0 });
    await expect(pool.run({ x, mode: 1, id: 1 })).rejects.toMatchObject({ code: 'ERR_ZGC_INSTANCE_CRASHED' });
    for (const pid of pool.stats().pids) pids.add(pid);
    await expect(pool.run({ x, mode: 4, id: 2 }, { timeoutMs: 200 })).rejects.toMatchObject({ code: 'ERR_ZGC_TIMEOUT' });
    for (const pid of pool.stats().pids) pids.add(pid);
    expect(pids.size).toBe(4);
    const closed = pool.close();
    const state = settled(closed);
    await turn();
    // The held run is in flight: close() has not resolved, and its host is still there.
    expect(state.done).toBe(false);
    expect(hostChildren()).toHaveLength(2);
    hold.release();
    expect(Array.from((await held)[0].data)).toEqual(expected(x));
    await closed;
    for (const pid of pids) expect(alive(pid)).toBe(false);
    expect(hostChildren()).toEqual([]);
  });

  test('a runtime closed with a run in flight ends its host when that run is over; closed idle, at once', async () => {
    process.env.ZGC_FAULTY_LOAD_MS = '300';
    const hold = holdFile();
    const rt = load(fixture('faulty'), ISO);
    const pid = rt.pid;
    const run = rt.runAsync({ x, mode: 7, id: 0 });
    rt.close();
    await turn();
    expect(alive(pid)).toBe(true);
    hold.release();
    expect(Array.from((await run)[0].data)).toEqual(expected(x));
    await turn();
    expect(alive(pid)).toBe(false);
    const idle = load(fixture('faulty'), ISO);
    const idlePid = idle.pid;
    idle.close();
    expect(alive(idlePid)).toBe(false);
    expect(hostChildren()).toEqual([]);
  });
});

describe('no orphans (issue 26)', () => {
  test('SIGKILL of a Node process that holds an isolated pool leaves no process behind', async () => {
    const script = `
      const { createPool } = require(${JSON.stringify(path.join(testDir, '..'))});
      const pool = createPool(${JSON.stringify(fixture('add'))}, { isolate: 'process', size: 3 });
      console.log(JSON.stringify(pool.stats().pids));
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(String(d))));
    const pids = JSON.parse(line);
    expect(pids).toHaveLength(3);
    pids.forEach((pid) => expect(alive(pid)).toBe(true));
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    const until = Date.now() + 2000;
    while (pids.some(alive) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    pids.forEach((pid) => expect(alive(pid)).toBe(false));
  });

  test('a worker thread runs an isolated runtime; its children end when the worker does', async () => {
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       const { load } = require(${JSON.stringify(path.join(testDir, '..'))});
       const rt = load(${JSON.stringify(fixture('add'))}, { isolate: 'process' });
       setInterval(() => {}, 1000); // alive until terminated
       rt.runAsync({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] }).then((out) => parentPort.postMessage({ pid: rt.pid, data: Array.from(out[0].data) }));`,
      { eval: true },
    );
    const { pid, data } = await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    expect(data).toEqual([2, 3, 4, 5]);
    expect(alive(pid)).toBe(true);
    await worker.terminate();
    const until = Date.now() + 2000;
    while (alive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(alive(pid)).toBe(false);
  });

  test('no descriptor of an instance leaks into a process the user spawns', () => {
    const rt = load(fixture('add'), ISO);
    const mine = fs.readdirSync('/proc/self/fd').map((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '';
      }
    });
    expect(mine.some((t) => t.includes('memfd:zgc-runtime-region'))).toBe(true);
    // Past its stdio (Node's own pipes), the spawned process holds none of ours.
    const r = spawnSync('sh', ['-c', 'for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && readlink "$f"; done; true'], { encoding: 'utf8' });
    const held = r.stdout.split('\n').filter(Boolean);
    expect(held.filter((t) => t.includes('memfd') || (t.startsWith('socket:') && mine.includes(t)))).toEqual([]);
    rt.close();
  });
});
