'use strict';

// gRPC's standard health service, asked by grpcio-health-checking's own client
// (health_client.py): Check and Watch for the server and for each model, following a model
// unloaded and loaded again.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn, spawnSync } = require('node:child_process');
const { writeModel, listenInProcess, PYTHON } = require('./setup');
const { request } = require('./wire');

const hasHealthClient = fs.existsSync(PYTHON.grpc) && spawnSync(PYTHON.grpc, ['-c', 'import grpc_health.v1.health_pb2'], { stdio: 'ignore' }).status === 0;

/** The Python client: `send(line)` a command, `next(match)` the first line from now on that matches. */
function healthClient(target) {
  const child = spawn(PYTHON.grpc, [path.join(__dirname, 'health_client.py'), target], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const waiting = [];
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    const doc = JSON.parse(line);
    const at = waiting.findIndex((w) => w.match(doc));
    if (at >= 0) waiting.splice(at, 1)[0].resolve(doc);
    else lines.push(doc);
  });
  return {
    send: (line) => child.stdin.write(`${line}\n`),
    next: (match) => {
      const at = lines.findIndex(match);
      if (at >= 0) return Promise.resolve(lines.splice(at, 1)[0]);
      return new Promise((resolve) => waiting.push({ match, resolve }));
    },
    end: () => {
      child.stdin.end('end\n');
      return new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

(hasHealthClient ? describe : describe.skip)('grpc.health.v1.Health', () => {
  let repo;
  let server;
  let client;
  beforeAll(async () => {
    repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-health-'));
    writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
    writeModel(repo, 'other', { 1: 'add' }, { instances: 1 });
    server = await listenInProcess([repo, '--model-control', 'explicit']);
    const port = await server.server.listenGrpc(0, '127.0.0.1');
    client = healthClient(`127.0.0.1:${port}`);
  });
  afterAll(async () => {
    await client.end();
    await server.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });

  const check = (service) => {
    client.send(`check ${service}`);
    return client.next((d) => d.check === service);
  };

  test('Check: the server ("" or the inference service) and each model SERVING; an unknown service NOT_FOUND', async () => {
    expect(await check('')).toEqual({ check: '', status: 'SERVING' });
    expect(await check('inference.GRPCInferenceService')).toMatchObject({ status: 'SERVING' });
    expect(await check('add')).toMatchObject({ status: 'SERVING' });
    expect(await check('nope')).toEqual({ check: 'nope', code: 'NOT_FOUND', details: 'unknown service "nope": ask "" for the server, or a model\'s name' });
  });

  test('a model unloaded is NOT_SERVING, and so is the server; Watch follows it there and back', async () => {
    client.send('watch add');
    expect(await client.next((d) => d.watch === 'add')).toEqual({ watch: 'add', status: 'SERVING' });
    client.send('watch nope');
    expect(await client.next((d) => d.watch === 'nope')).toEqual({ watch: 'nope', status: 'SERVICE_UNKNOWN' });

    expect((await request(`${server.url}/v2/repository/models/add/unload`, { body: '' })).status).toBe(200);
    expect(await client.next((d) => d.watch === 'add')).toEqual({ watch: 'add', status: 'NOT_SERVING' });
    expect(await check('add')).toMatchObject({ status: 'NOT_SERVING' });
    expect(await check('')).toMatchObject({ status: 'NOT_SERVING' });
    expect(await check('other')).toMatchObject({ status: 'SERVING' });

    expect((await request(`${server.url}/v2/repository/models/add/load`, { body: '' })).status).toBe(200);
    expect(await client.next((d) => d.watch === 'add')).toEqual({ watch: 'add', status: 'SERVING' });
    expect(await check('')).toMatchObject({ status: 'SERVING' });
  });

  test('at shutdown a Watch hears NOT_SERVING and ends, and the server drains', async () => {
    client.send('watch ');
    expect(await client.next((d) => d.watch === '' && d.status !== undefined)).toEqual({ watch: '', status: 'SERVING' });
    const stopped = server.stop();
    expect(await client.next((d) => d.watch === '')).toEqual({ watch: '', status: 'NOT_SERVING' });
    expect(await client.next((d) => d.watch === '')).toEqual({ watch: '', ended: 'OK' });
    expect(await stopped).toEqual({ drained: true, unanswered: 0 });
  });
});

describe('grpc.health.v1 under --restricted-api health', () => {
  const grpc = require('@grpc/grpc-js');
  let repo;
  let server;
  let port;
  beforeAll(async () => {
    repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-health-'));
    writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
    server = await listenInProcess([repo, '--restricted-api', 'health:probe-key=s3cret']);
    port = await server.server.listenGrpc(0, '127.0.0.1');
  });
  afterAll(async () => {
    await server.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });

  /** A call by grpc-js with the request's bytes as protobuf writes them (field 1, the service name). */
  function call(method, service, metadata) {
    const Client = grpc.makeGenericClientConstructor({
      Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false, requestSerialize: (b) => b, responseDeserialize: (b) => b },
      Watch: { path: '/grpc.health.v1.Health/Watch', requestStream: false, responseStream: true, requestSerialize: (b) => b, responseDeserialize: (b) => b },
    });
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const request = Buffer.concat([Buffer.from([0x0a, service.length]), Buffer.from(service)]);
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata)) md.set(k, v);
    return new Promise((resolve) => {
      const done = (r) => {
        client.close();
        resolve(r);
      };
      if (method === 'Check') client.Check(request, md, (err, res) => done(err ? { code: err.code } : { status: res[1] }));
      else {
        const stream = client.Watch(request, md);
        stream.on('data', (res) => {
          stream.cancel();
          done({ status: res[1] });
        });
        stream.on('error', (err) => done({ code: err.code }));
      }
    });
  }

  test('Check and Watch without the metadata are PERMISSION_DENIED, with it answered', async () => {
    expect(await call('Check', 'add', {})).toEqual({ code: grpc.status.PERMISSION_DENIED });
    expect(await call('Watch', 'add', {})).toEqual({ code: grpc.status.PERMISSION_DENIED });
    expect(await call('Check', 'add', { 'probe-key': 's3cret' })).toEqual({ status: 1 });
    expect(await call('Watch', 'add', { 'probe-key': 's3cret' })).toEqual({ status: 1 });
  });
});
