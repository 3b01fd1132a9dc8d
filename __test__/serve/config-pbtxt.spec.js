'use strict';

// Triton's config.pbtxt: a model directory with one and no config.json is served by its
// settings. The text format parser (lib/serve/pbtxt.js) reads every text as protobuf's own
// parser does (pbtxt_check.py, on tritonclient's model_config_pb2), and refuses what it
// refuses for syntax; what GET .../config answers, written as a config.pbtxt by protobuf,
// loads back to the same config; fields serve cannot honour are refused by name.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { parsePbtxt } = require('../../lib/serve/pbtxt');
const { fixture } = require('../fixtures/manifest');
const { writeModel, listenInProcess, loadFailure, PYTHON } = require('./setup');
const { request } = require('./wire');

const hasProto = fs.existsSync(PYTHON.grpc) && spawnSync(PYTHON.grpc, ['-c', 'import tritonclient.grpc.model_config_pb2'], { stdio: 'ignore' }).status === 0;

function protobuf(mode, list) {
  const r = spawnSync(PYTHON.grpc, [path.join(__dirname, 'pbtxt_check.py'), mode], { input: JSON.stringify(list), encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`pbtxt_check.py ${mode} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/**
 * A parse as fields of lists of leaves, each leaf a string: ours as it is, protobuf's
 * MessageToDict with every field made a list (it gives repeated ones as lists, 64-bit integers
 * as strings, infinities and NaN as words).
 */
function leaves(value) {
  if (Array.isArray(value)) return value.map(leaves);
  if (value !== null && typeof value === 'object') {
    if ('ident' in value) return value.ident;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, Array.isArray(v) ? v.map(leaves) : [leaves(v)]]));
  }
  return String(value);
}

/** protobuf's map fields (ModelConfig's `parameters`) as the list of entries the text holds. */
function entries(value) {
  if (Array.isArray(value)) return value.map(entries);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === 'parameters' && !Array.isArray(v) ? Object.entries(v).map(([key, e]) => ({ key, value: entries(e) })) : entries(v)]));
}

// Texts protobuf takes, in every form its syntax allows.
const TEXTS = [
  'name: "m"\nmax_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 4, -1 ] } ]\n',
  "name: 'a' \"b\" # adjacent strings join\n# a comment line\ninstance_group { count: 2 kind: KIND_CPU }\ninstance_group: [{ count: 1 }, { count: 3 }]",
  'parameters { key: "k" value: { string_value: "\\101\\x42\\n\\t\\"q\\" \\\\ \\u00e9\\U0001F600" } }',
  'name: "é✓😀 ünïcødé"',
  'dynamic_batching { max_queue_delay_microseconds: 0x10 preferred_batch_size: 4 preferred_batch_size: [8, 16] }',
  'version_policy < specific < versions: [1, 2] > >; max_batch_size: 010, backend: "zgc"',
  // (No field set to its default: proto3's canonical text leaves those out.)
  'output { name: "y" dims: 1 dims: 2 dims: -3 label_filename: "l.txt" is_shape_tensor: true }',
  'sequence_batching { direct { minimum_slot_utilization: 0.5 } max_sequence_idle_microseconds: 1000000 }',
  'sequence_batching { direct { minimum_slot_utilization: 1e-2 } }',
  'input: { name: "x" optional: true }',
  'sequence_batching { direct { minimum_slot_utilization: 1.5f } } max_batch_size: -0x10; backend: "z"',
  'sequence_batching { direct { minimum_slot_utilization: -inf } }',
  'sequence_batching { direct { minimum_slot_utilization: nan } }',
  'sequence_batching { direct { minimum_slot_utilization: .25 } } max_batch_size: -5',
  'sequence_batching { oldest { max_candidate_sequences: 3 } max_sequence_idle_microseconds: 18446744073709551615 }',
  'parameters { key: "e" value { string_value: "\\0\\07\\177\\x7\\x7f\\\\" } }',
  'parameters { key: "s" value { string_value: "\\u00e9\\U0001F600 é😀 ✓" } }',
  'instance_group { kind: KIND_CPU count: 1 gpus: [] }\ninstance_group{count:2}',
  'name: "a"\t\r\n\u000b\u000c max_batch_size:\t7 # a comment at the end',
  'parameters { key: "o" value { string_value: "\\1234\\08\\0\\x4g\\101\\x41" } }',
  'parameters { key: "u" value { string_value: "\\u0041\\U0010FFFF\\ud7ff\\ue000" } }',
  'input {}',
  '',
  '   \n# only a comment\n',
];
// Texts protobuf refuses for their syntax alone (every name in them is ModelConfig's), each with
// what ours says. (An unknown escape such as \\q is refused too, as Triton's C++ parser refuses
// it; Python's keeps it.)
const BROKEN = [
  ['name: "unclosed', 'line 1, column 16: a string is not closed'],
  ['input { name: "x" ', 'line 1, column 19: expected "}" to close a message, found the end of the text'],
  ['max_batch_size 8', 'line 1, column 16: expected ":" after field max_batch_size, found "8"'],
  ['input { dims: [1, }', 'line 1, column 19: expected a value, found "}"'],
  ['name: "x\ny"', 'line 1, column 9: a string is not closed before the end of its line'],
  ['input {\n  dims: [1,\n  2 3] }', 'line 3, column 5: expected "]" to close a list, found "3] }"'],
  ['name:', 'line 1, column 6: expected a value, found the end of the text'],
  ['}', 'line 1, column 1: expected a field name, found "}"'],
  ['name: "x" }', 'line 1, column 11: expected a field name, found "}"'],
  ['[ext.field]: 1', 'line 1, column 1: extension and Any fields ([…]) are not taken here'],
  ['input [ name: "x" ]', 'line 1, column 9: expected ":" before a list of scalars, found "name: \\"x\\" ]"'],
  ['input [ { name: "x" ]', 'line 1, column 21: expected a field name, found "]"'],
  ['name: "a" "b', 'line 1, column 13: a string is not closed'],
  ['name: "\\ud800"', 'line 1, column 10: \\ud800 is no Unicode scalar value'],
  ['name: "\\U0000dfff"', 'line 1, column 10: \\U0000dfff is no Unicode scalar value'],
  ['name: "\\U00110000"', 'line 1, column 10: \\U00110000 is no Unicode scalar value'],
  ['name: "\\u12"', 'line 1, column 10: \\u needs 4 hex digits'],
  ['name: "\\u0041\\u00"', 'line 1, column 16: \\u needs 4 hex digits'],
  ['name: "\\x"', 'line 1, column 10: \\x needs a hex digit'],
];

(hasProto ? describe : describe.skip)("Triton's config.pbtxt", () => {
  test("the parser reads each text as protobuf's own does, and refuses what it refuses", () => {
    const seen = protobuf('parse', [...TEXTS, ...BROKEN.map(([text]) => text)]);
    TEXTS.forEach((text, i) => {
      expect([text, seen[i].ok]).toEqual([text, true]);
      // Both read the same values: ours of the text, ours of protobuf's canonical text of it,
      // and protobuf's own (ours differs only in keeping fields set to their defaults, which
      // no text here has).
      expect([text, parsePbtxt(text)]).toEqual([text, parsePbtxt(seen[i].canonical)]);
      expect([text, leaves(parsePbtxt(text))]).toEqual([text, leaves(entries(seen[i].values))]);
    });
    BROKEN.forEach(([text, message], i) => {
      expect([text, seen[TEXTS.length + i].ok]).toEqual([text, false]);
      expect(() => parsePbtxt(text)).toThrow(new Error(message));
    });
    expect(() => parsePbtxt('name: "a\\q"')).toThrow('line 1, column 10: unknown escape \\q');
  });

  test('what GET .../config answers, written as config.pbtxt by protobuf, loads back to the same config', async () => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-pbtxt-'));
    writeModel(repo, 'add', { 1: 'add' }, { instances: 2, maxQueue: 7, timeoutMs: 1500, outputs: ['sum'], labels: {}, versionPolicy: { specific: [1] } });
    const dir = writeModel(repo, 'affine', { 1: 'affine-b1' }, { instances: 1, priorityLevels: 2, defaultPriorityLevel: 1, dynamicBatching: { variants: { 1: 'model.so', 4: 'model_b4.so' }, maxQueueDelayMs: 50, preferredBatchSizes: [4] } });
    fs.copyFileSync(fixture('affine-b4'), path.join(dir, '1', 'model_b4.so'));
    writeModel(repo, 'acc', { 1: 'accum' }, { instances: 2, sequenceBatching: { idleTimeoutMs: 30000, maxSequences: 50, waitMs: 20 } });
    const names = ['add', 'affine', 'acc'];
    const configs = async (root) => {
      const server = await listenInProcess([root]);
      try {
        return await Promise.all(names.map(async (n) => (await request(`${server.url}/v2/models/${n}/config`, { method: 'GET' })).json));
      } finally {
        await server.stop();
      }
    };
    const before = await configs(repo);
    const texts = protobuf('write', before);
    names.forEach((n, i) => {
      fs.rmSync(path.join(repo, n, 'config.json'));
      fs.writeFileSync(path.join(repo, n, 'config.pbtxt'), texts[i]);
    });
    expect(texts[0]).toMatch(/^name: "add"\n/);
    expect(await configs(repo)).toEqual(before);
    fs.rmSync(repo, { recursive: true, force: true });
  }, 60000);

  test('a Triton-style config.pbtxt is served: instances, sequences and output names; an infer answers under them', async () => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-pbtxt-'));
    const dir = writeModel(repo, 'acc', { 1: 'accum' });
    fs.writeFileSync(path.join(dir, 'config.pbtxt'), [
      'name: "acc"',
      'backend: "zgc"',
      'instance_group [ { count: 3, kind: KIND_CPU } ]',
      'sequence_batching { max_sequence_idle_microseconds: 5000000 oldest { max_candidate_sequences: 4 } }',
      'input [ { name: "x", data_type: TYPE_FP32, dims: [ 4 ] } ]',
      'output [ { name: "sum", data_type: TYPE_FP32, dims: [ 4 ] }, { name: "steps", data_type: TYPE_FP32, dims: [ 1 ] } ]',
    ].join('\n'));
    const server = await listenInProcess([repo]);
    try {
      const config = (await request(`${server.url}/v2/models/acc/config`, { method: 'GET' })).json;
      expect(config.instance_group[0].count).toBe(3);
      expect(config.sequence_batching).toMatchObject({ max_sequence_idle_microseconds: 5000000, oldest: { max_candidate_sequences: 4 } });
      const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }], parameters: { sequence_id: 1, sequence_start: true } });
      const r = await request(`${server.url}/v2/models/acc/infer`, { body });
      expect(r.json.outputs.map((o) => [o.name, o.data])).toEqual([['sum', [1, 2, 3, 4]], ['steps', [1]]]);
    } finally {
      await server.stop();
      fs.rmSync(repo, { recursive: true, force: true });
    }
  });

  test('what serve cannot honour is refused by its field, and declarations the artifact contradicts', async () => {
    const failure = (text, so = 'add') => loadFailure((repo) => {
      const dir = writeModel(repo, 'm', { 1: so });
      fs.writeFileSync(path.join(dir, 'config.pbtxt'), text);
    });
    const refusals = [
      ['backend: "python"', 'backend "python" is not served here: serve runs ZGC executables (backend "zgc", platform "zgc_executable")'],
      ['name: "other"', 'name "other" is not the model\'s directory name "m"'],
      ['instance_group { kind: KIND_GPU }', 'instance_group[0].kind: KIND_GPU instances are not served here (serve runs on the CPU: KIND_CPU)'],
      ['model_transaction_policy { decoupled: true }', /config "decoupled": the artifact has no STATE source, so its steps would all answer the same/],
      ['parameters { key: "decoupled.max_steps" value { string_value: "3" } }', 'parameters "decoupled.*" need model_transaction_policy { decoupled: true }'],
      ['optimization { }', 'optimization: serve does not take this field of ModelConfig (docs/serving.md lists those it does)'],
      ['max_batch_size: 8', 'max_batch_size 8: serve batches only with dynamic_batching and its variants (a model\'s batch size is its artifact\'s)'],
      ['dynamic_batching { }', 'dynamic_batching needs the graph compiled in several batch sizes: name them in parameters { key: "dynamic_batching.variants" value: { string_value: "{\\"1\\": \\"model.so\\", \\"8\\": \\"model_b8.so\\"}" } }'],
      ['parameters { key: "colour" value { string_value: "red" } }', /parameters "colour" is not one serve takes \(it takes source_parameters, labels, /],
      ['instance_group { count: 0 }', 'instance_group[0].count must be an integer >= 1, got 0'],
      ['instance_group { count: "2" }', 'instance_group[0].count must be a number, got "2"'],
      ['input { name: "a" data_type: TYPE_FP32 dims: [4] } input { name: "c" data_type: TYPE_FP32 dims: [4] }', 'input "c" is not one of the artifact\'s (a, b)'],
      ['input { name: "a" data_type: TYPE_FP32 dims: [4] }', 'input "b" of the artifact is not declared'],
      ['input [{ name: "a" data_type: TYPE_FP32 dims: [5] }, { name: "b" data_type: TYPE_FP32 dims: [4] }]', 'input "a" is declared with dims [5]; the artifact\'s are [4]'],
      ['output { name: "y" data_type: TYPE_INT8 dims: [4] }', 'output "y" is declared TYPE_INT8; the artifact\'s is TYPE_FP32'],
      ['name: "m" name: "m"', 'name is given 2 times; it takes one value'],
      ['sequence_batching { max_sequence_idle_microseconds: 18446744073709551615 }', 'sequence_batching.max_sequence_idle_microseconds is 18446744073709551615, past what serve takes'],
      ['max_batch_size 8', 'not protobuf text format: line 1, column 16: expected ":" after field max_batch_size, found "8"'],
    ];
    for (const [text, why] of refusals) {
      // The load's message names the model and its file first.
      expect([text, await failure(text)]).toEqual([text, typeof why === 'string' ? expect.stringMatching(new RegExp(`^model "m": .*config\\.pbtxt: ${why.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`)) : expect.stringMatching(why)]);
    }
  }, 60000);
});
