'use strict';

// The schedule policy (issue 38) through the real tritonclient, HTTP and gRPC: a request's
// priority orders a busy model's queue (the run order is read from the fixture's own run
// counter), its timeout takes it off the queue or drops its run's answer (in-process) or kills
// its run (isolated), capped by the model's timeoutMs, and every instance serves on after.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { formatNpy } = require('../../lib/npy');
const { writeModel, servedRepo, pythonClient, hasClients } = require('../serve/setup');

const runnable = process.platform === 'linux' && hasClients;

const client = (protocol, port) => pythonClient('schedule_client.py', protocol, [protocol, `127.0.0.1:${port}`]);

const STATUS = {
  http: { bad: '400', late: '504' },
  grpc: { bad: 'StatusCode.INVALID_ARGUMENT', late: 'StatusCode.DEADLINE_EXCEEDED' },
};

function makeRepo() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-schedule-'));
  const sleep = (ms) => ({ 'sleep.npy': formatNpy('f32', [], Float32Array.of(ms)) });
  const slow = { instances: 1, parameters: { sleep_ms: 'sleep.npy' } };
  writeModel(repo, 'prio', { 1: 'slow' }, { ...slow, priorityLevels: 3, defaultPriorityLevel: 2 }, sleep(150));
  writeModel(repo, 'slow', { 1: 'slow' }, slow, sleep(300));
  writeModel(repo, 'slowtimeout', { 1: 'slow' }, { ...slow, timeoutMs: 100 }, sleep(400));
  if (process.platform === 'linux') writeModel(repo, 'slowiso', { 1: 'slow' }, { ...slow, isolate: 'process' }, sleep(300));
  return repo;
}

(runnable ? describe : describe.skip)('the schedule policy: per-request priority and timeout (issue 38)', () => {
  const live = servedRepo(makeRepo);

  // One after the other: each client's run numbers continue from the last one's.
  let runsBefore = 0;
  for (const protocol of ['http', 'grpc']) {
    test(`${protocol}: priority orders the queue; a timeout ends the wait or the run, never past the model's`, async () => {
      const seen = await client(protocol, protocol === 'http' ? live.server.port : live.grpcPort);
      const { bad, late } = STATUS[protocol];
      const run = (n) => runsBefore + n;
      // Level 1 twice in call order, then the default level 2, then level 3 in call order.
      expect([...seen.priority].sort((a, b) => a.run - b.run)).toEqual([
        { label: 100, run: run(1) },
        { label: 2, run: run(2) },
        { label: 4, run: run(3) },
        { label: 3, run: run(4) },
        { label: 1, run: run(5) },
        { label: 5, run: run(6) },
      ]);
      expect(seen.priority_past_levels).toEqual({ error: [bad, 'parameter "priority" is 4: model "prio" has priority levels 1 to 3 (1 is the highest)'] });
      expect(seen.expired_in_queue).toEqual({ error: [late, 'model "prio" did not answer within the request\'s timeout of 20000 µs'] });
      // The expired request never ran: the next run is the blocker's next.
      expect(seen.after_blocker).toEqual([{ label: 200, run: run(7) }, { label: 202, run: run(8) }]);
      runsBefore += 8;

      expect(seen.timeout_in_run).toEqual({ error: [late, 'model "slow" did not answer within the request\'s timeout of 50000 µs'] });
      // Answered at the deadline, not when the 300 ms run ended.
      expect(seen.timeout_in_run_ms).toBeLessThan(250);
      expect(seen.slow_after).toMatchObject({ label: 8 });
      expect(seen.capped).toEqual({ error: [late, 'model "slowtimeout" did not answer within 100 ms'] });
      if (process.platform === 'linux') {
        expect(seen.isolated_timeout).toEqual({ error: [late, 'model "slowiso" did not answer within the request\'s timeout of 50000 µs'] });
        // Answered by a new process: its run counter starts again.
        expect(seen.isolated_after).toEqual({ label: 11, run: 1 });
      }
    }, 60000);
  }

  test('/metrics counts the timeouts and the isolated instance restarted for each', async () => {
    const text = await (await fetch(`${live.server.url}/metrics`)).text();
    const value = (re) => Number((text.match(re) || [])[1]);
    // Per client: one expired in the queue, one in its run, one at the model's cap, one isolated.
    expect(value(/^zgc_inference_requests_total\{model="prio",version="1",outcome="timeout",protocol="rest"\} (\d+)$/m)).toBe(1);
    expect(value(/^zgc_inference_requests_total\{model="slow",version="1",outcome="timeout",protocol="grpc"\} (\d+)$/m)).toBe(1);
    expect(value(/^zgc_instance_restarts_total\{model="slowiso",version="1"\} (\d+)$/m)).toBe(2);
  });

  test("the kserve SDK's REST and gRPC clients: InferRequest parameters priority and timeout", async () => {
    // The model's instance is free again once the tritonclient runs above have ended.
    const seen = await pythonClient('kserve_schedule.py', 'grpc', [live.server.url, `127.0.0.1:${live.grpcPort}`]);
    const why = 'model "slow" did not answer within the request\'s timeout of 50000 µs';
    expect(seen.grpc_priority).toEqual([6, 6, 6, 6]);
    expect(seen.rest_priority).toEqual([6, 6, 6, 6]);
    expect(seen.grpc_timeout).toEqual(['StatusCode.DEADLINE_EXCEEDED', why]);
    expect(seen.rest_timeout).toContain(why);
    expect(seen.rest_timeout).toContain('504');
  }, 60000);

  test('a model whose default level is past its levels does not load, naming both', async () => {
    const bad = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-schedule-bad-'));
    try {
      writeModel(bad, 'm', { 1: 'add' }, { priorityLevels: 2, defaultPriorityLevel: 3 });
      const { createServer } = require('../../lib/serve');
      expect(() => createServer({ models: bad })).toThrow(/"defaultPriorityLevel" 3 is past "priorityLevels" 2/);
    } finally {
      fs.rmSync(bad, { recursive: true, force: true });
    }
  });
});

describe('a request\'s level and deadline, from its parameters and the model\'s config', () => {
  const { poolPriority, deadline, LOWEST } = require('../../lib/serve/schedule');
  test('level 1 runs first; none or 0 is the model\'s default level, or behind every level without one', () => {
    const open = { priorityLevels: 0, defaultPriorityLevel: 0 };
    expect([poolPriority(open, 1, 'm'), poolPriority(open, 7, 'm'), poolPriority(open, undefined, 'm'), poolPriority(open, 0, 'm')]).toEqual([-1, -7, LOWEST, LOWEST]);
    const levels = { priorityLevels: 3, defaultPriorityLevel: 2 };
    expect([poolPriority(levels, 1, 'm'), poolPriority(levels, 3, 'm'), poolPriority(levels, undefined, 'm'), poolPriority(levels, 0, 'm')]).toEqual([-1, -3, -2, -2]);
    expect(() => poolPriority(levels, 4, 'm')).toThrow('parameter "priority" is 4: model "m" has priority levels 1 to 3 (1 is the highest)');
    // Past 32 bits every level ranks as the lowest level but none.
    expect(poolPriority(open, 2 ** 40, 'm')).toBe(-(2 ** 31 - 1));
    expect(poolPriority(open, 2 ** 40, 'm')).toBeGreaterThan(LOWEST);
  });
  test('the request\'s timeout when shorter than the model\'s, else the model\'s; 0 or none is no timeout of its own', () => {
    const model = (timeoutMs) => ({ timeoutMs });
    expect(deadline(model(100), undefined, 'm')).toEqual({ ms: 100, message: 'model "m" did not answer within 100 ms' });
    expect(deadline(model(100), 0, 'm')).toEqual({ ms: 100, message: 'model "m" did not answer within 100 ms' });
    expect(deadline(model(100), 50000, 'm')).toEqual({ ms: 50, message: 'model "m" did not answer within the request\'s timeout of 50000 µs' });
    expect(deadline(model(100), 200000, 'm')).toEqual({ ms: 100, message: 'model "m" did not answer within 100 ms' });
    // Equal: the model's own limit is what passed.
    expect(deadline(model(100), 100000, 'm')).toEqual({ ms: 100, message: 'model "m" did not answer within 100 ms' });
    expect(deadline(model(0), 5000, 'm')).toEqual({ ms: 5, message: 'model "m" did not answer within the request\'s timeout of 5000 µs' });
    expect(deadline(model(0), undefined, 'm').ms).toBe(0);
  });
});
