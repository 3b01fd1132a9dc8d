'use strict';

// The model configuration extension: GET /v2/models/{m}/config answers Triton's ModelConfig,
// parsed strictly by the generated code tritonclient ships (model_config_check.py), for a plain,
// a batched, a sequence and an isolated model.
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { fixture } = require('../fixtures/manifest');
const { writeModel, servedRepo, pythonClient, PYTHON } = require('./setup');

const hasProto = fs.existsSync(PYTHON.grpc) && spawnSync(PYTHON.grpc, ['-c', 'import tritonclient.grpc.model_config_pb2'], { stdio: 'ignore' }).status === 0;

function makeRepo() {
  const repo = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'zgc-config-'));
  writeModel(repo, 'add', { 1: 'add' }, { instances: 2, maxQueue: 7, timeoutMs: 1500 });
  const dir = writeModel(repo, 'affine', { 1: 'affine-b1' }, { instances: 1, priorityLevels: 2, maxQueue: 1e10, dynamicBatching: { variants: { 1: 'model.so', 4: 'model_b4.so' }, maxQueueDelayMs: 50, preferredBatchSizes: [4] } });
  fs.copyFileSync(fixture('affine-b4'), path.join(dir, '1', 'model_b4.so'));
  writeModel(repo, 'acc', { 1: 'accum' }, { instances: 2, sequenceBatching: { idleTimeoutMs: 30000, maxSequences: 50 } });
  if (process.platform === 'linux') writeModel(repo, 'iso', { 1: 'add' }, { instances: 1, isolate: 'process', versionPolicy: 'all' });
  return repo;
}

(hasProto ? describe : describe.skip)("GET /v2/models/{m}/config: Triton's ModelConfig", () => {
  const live = servedRepo(makeRepo);
  let parsed;
  let overGrpc;
  const names = ['add', 'affine', 'acc', ...(process.platform === 'linux' ? ['iso'] : [])];
  beforeAll(async () => {
    const docs = [];
    for (const name of names) docs.push(await (await fetch(`${live.server.url}/v2/models/${name}/config`)).json());
    // Asynchronously: the server answering it is in this process.
    const seen = await pythonClient('model_config_check.py', 'grpc', [`127.0.0.1:${live.grpcPort}`, ...names], JSON.stringify(docs));
    parsed = Object.fromEntries(seen.rest.map((c, i) => [names[i], c]));
    overGrpc = Object.fromEntries(seen.grpc.map((c, i) => [names[i], c]));
  });

  test('every config parses strictly as a ModelConfig', () => {
    for (const name of names) expect([name, parsed[name].error]).toEqual([name, undefined]);
  });

  test("gRPC's ModelConfig (tritonclient.grpc's get_model_config) is the same message as REST's", () => {
    for (const name of names) expect([name, overGrpc[name]]).toEqual([name, parsed[name]]);
  });

  test('a plain model: its inputs and outputs with Triton datatypes, its instances, and serve-only settings as parameters', () => {
    // int64 fields come back as strings, as protobuf's JSON writes them.
    expect(parsed.add).toMatchObject({
      name: 'add',
      backend: 'zgc',
      version_policy: { latest: { num_versions: 1 } },
      input: [{ name: 'a', data_type: 'TYPE_FP32', dims: ['4'] }, { name: 'b', data_type: 'TYPE_FP32', dims: ['4'] }],
      output: [{ name: 'output_0', data_type: 'TYPE_FP32', dims: ['4'] }],
      instance_group: [{ kind: 'KIND_CPU', count: 2 }],
      parameters: { max_queue: { string_value: '7' }, timeout_ms: { string_value: '1500' } },
    });
    expect(parsed.add.max_batch_size).toBeUndefined(); // 0, the default
  });

  test('a batched model: max_batch_size, dims without the batch dimension, dynamic_batching with its queue policy', () => {
    expect(parsed.affine).toMatchObject({
      max_batch_size: 4,
      input: [{ name: 'x', dims: ['4'] }, { name: 's' }],
      dynamic_batching: { preferred_batch_size: [4], max_queue_delay_microseconds: '50000', priority_levels: '2', default_queue_policy: { allow_timeout_override: true, max_queue_size: 4294967295 } },
    });
    expect(JSON.parse(parsed.affine.parameters['dynamic_batching.variants'].string_value)).toEqual({ 1: 'model.so', 4: 'model_b4.so' });
  });

  test('a sequence model: sequence_batching with its idle time and strategy (BOUND state shared: oldest)', () => {
    expect(parsed.acc.sequence_batching).toMatchObject({ max_sequence_idle_microseconds: '30000000', oldest: { max_candidate_sequences: 50 } });
  });

  (process.platform === 'linux' ? test : test.skip)('an isolated model: its version policy, and isolate in parameters', () => {
    expect(parsed.iso).toMatchObject({ version_policy: { all: {} }, parameters: { isolate: { string_value: 'process' } } });
  });
});
