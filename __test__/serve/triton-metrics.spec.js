'use strict';

// Triton's metric series (nv_inference_*) beside serve's own: counted from requests made here,
// with Triton's labels (model, version; a failure's reason), and its durations the statistics
// extension's, in microseconds.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { writeModel, listenInProcess } = require('./setup');
const { request } = require('./wire');

let repo;
let server;
beforeAll(async () => {
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-nv-'));
  writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
  writeModel(repo, 'other', { 1: 'add' }, { instances: 1 });
  server = await listenInProcess([repo]);
});
afterAll(async () => {
  await server.stop();
  fs.rmSync(repo, { recursive: true, force: true });
});

/** The value of the series `name` with exactly these labels, from Prometheus text (0 when absent). */
function value(text, name, labels) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(',');
  for (const line of text.split('\n')) {
    const m = /^(\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (m && m[1] === name && m[2].split(',').sort().join(',') === want.split(',').sort().join(',')) return Number(m[3]);
  }
  return 0;
}
const scrape = async () => (await request(`${server.url}/metrics`, { method: 'GET' })).text;
const tensor = (name, data) => ({ name, datatype: 'FP32', shape: [4], data });
const good = JSON.stringify({ inputs: [tensor('a', [1, 2, 3, 4]), tensor('b', [1, 1, 1, 1])] });
const bad = JSON.stringify({ inputs: [tensor('a', [1, 2, 3, 4])] });

test('after 5 infers and 3 refused: success +5, count and executions +5, failure OTHER +3, the rest unmoved', async () => {
  const add = { model: 'add', version: '1' };
  const before = await scrape();
  for (let i = 0; i < 5; i++) expect((await request(`${server.url}/v2/models/add/infer`, { body: good })).status).toBe(200);
  for (let i = 0; i < 3; i++) expect((await request(`${server.url}/v2/models/add/infer`, { body: bad })).status).toBe(400);
  const after = await scrape();
  const delta = (name, labels = add) => value(after, name, labels) - value(before, name, labels);
  expect(delta('nv_inference_request_success')).toBe(5);
  expect(delta('nv_inference_count')).toBe(5);
  expect(delta('nv_inference_exec_count')).toBe(5);
  expect(delta('nv_inference_request_failure', { ...add, reason: 'OTHER' })).toBe(3);
  for (const reason of ['REJECTED', 'CANCELED', 'BACKEND']) expect([reason, delta('nv_inference_request_failure', { ...add, reason })]).toEqual([reason, 0]);
  // Every failure reason is a series from the start, as in Triton.
  expect(after).toMatch(/^nv_inference_request_failure\{model="other",version="1",reason="BACKEND"\} 0$/m);
  expect(delta('nv_inference_request_success', { model: 'other', version: '1' })).toBe(0);
  expect(value(after, 'nv_inference_pending_request_count', add)).toBe(0);
  expect(after).toMatch(/^# TYPE nv_inference_request_duration_us counter$/m);
});

test("durations are the statistics extension's, in whole microseconds", async () => {
  const text = await scrape();
  const stats = (await request(`${server.url}/v2/models/add/versions/1/stats`, { method: 'GET' })).json.model_stats[0].inference_stats;
  const add = { model: 'add', version: '1' };
  const us = (d) => Math.round(d.ns / 1000);
  expect(value(text, 'nv_inference_request_duration_us', add)).toBe(us(stats.success));
  expect(value(text, 'nv_inference_queue_duration_us', add)).toBe(us(stats.queue));
  expect(value(text, 'nv_inference_compute_input_duration_us', add)).toBe(us(stats.compute_input));
  expect(value(text, 'nv_inference_compute_infer_duration_us', add)).toBe(us(stats.compute_infer));
  expect(value(text, 'nv_inference_compute_output_duration_us', add)).toBe(us(stats.compute_output));
  expect(value(text, 'nv_inference_request_duration_us', add)).toBeGreaterThan(0);
});
