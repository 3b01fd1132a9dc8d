'use strict';

// What every platform must do beyond the core's specs (npm run test:platforms runs this on each
// emulated platform, npm test on this one): load this platform's addon, serve an infer over
// REST and over gRPC, run a PTO graph, and run the README's quick start as written.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const grpc = require('@grpc/grpc-js');
const protobuf = require('protobufjs');
const { platformName } = require('../../lib/platform');
const { fixture } = require('../fixtures/manifest');
const { makeRepository, listenInProcess } = require('../serve/setup');

const root = path.join(testDir, '..');
const f = Math.fround;

/**
 * A JSON POST with node:http rather than fetch: Wine 8 fails the TCP keep-alive options that
 * fetch's client sets before connecting ("connect UNKNOWN"); real Windows takes both.
 */
function postJson(url, body) {
  return new Promise((resolve, reject) => {
    const req = require('node:http').request(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, json: () => JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test("the addon loaded is this platform's own", () => {
  const { load } = require('../..');
  const loaded = Object.keys(require.cache).filter((m) => m.endsWith('.node'));
  expect(loaded).toEqual([expect.stringContaining(`zgc-runtime.${platformName()}.node`)]);
  const rt = load(fixture('add'));
  expect(Array.from(rt.run({ a: [1, 2, 3, 4], b: [0.25, 0.25, 0.25, 0.25] })[0].data)).toEqual([1.25, 2.25, 3.25, 4.25]);
  rt.close();
});

// Isolation needs memfd, pidfd and the parent-death signal: Linux's. Elsewhere it is refused
// where it is asked for, naming the platform, and in-process runs are unaffected.
(process.platform === 'linux' ? test.skip : test)("isolate: 'process' is refused at load and at createPool, naming the platform", () => {
  const { load, createPool } = require('../..');
  const refused = (where) => expect.objectContaining({ code: 'ERR_ZGC_INSTANCE_START', message: expect.stringContaining(`${where} option isolate: 'process' runs on Linux only, and this is ${platformName()}`) });
  expect(() => load(fixture('add'), { isolate: 'process' })).toThrow(refused('load()'));
  expect(() => createPool(fixture('add'), { size: 1, isolate: 'process' })).toThrow(refused('createPool()'));
  const rt = load(fixture('add'));
  expect(Array.from(rt.run({ a: [1, 2, 3, 4], b: [1, 1, 1, 1] })[0].data)).toEqual([2, 3, 4, 5]);
  rt.close();
});

describe('serve answers an infer over REST and gRPC', () => {
  let server;
  let grpcPort;
  let repo;
  beforeAll(async () => {
    repo = makeRepository().repo;
    server = await listenInProcess([repo]);
    grpcPort = await server.server.listenGrpc(0, '127.0.0.1');
  }, 120000);
  afterAll(async () => {
    await server.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });

  const a = [1.5, -2, 3.25, 1e-3];
  const b = [0.5, 0.5, -4, 7];
  const sum = a.map((v, k) => f(f(v) + f(b[k])));

  test('REST: POST /v2/models/add/infer', async () => {
    const body = { inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: a }, { name: 'b', datatype: 'FP32', shape: [4], data: b }] };
    const res = await postJson(`${server.url}/v2/models/add/infer`, body);
    expect(res.status).toBe(200);
    const reply = res.json();
    expect(reply.outputs[0]).toMatchObject({ datatype: 'FP32', shape: [4] });
    expect(reply.outputs[0].data.map(f)).toEqual(sum);
  });

  test('gRPC: ModelInfer with raw contents, decoded by protobufjs from the protocol file', async () => {
    const proto = protobuf.loadSync(path.join(root, 'lib', 'serve', 'inference.proto'));
    const Request = proto.lookupType('inference.ModelInferRequest');
    const Response = proto.lookupType('inference.ModelInferResponse');
    const Client = grpc.makeGenericClientConstructor({
      ModelInfer: {
        path: '/inference.GRPCInferenceService/ModelInfer',
        requestStream: false,
        responseStream: false,
        requestSerialize: (m) => Buffer.from(Request.encode(m).finish()),
        responseDeserialize: (b) => Response.decode(b),
      },
    });
    const client = new Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
    const raw = (values) => Buffer.from(Float32Array.from(values).buffer);
    const request = Request.create({
      modelName: 'add',
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [4] },
        { name: 'b', datatype: 'FP32', shape: [4] },
      ],
      rawInputContents: [raw(a), raw(b)],
    });
    const reply = await new Promise((resolve, reject) => client.ModelInfer(request, (err, r) => (err ? reject(err) : resolve(r))));
    client.close();
    expect(reply.outputs[0].datatype).toBe('FP32');
    const bytes = reply.rawOutputContents[0];
    expect(Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)))).toEqual(sum);
  });
});

test('PTO: the host library loads and a graph runs to its validation', async () => {
  const { pto } = require('../..');
  const bytes = (text) => new TextEncoder().encode(text);
  const library = pto.load(fixture('pto-host'));
  await library.setDevice(0);
  for (const [funcId, name] of ['add', 'add_scalar', 'mul'].entries()) await library.registerKernel(funcId, bytes(name));
  const runtime = library.createRuntime();
  await runtime.initialize();
  await runtime.launch({ aicpuThreadNum: 1, blockDim: 1, aicpuBinary: bytes('aicpu'), aicoreBinary: bytes('aicore') });
  await runtime.finalize();
  expect([library.device, runtime.state]).toEqual([0, 'finalized']);
});

test("the README's quick start runs as written and prints what the README shows", () => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'));
  const code = /```js\n([\s\S]*?)```/.exec(section)[1];
  const expected = /```text output\n([\s\S]*?)```/.exec(section)[1];
  // The example artifact: `npm run demo` builds it here, scripts/cross-build.js for another platform.
  if (!fs.existsSync(path.join(root, 'examples', 'build', 'mlp.so'))) require('../../examples/build').buildMlp();
  // Run from the package's folder: `require('zgc-runtime')` is the package itself there.
  const r = spawnSync(process.execPath, ['-e', code], { cwd: root, encoding: 'utf8', timeout: 120000 });
  expect(r.stderr).toBe('');
  expect(r.stdout).toBe(expected);
});
