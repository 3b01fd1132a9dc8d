'use strict';

// Who may do what: model control (load and unload off unless the server allows them) and
// Triton's restricted API categories, each answered by a header, over REST and gRPC.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { writeModel, listenInProcess } = require('../serve/setup');
const { field, request } = require('../serve/wire');

const tensor = (name, data, shape = [data.length]) => ({ name, datatype: 'FP32', shape, data });
const addBody = (a, b) => JSON.stringify({ inputs: [tensor('a', a), tensor('b', b)] });

let repo;
beforeAll(() => {
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-control-'));
  writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
  writeModel(repo, 'big', { 1: 'add-1m' }, { instances: 1 });
});
afterAll(() => fs.rmSync(repo, { recursive: true, force: true }));

describe('model control', () => {
  test('by default (none) load and unload are a 403 naming the flag, and nothing is unloaded', async () => {
    const server = await listenInProcess([repo]);
    for (const action of ['load', 'unload']) {
      const r = await request(`${server.url}/v2/repository/models/add/${action}`, { body: '' });
      expect(r.status).toBe(403);
      expect(r.json.error).toBe('loading and unloading models is off: the server runs with model control "none" (start it with --model-control explicit to allow it)');
    }
    expect((await request(`${server.url}/v2/health/ready`, { method: 'GET' })).status).toBe(200);
    // The index stays readable.
    expect((await request(`${server.url}/v2/repository/index`, { body: '{}' })).json.map((m) => m.name)).toEqual(['add', 'big']);
    await server.stop();
  });

  test('with explicit control, an unloaded model makes the server not ready until it is loaded again', async () => {
    const server = await listenInProcess([repo, '--model-control', 'explicit']);
    expect((await request(`${server.url}/v2/repository/models/add/unload`, { body: '' })).status).toBe(200);
    const ready = await request(`${server.url}/v2/health/ready`, { method: 'GET' });
    expect(ready.status).toBe(503);
    expect(ready.json.error).toBe('not every model is loaded: "add" is not');
    expect((await request(`${server.url}/v2/repository/models/add/load`, { body: '' })).status).toBe(200);
    expect((await request(`${server.url}/v2/health/ready`, { method: 'GET' })).status).toBe(200);
    await server.stop();
  });

  test('unknown model names are a 404 without the repository being read again', async () => {
    const server = await listenInProcess([repo]);
    writeModel(repo, 'late', { 1: 'add' }, { instances: 1 });
    try {
      const r = await request(`${server.url}/v2/models/late/infer`, { body: addBody([1, 2, 3, 4], [1, 2, 3, 4]) });
      expect(r.status).toBe(404);
      expect(r.json.error).toBe('unknown model "late"');
    } finally {
      fs.rmSync(path.join(repo, 'late'), { recursive: true });
      await server.stop();
    }
  });
});

describe('restricted API categories (Triton\'s --http-restricted-api form)', () => {
  let server;
  let port;
  beforeAll(async () => {
    server = await listenInProcess([repo, '--model-control', 'explicit', '--restricted-api', 'model-repository,metrics:admin-key=s3cret', '--restricted-api', 'inference:x-infer=ok']);
    port = await server.server.listenGrpc(0, '127.0.0.1');
  });
  afterAll(() => server.stop());

  test.each([
    ['POST', '/v2/repository/index', 'model-repository', 'admin-key', 's3cret'],
    ['POST', '/v2/repository/models/add/load', 'model-repository', 'admin-key', 's3cret'],
    ['GET', '/metrics', 'metrics', 'admin-key', 's3cret'],
    ['POST', '/v2/models/add/infer', 'inference', 'x-infer', 'ok'],
  ])('%s %s: 403 without the header or with a wrong value, answered with it', async (method, route, category, header, value) => {
    const body = method === 'POST' ? (route.endsWith('infer') ? addBody([1, 2, 3, 4], [1, 1, 1, 1]) : '{}') : undefined;
    const message = `this API (${category}) is restricted: send the header ${header} with the value the server was given`;
    for (const headers of [{}, { [header]: `${value}x` }, { [header]: value.slice(1) }, { 'other-key': value }]) {
      const r = await request(`${server.url}${route}`, { method, headers, body });
      expect([r.status, r.json.error]).toEqual([403, message]);
    }
    const ok = await request(`${server.url}${route}`, { method, headers: { [header.toUpperCase()]: value }, body });
    expect(ok.status).toBe(200);
  });

  test('categories left open stay open: health, metadata, model config', async () => {
    for (const route of ['/v2/health/ready', '/v2', '/v2/models/add', '/v2/models/add/ready', '/v2/models/add/config']) {
      expect((await request(`${server.url}${route}`, { method: 'GET' })).status).toBe(200);
    }
  });

  test('gRPC: PERMISSION_DENIED without the metadata, answered with it', async () => {
    const Client = grpc.makeGenericClientConstructor({
      ModelInfer: { path: '/inference.GRPCInferenceService/ModelInfer', requestStream: false, responseStream: false, requestSerialize: (b) => b, responseDeserialize: (b) => b },
      ServerLive: { path: '/inference.GRPCInferenceService/ServerLive', requestStream: false, responseStream: false, requestSerialize: (b) => b, responseDeserialize: (b) => b },
    });
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const f32 = (a) => Buffer.from(Float32Array.from(a).buffer);
    const field = (n, bytes) => Buffer.concat([Buffer.from([n * 8 + 2, bytes.length]), bytes]);
    const input = (name) => Buffer.concat([field(1, Buffer.from(name)), field(2, Buffer.from('FP32')), Buffer.from([0x1a, 0x01, 0x04])]);
    const req = Buffer.concat([field(1, Buffer.from('add')), field(5, input('a')), field(5, input('b')), field(7, f32([1, 2, 3, 4])), field(7, f32([1, 1, 1, 1]))]);
    const call = (metadata) => new Promise((resolve) => client.ModelInfer(req, metadata, (err, res) => resolve(err ? { code: err.code, details: err.details } : { ok: res })));
    const meta = (k, v) => {
      const m = new grpc.Metadata();
      if (k) m.set(k, v);
      return m;
    };
    expect(await call(meta())).toEqual({ code: grpc.status.PERMISSION_DENIED, details: 'this API (inference) is restricted: send the header x-infer with the value the server was given' });
    expect((await call(meta('x-infer', 'no'))).code).toBe(grpc.status.PERMISSION_DENIED);
    const ok = await call(meta('x-infer', 'ok'));
    const out = ok.ok.subarray(ok.ok.length - 16);
    expect(Array.from(new Float32Array(out.buffer.slice(out.byteOffset, out.byteOffset + 16)))).toEqual([2, 3, 4, 5]);
    // Health is not restricted here.
    expect(await new Promise((resolve) => client.ServerLive(Buffer.alloc(0), (err) => resolve(err)))).toBeNull();
    client.close();
  });

  test('a rule that is not CATEGORIES:HEADER=VALUE is refused by createServer', () => {
    const { createServer } = require('../../lib/serve');
    expect(() => createServer({ models: [repo], restrictedApi: 'inference' })).toThrow('createServer option restrictedApi must be CATEGORY[,CATEGORY...]:HEADER=VALUE');
  });

  test('each part of a rule is checked, and the message names what is wrong', () => {
    const { parseRestricted } = require('../../lib/serve/restricted');
    const rule = 'CATEGORY[,CATEGORY...]:HEADER=VALUE, categories from health, metadata, inference, model-config, model-repository, metrics, statistics, shared-memory, logging, trace';
    const refused = (r) => {
      try {
        parseRestricted(r, '--restricted-api');
      } catch (err) {
        expect(err).toBeInstanceOf(RangeError);
        return err.message;
      }
      return null;
    };
    // The whole rule must match: nothing before the categories, the value to the end.
    expect(refused(' inference:k=v')).toBe(`--restricted-api must be ${rule}; got " inference:k=v"`);
    expect(refused('Inference:k=v')).toBe(`--restricted-api must be ${rule}; got "Inference:k=v"`);
    expect(refused(42)).toBe(`--restricted-api must be ${rule}; got 42`);
    expect(refused('inference:k=v\nmore')).toBe(`--restricted-api must be ${rule}; got "inference:k=v\\nmore"`);
    // Not a string, even one that would read as a rule.
    expect(refused([['inference:k=v']])).toBe(`--restricted-api must be ${rule}; got ["inference:k=v"]`);
    expect(refused('inference:k y=v')).toBe(`--restricted-api must be ${rule}; got "inference:k y=v"`);
    expect(refused('inference:k@=v')).toBe('--restricted-api: "k@" is not a header name');
    expect(refused('inference,status:k=v')).toBe('--restricted-api: unknown category "status" (categories: health, metadata, inference, model-config, model-repository, metrics, statistics, shared-memory, logging, trace)');
    expect(refused(['inference:a=1', 'metrics,inference:b=2'])).toBe('--restricted-api: category inference is restricted twice');
    // A value runs to the end of the rule, spaces and '=' included; header names are matched lower-case.
    const out = parseRestricted(['inference,metrics:X-Key=a b=c'], '--restricted-api');
    expect([...out.keys()]).toEqual(['inference', 'metrics']);
    expect(out.get('inference')).toEqual({ header: 'x-key', value: Buffer.from('a b=c') });
    expect(parseRestricted(undefined, 'x').size).toBe(0);
  });
});
