'use strict';

// Client sequences in serve (issue 39): model "acc" (accum.c, a running sum in a BOUND STATE
// source) has config.json "sequenceBatching". The real tritonclient, HTTP and gRPC, runs 50
// interleaved sequences; every answer is compared with the same sequence run alone,
// synchronously, in this process. Then the refusals, idle expiry, and its race with a late
// request.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { load } = require('../..');
const { fixture } = require('../fixtures/manifest');
const { formatNpy } = require('../../lib/npy');
const { rng } = require('../helpers');
const { writeModel, servedRepo, pythonClient, hasClients, loadFailure } = require('../serve/setup');

const STATUS = { http: '400', grpc: 'StatusCode.INVALID_ARGUMENT' };

function makeRepo() {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-sequences-'));
  const zeros = { 'h0.npy': formatNpy('f32', [5], new Float32Array(5)) };
  writeModel(repo, 'acc', { 1: 'accum' }, { instances: 2, sequenceBatching: { idleTimeoutMs: 60000 } });
  // Sequences start from 100 in h[0].
  writeModel(repo, 'acc100', { 1: 'accum' }, { instances: 1, sequenceBatching: { initialState: { h: 'h100.npy' } } }, { 'h100.npy': formatNpy('f32', [5], Float32Array.of(100, 0, 0, 0, 0)) });
  // Idle for 150 ms: ended.
  writeModel(repo, 'brief', { 1: 'accum' }, { instances: 1, sequenceBatching: { idleTimeoutMs: 150, maxSequences: 2 } });
  // Warmed up with a sequence of its own, then forgotten: client sequences start from zeros.
  writeModel(repo, 'warm', { 1: 'accum' }, { instances: 2, sequenceBatching: {}, warmup: [{ name: 'ones', count: 2, inputs: { x: 'random' } }] });
  // OWNED state: a sequence holds the one instance; a second one does not wait for it.
  writeModel(repo, 'owned', { 1: 'accum-owned' }, { instances: 1, sequenceBatching: { waitMs: 0 } });
  // Isolated instances, one per sequence; x[0] = -999 kills one.
  if (process.platform === 'linux') writeModel(repo, 'iso', { 1: 'accum-crashy' }, { instances: 2, isolate: 'process', sequenceBatching: {} });
  // 0.3 s a run on one instance, one run waiting at most: a lent sequence's run can be refused.
  writeModel(repo, 'queued', { 1: 'accum-stall' }, { instances: 1, maxQueue: 1, sequenceBatching: {} });
  // Runs of 0.3 s, idle after 150 ms: a run longer than the idle time.
  writeModel(repo, 'slowbrief', { 1: 'accum-stall' }, { instances: 1, sequenceBatching: { idleTimeoutMs: 150 } });
  // The same graph without sequences: its instances' own state.
  writeModel(repo, 'plain', { 1: 'accum' }, { instances: 1, parameters: { h: 'h0.npy' } }, zeros);
  return repo;
}

/** 50 sequences of 1 to 8 steps of small values, exact in f32. */
function sequences(seed) {
  const random = rng(seed);
  return Array.from({ length: 50 }, () => Array.from({ length: 1 + Math.floor(random() * 8) }, () => Array.from({ length: 4 }, () => Math.round(random() * 32 - 16) / 2)));
}

/** A sequence's steps run alone on a fresh runtime: each step's sum and step count. */
function alone(steps) {
  const rt = load(fixture('accum'));
  try {
    rt.storage('h');
    return steps.map((x) => {
      const [sum, n] = rt.run({ x });
      return { sum: Array.from(sum.data), steps: n.data[0] };
    });
  } finally {
    rt.close();
  }
}

/** POST an infer of x with `parameters` to `model`: { status, body }. */
async function infer(url, model, x, parameters) {
  const r = await fetch(`${url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [4], data: x }], parameters }) });
  const result = { status: r.status, body: await r.json() };
  // Not enumerable: the specs compare { status, body } whole.
  return Object.defineProperty(result, 'headers', { value: r.headers });
}

(hasClients ? describe : describe.skip)('client sequences on STATE sources (issue 39)', () => {
  const live = servedRepo(makeRepo);

  for (const [protocol, seed, firstId] of [['http', 1, 1000], ['grpc', 2, 2000]]) {
    test(`${protocol}: 50 interleaved sequences each see their own state alone, then the refusals`, async () => {
      const sent = sequences(seed);
      const seen = await pythonClient('sequence_client.py', protocol, [protocol, `127.0.0.1:${protocol === 'http' ? live.server.port : live.grpcPort}`, String(firstId)], JSON.stringify(sent));
      seen.answers.forEach((got, i) => expect(got).toEqual(alone(sent[i])));
      const bad = STATUS[protocol];
      expect(seen.refusals).toEqual({
        ended: { error: [bad, `sequence ${firstId} of model "acc" is not active (ended by its last request): its first request sets "sequence_start"`] },
        unknown: { error: [bad, `sequence ${firstId + 100000} of model "acc" is not active: its first request sets "sequence_start"`] },
        noId: { error: [bad, 'model "acc" runs sequences: give "sequence_id" (and "sequence_start" on a sequence\'s first request)'] },
        notSequential: { error: [bad, 'model "plain" keeps no sequences: "sequence_id" needs its config.json "sequenceBatching"'] },
      });
    }, 120000);
  }

  test('initialState: a sequence starts from the .npy the config names; string ids; metrics', async () => {
    const first = await infer(live.server.url, 'acc100', [1, 0, 0, 0], { sequence_id: 'client-a', sequence_start: true });
    expect(first.body.outputs[0].data).toEqual([101, 0, 0, 0]);
    const second = await infer(live.server.url, 'acc100', [1, 0, 0, 0], { sequence_id: 'client-a' });
    expect(second.body.outputs.map((o) => o.data)).toEqual([[102, 0, 0, 0], [2]]);
    const metrics = await (await fetch(`${live.server.url}/metrics`)).text();
    expect(metrics).toMatch(/^zgc_sequences_active\{model="acc100",version="1"\} 1$/m);
    await infer(live.server.url, 'acc100', [0, 0, 0, 0], { sequence_id: 'client-a', sequence_end: true });
    expect(await (await fetch(`${live.server.url}/metrics`)).text()).toMatch(/^zgc_sequences_active\{model="acc100",version="1"\} 0$/m);
  });

  test('a sequence idle for idleTimeoutMs ends; a start with its id begins it again from zero', async () => {
    expect((await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 5, sequence_start: true })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 400));
    const late = await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 5 });
    expect(late).toEqual({ status: 400, body: { error: 'sequence 5 of model "brief" is not active (it expired after 150 ms without a request): its first request sets "sequence_start"' } });
    const again = await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 5, sequence_start: true, sequence_end: true });
    expect(again.body.outputs[1].data).toEqual([1]);
    expect(await (await fetch(`${live.server.url}/metrics`)).text()).toMatch(/^zgc_sequences_expired_total\{model="brief",version="1"\} [1-9]/m);
  });

  test('OWNED state: a sequence holds the instance; with none free, a start is a 503 that says so, and never began', async () => {
    expect((await infer(live.server.url, 'owned', [1, 0, 0, 0], { sequence_id: 1, sequence_start: true })).body.outputs[1].data).toEqual([1]);
    const over = await infer(live.server.url, 'owned', [1, 0, 0, 0], { sequence_id: 2, sequence_start: true });
    expect(over.status).toBe(503);
    expect(over.body.error).toBe('model "owned": every instance is held by a sequence (1), and none was let go within waitMs 0: a sequence over OWNED state, or on isolated instances, holds one from its first run to its close');
    expect((await infer(live.server.url, 'owned', [1, 0, 0, 0], { sequence_id: 2 })).body.error).toMatch(/sequence 2 of model "owned" is not active \(its start found every instance held\)/);
    expect((await infer(live.server.url, 'owned', [1, 0, 0, 0], { sequence_id: 1, sequence_end: true })).body.outputs[1].data).toEqual([2]);
    // Let go: the next sequence gets a new instance, its state from the start.
    await new Promise((r) => setTimeout(r, 50));
    const again = await infer(live.server.url, 'owned', [3, 0, 0, 0], { sequence_id: 2, sequence_start: true, sequence_end: true });
    expect(again.body.outputs.map((o) => o.data)).toEqual([[3, 0, 0, 0], [1]]);
  });

  test("BOUND state: a run refused by the model's full queue is a 503, and its sequence goes on from the state it had", async () => {
    expect((await infer(live.server.url, 'queued', [1, 0, 0, 0], { sequence_id: 1, sequence_start: true })).body.outputs[1].data).toEqual([1]);
    // Two other sequences' starts: one runs, one waits (maxQueue 1).
    const others = [2, 3].map((id) => infer(live.server.url, 'queued', [5, 0, 0, 0], { sequence_id: id, sequence_start: true, sequence_end: true }));
    const depth = async () => Number(/^zgc_queue_depth\{model="queued",version="1"\} (\d+)$/m.exec(await (await fetch(`${live.server.url}/metrics`)).text())[1]);
    while ((await depth()) < 1) await new Promise((r) => setTimeout(r, 10));
    const refused = await infer(live.server.url, 'queued', [100, 0, 0, 0], { sequence_id: 1 });
    expect(refused).toEqual({ status: 503, body: { error: 'model "queued" has 1 requests waiting already: try again shortly' } });
    for (const r of await Promise.all(others)) expect(r.body.outputs[1].data).toEqual([1]);
    // The refused x was never added: the sum and the step count are those of the runs made.
    const next = await infer(live.server.url, 'queued', [2, 0, 0, 0], { sequence_id: 1, sequence_end: true });
    expect(next.body.outputs.map((o) => o.data)).toEqual([[3, 0, 0, 0], [2]]);
  }, 20000);

  (process.platform === 'linux' ? test : test.skip)("isolated: an instance that dies ends its sequence, which later requests are told; the other sequence goes on", async () => {
    for (const id of [1, 2]) expect((await infer(live.server.url, 'iso', [1, 0, 0, 0], { sequence_id: id, sequence_start: true })).status).toBe(200);
    const crash = await infer(live.server.url, 'iso', [-999, 0, 0, 0], { sequence_id: 1 });
    expect(crash.status).toBe(500);
    expect(crash.body.error).toMatch(/ERR_ZGC_INSTANCE_CRASHED/);
    expect((await infer(live.server.url, 'iso', [1, 0, 0, 0], { sequence_id: 1 })).body.error).toBe('sequence 1 of model "iso" is not active (its instance\'s process died): its first request sets "sequence_start"');
    const other = await infer(live.server.url, 'iso', [1, 0, 0, 0], { sequence_id: 2, sequence_end: true });
    expect(other.body.outputs.map((o) => o.data)).toEqual([[2, 0, 0, 0], [2]]);
  }, 30000);

  test('a sequence model warms up in sequences of its own: the first client sequence starts from zeros', async () => {
    const r = await infer(live.server.url, 'warm', [1, 0, 0, 0], { sequence_id: 1, sequence_start: true, sequence_end: true });
    expect(r.body.outputs.map((o) => o.data)).toEqual([[1, 0, 0, 0], [1]]);
  });

  test('a sequence is not idle while its run waits or runs: the idle clock starts when the run is over', async () => {
    // Each run takes 0.3 s, twice the idle time; the second waits behind the first.
    const first = infer(live.server.url, 'slowbrief', [1, 0, 0, 0], { sequence_id: 8, sequence_start: true });
    const active = async () => /^zgc_sequences_active\{model="slowbrief",version="1"\} 1$/m.test(await (await fetch(`${live.server.url}/metrics`)).text());
    while (!(await active())) await new Promise((r) => setTimeout(r, 10));
    const second = infer(live.server.url, 'slowbrief', [1, 0, 0, 0], { sequence_id: 8 });
    expect((await Promise.all([first, second])).map((r) => r.body.outputs[1].data)).toEqual([[1], [2]]);
    expect((await infer(live.server.url, 'slowbrief', [1, 0, 0, 0], { sequence_id: 8 })).body.outputs[1].data).toEqual([3]);
    // A request stops the idle clock: the fourth, right after the third, continues.
    expect((await infer(live.server.url, 'slowbrief', [1, 0, 0, 0], { sequence_id: 8 })).body.outputs[1].data).toEqual([4]);
    // Then idle: ended 150 ms after its last run.
    await new Promise((r) => setTimeout(r, 400));
    expect((await infer(live.server.url, 'slowbrief', [1, 0, 0, 0], { sequence_id: 8 })).body.error).toMatch(/\(it expired after 150 ms without a request\)/);
  }, 20000);

  test('a start with the id of an active sequence begins it again; an ended one never expires later; string ids are quoted', async () => {
    const expired = async () => Number(/^zgc_sequences_expired_total\{model="brief",version="1"\} (\d+)$/m.exec(await (await fetch(`${live.server.url}/metrics`)).text())[1]);
    const before = await expired();
    expect((await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 'again', sequence_start: true })).body.outputs[1].data).toEqual([1]);
    expect((await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 'again', sequence_start: true })).body.outputs[1].data).toEqual([1]);
    expect((await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 'again', sequence_end: true })).body.outputs[1].data).toEqual([2]);
    // Past the idle time: ended sequences (and the one started again) count as no expiry.
    await new Promise((r) => setTimeout(r, 400));
    expect(await expired()).toBe(before);
    expect((await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 'again' })).body.error).toBe('sequence "again" of model "brief" is not active (ended by its last request): its first request sets "sequence_start"');
  });

  test('the 1,024 most recently ended sequences are remembered with why; an older one is only not active', async () => {
    for (let id = 5000; id < 5000 + 1025; id++) await infer(live.server.url, 'acc', [0, 0, 0, 0], { sequence_id: id, sequence_start: true, sequence_end: true });
    expect((await infer(live.server.url, 'acc', [0, 0, 0, 0], { sequence_id: 5000 })).body.error).toBe('sequence 5000 of model "acc" is not active: its first request sets "sequence_start"');
    expect((await infer(live.server.url, 'acc', [0, 0, 0, 0], { sequence_id: 5001 })).body.error).toMatch(/^sequence 5001 of model "acc" is not active \(ended by its last request\)/);
  }, 60000);

  test('the 503s of a sequence model tell clients when to try again', async () => {
    const post = (model, parameters) => fetch(`${live.server.url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [4], data: [0, 0, 0, 0] }], parameters }) });
    for (const id of [81, 82]) expect((await post('brief', { sequence_id: id, sequence_start: true })).status).toBe(200);
    const full = await post('brief', { sequence_id: 83, sequence_start: true });
    expect([full.status, full.headers.get('retry-after')]).toEqual([503, '1']);
    for (const id of [81, 82]) await post('brief', { sequence_id: id, sequence_end: true });
    expect((await post('owned', { sequence_id: 91, sequence_start: true })).status).toBe(200);
    const held = await post('owned', { sequence_id: 92, sequence_start: true });
    expect([held.status, held.headers.get('retry-after')]).toEqual([503, '1']);
    await post('owned', { sequence_id: 91, sequence_end: true });
  });

  test('maxSequences: one more start is a 503 naming it, with retry-after, counted as sequences_full (not as a server shutting down)', async () => {
    const counted = async () => {
      const text = await (await fetch(`${live.server.url}/metrics`)).text();
      const m = /zgc_inference_requests_total\{model="brief",[^}]*outcome="sequences_full"[^}]*\} (\d+)/.exec(text);
      return m ? Number(m[1]) : 0;
    };
    const before = await counted();
    for (const id of [71, 72]) expect((await infer(live.server.url, 'brief', [0, 0, 0, 0], { sequence_id: id, sequence_start: true })).status).toBe(200);
    const over = await infer(live.server.url, 'brief', [0, 0, 0, 0], { sequence_id: 73, sequence_start: true });
    expect(over.status).toBe(503);
    expect(over.headers.get('retry-after')).toBe('1');
    expect(over.body.error).toMatch(/model "brief" has 2 active sequences, its maxSequences/);
    expect(await counted()).toBe(before + 1);
    for (const id of [71, 72]) await infer(live.server.url, 'brief', [0, 0, 0, 0], { sequence_id: id, sequence_end: true });
  });

  test('races between idle expiry and late requests: each answer continues its sequence or says it expired, never a silent restart', async () => {
    // Requests every 100 to 200 ms against a 150 ms idle timeout, from 4 clients at once.
    const random = rng(9);
    const client = async (id) => {
      let steps = 0;
      const outcomes = [];
      for (let k = 0; k < 12; k++) {
        const start = steps === 0;
        const r = await infer(live.server.url, 'brief', [1, 0, 0, 0], { sequence_id: 900 + id, ...(start ? { sequence_start: true } : {}) });
        if (r.status === 200) {
          steps += 1;
          // The state went on from where it was: the step count is this client's own.
          outcomes.push(r.body.outputs[1].data[0] === steps && r.body.outputs[0].data[0] === steps ? 'continued' : `step ${k}: ${JSON.stringify(r.body.outputs)}`);
        } else if (r.status === 400 && /\(it expired after 150 ms without a request\)/.test(r.body.error)) {
          steps = 0;
          outcomes.push('expired');
        } else if (r.status === 503) {
          outcomes.push('full');
        } else {
          outcomes.push(`step ${k}: ${r.status} ${r.body.error}`);
        }
        await new Promise((res) => setTimeout(res, 100 + random() * 100));
      }
      return outcomes;
    };
    const all = (await Promise.all([1, 2, 3, 4].map(client))).flat();
    expect(all.filter((o) => !['continued', 'expired', 'full'].includes(o))).toEqual([]);
    expect(all).toContain('continued');
  }, 60000);
});

describe('config.json "sequenceBatching" is checked when the model loads', () => {
  test.each([
    ['an unknown key', { sequenceBatching: { idle: 5 } }, 'accum', /"sequenceBatching" has an unknown key "idle"/],
    ['an idle timeout of 0', { sequenceBatching: { idleTimeoutMs: 0 } }, 'accum', /"idleTimeoutMs" must be a positive integer, got 0/],
    ['a model with no STATE', { sequenceBatching: {} }, 'add', /has no STATE source: a sequence keeps STATE between its runs/],
    ['with dynamic batching', { sequenceBatching: {}, dynamicBatching: { variants: { 1: 'model.so' } } }, 'accum', /a model takes "dynamicBatching" or "sequenceBatching", not both/],
    ['a negative waitMs', { sequenceBatching: { waitMs: -1 } }, 'accum', /"waitMs" must be a non-negative integer, got -1/],
    ['an initial state of another shape', { sequenceBatching: { initialState: { h: 'h.npy' } } }, 'accum', /initial state "h": .*h\.npy holds f32 of shape \(4\), the source is f32 of shape \(5\)/],
  ])('%s', async (_, config, so, message) => {
    const failure = await loadFailure((repo) => writeModel(repo, 'm', { 1: so }, config, { 'h.npy': formatNpy('f32', [4], new Float32Array(4)) }));
    expect(failure).toMatch(message);
  });
});

describe('checkSequences: config.json "sequenceBatching", checked as given', () => {
  const { checkSequences } = require('../../lib/serve/sequences');
  const rule = '"sequenceBatching" must be { "idleTimeoutMs": ms, "maxSequences": n, "waitMs": ms, "initialState": { "<STATE source>": "file.npy" } }';
  test('defaults, and the smallest values it takes', () => {
    expect(checkSequences(undefined, 'm')).toBe(undefined);
    expect(checkSequences({}, 'm')).toEqual({ idleTimeoutMs: 60000, maxSequences: 1000, waitMs: 1000, initialState: {} });
    expect(checkSequences({ idleTimeoutMs: 1, maxSequences: 1, waitMs: 0, initialState: { h: 'h.npy' } }, 'm')).toEqual({ idleTimeoutMs: 1, maxSequences: 1, waitMs: 0, initialState: { h: 'h.npy' } });
  });
  const state = 'm: "sequenceBatching" "initialState" must be an object of STATE source name -> .npy file';
  test.each([
    [null, `m: ${rule}, got null`],
    [[], `m: ${rule}, got []`],
    [5, `m: ${rule}, got 5`],
    [{ initialState: null }, state],
    [{ initialState: [] }, state],
    [{ initialState: 'h.npy' }, state],
    [{ initialState: { h: '' } }, state],
    [{ initialState: { h: 3 } }, state],
    [{ waitMs: 1.5 }, 'm: "sequenceBatching" "waitMs" must be a non-negative integer, got 1.5'],
    [{ idleTimeoutMs: 2.5 }, 'm: "sequenceBatching" "idleTimeoutMs" must be a positive integer, got 2.5'],
    [{ maxSequences: 0 }, 'm: "sequenceBatching" "maxSequences" must be a positive integer, got 0'],
    [{ maxSequences: 1.5 }, 'm: "sequenceBatching" "maxSequences" must be a positive integer, got 1.5'],
  ])('%j is refused', (value, message) => {
    expect(() => checkSequences(value, 'm')).toThrow(new Error(message));
  });
});
