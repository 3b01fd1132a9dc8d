'use strict';

// serve's limits, each checked at its edge: bodies on every route (oversized, truncated,
// malformed, of the wrong type), the in-flight budget, strict framing, nesting, the parse
// timeout, connection and header-time limits, bounded messages, and gRPC's
// decoding of hostile bytes. Clients are raw sockets, node:http and @grpc/grpc-js.

const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const grpc = require('@grpc/grpc-js');
const { fixture } = require('../fixtures/manifest');
const { writeModel, listenInProcess } = require('../serve/setup');
const { field, streamBody, request } = require('../serve/wire');
const { parseInfer } = require('../../lib/serve/infer-request');
const { signatureOf } = require('../../lib/serve/signature');
const { load } = require('../..');
const { formatNpy } = require('../../lib/npy');
const { LIMITS } = require('../../lib/serve/limits');

/** Bytes written to a fresh connection; resolves what came back when the server closed it (or after `waitMs`). */
function raw(port, bytes, { waitMs = 5000, keepOpen = false } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const started = Date.now();
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: got, ms: Date.now() - started });
    };
    const timer = setTimeout(done, waitMs);
    socket.on('data', (d) => (got += d));
    socket.on('close', done);
    socket.on('error', () => {});
    socket.write(bytes);
    if (!keepOpen) socket.end();
  });
}

const tensor = (name, data, shape = [data.length]) => ({ name, datatype: 'FP32', shape, data });
const addBody = (a, b) => JSON.stringify({ inputs: [tensor('a', a), tensor('b', b)] });
const probe = async (url) => {
  const r = await request(`${url}/v2/models/add/infer`, { body: addBody([1, 2, 3, 4], [0.5, 0.5, 0.5, 0.5]) });
  return r.status === 200 ? r.json.outputs[0].data : r;
};

let repo;
beforeAll(() => {
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-limits-'));
  writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
  writeModel(repo, 'big', { 1: 'add-1m' }, { instances: 1 });
  writeModel(repo, 'slow', { 1: 'slow' }, { instances: 3, parameters: { sleep_ms: 'sleep.npy' } }, { 'sleep.npy': formatNpy('f32', [], Float32Array.of(1000)) });
});
afterAll(() => fs.rmSync(repo, { recursive: true, force: true }));

describe('bodies on every route: oversized, truncated, malformed and mistyped bodies get clear answers, and the server goes on', () => {
  let server;
  beforeAll(async () => {
    server = await listenInProcess([repo, '--max-body', '64k', '--model-control', 'explicit']);
  });
  afterAll(() => server.stop());

  const routes = ['/v2/models/add/infer', '/v2/repository/index', '/v2/repository/models/add/load', '/v2/repository/models/add/unload'];

  test.each(routes)('%s: a declared body over its limit is a 413 before it is read', async (route) => {
    // Repository routes take 64 KB whatever --max-body is; infer takes --max-body (64k here).
    const r = await request(`${server.url}${route}`, { headers: { 'content-length': String(70 * 1024) }, body: undefined }).catch((e) => e);
    expect(r.status).toBe(413);
    expect(r.json.error).toMatch(/the request body of 71680 bytes is over the server's limit of 65536 bytes/);
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
  });

  test('the repository index under a chunked body past 64 KB is a 413, and a 540 MB one never reaches memory', async () => {
    const big = await streamBody(`${server.url}/v2/repository/index`, 540 * 1024 * 1024, { chunk: 16 * 1024 });
    expect(big.status).toBe(413);
    expect(JSON.parse(big.text).error).toMatch(/over the server's limit of 65536 bytes/);
    expect(server.server.zgc.budget.held).toBe(0);
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
  });

  test.each([
    ['malformed JSON', '{"ready": tru', 400, /the request body is not JSON/],
    ['a JSON array', '[1]', 400, /must be a JSON object/],
    ['deep nesting', '['.repeat(30000) + ']'.repeat(30000), 400, /must be a JSON object/],
  ])('the repository index refuses %s with a 400', async (_, body, status, message) => {
    const r = await request(`${server.url}/v2/repository/index`, { body });
    expect(r.status).toBe(status);
    expect(r.json.error).toMatch(message);
  });

  test.each(routes.slice(1))('%s refuses a Content-Type other than JSON with a 415', async (route) => {
    const r = await request(`${server.url}${route}`, { headers: { 'content-type': 'text/plain' }, body: '{}' });
    expect(r.status).toBe(415);
    expect(r.json.error).toBe('the repository API takes a JSON body (Content-Type: application/json), got Content-Type "text/plain"');
  });

  test.each(['/v2/health/live', '/v2/health/ready', '/v2', '/v2/models/add', '/metrics'])('GET %s with a 10 MB body is answered; the body is not kept', async (route) => {
    const body = Buffer.alloc(10 * 1024 * 1024, 0x7b);
    const r = await raw(server.port, Buffer.concat([Buffer.from(`GET ${route} HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n`), body]), { waitMs: 1000 });
    expect(r.text).toMatch(/^HTTP\/1.1 200 OK/);
    expect(server.server.zgc.budget.held).toBe(0);
  });

  test('a metrics collector that fails is a 500, and the process goes on', async () => {
    const registry = server.server.zgc.metrics.registry;
    const client = require('prom-client');
    const broken = new client.Gauge({ name: 'zgc_test_broken', help: 'throws', registers: [registry], collect() { throw new Error('collector broke'); } });
    const r = await request(`${server.url}/metrics`, { method: 'GET' });
    registry.removeSingleMetric(broken.name);
    expect(r.status).toBe(500);
    expect(r.json.error).toBe('internal error: the metrics could not be collected: collector broke');
    expect((await request(`${server.url}/metrics`, { method: 'GET' })).status).toBe(200);
  });

  test('infer takes its JSON whatever the Content-Type says, as curl -d sends it', async () => {
    const r = await request(`${server.url}/v2/models/add/infer`, { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: addBody([1, 1, 1, 1], [2, 2, 2, 2]) });
    expect(r.json.outputs[0].data).toEqual([3, 3, 3, 3]);
  });

  test.each(routes)('%s: a body cut off by its client leaves nothing held', async (route) => {
    const head = `POST ${route} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"inputs": [`;
    await raw(server.port, head, { waitMs: 300 });
    await new Promise((r) => setTimeout(r, 50));
    expect(server.server.zgc.budget.held).toBe(0);
    expect(server.server.zgc.active).toBe(0);
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
  });

  test.each([
    ['1e2'],
    ['0x10'],
    ['1 2'],
    ['+12'],
    ['-1'],
    ['12.0'],
    ['1234567890123456'],
  ])('Inference-Header-Content-Length %j is refused: decimal digits only (spaces around a value are HTTP\'s, gone before the server sees it)', async (value) => {
    const body = addBody([1, 2, 3, 4], [1, 2, 3, 4]);
    const r = await request(`${server.url}/v2/models/add/infer`, { headers: { 'inference-header-content-length': value }, body });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe(`Inference-Header-Content-Length must be decimal digits (a byte count), got ${JSON.stringify(value)}`);
    // The same length in digits is taken.
    const ok = await request(`${server.url}/v2/models/add/infer`, { headers: { 'inference-header-content-length': String(Buffer.byteLength(body)) }, body });
    expect(ok.status).toBe(200);
  });
});

describe('the in-flight budget', () => {
  let server;
  beforeAll(async () => {
    server = await listenInProcess([repo, '--max-inflight-bytes', '10m', '--max-body', '16m']);
  });
  afterAll(() => server.stop());

  const held = () => server.server.zgc.budget.held;
  const until = async (cond) => {
    const end = Date.now() + 5000;
    while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  };

  test('bytes received count, a declared length is never reserved: idle connections declaring 9 MB each hold nothing', async () => {
    const idle = Array.from({ length: 10 }, () => {
      const s = net.connect(server.port, '127.0.0.1').on('error', () => {});
      s.write(`POST /v2/models/big/infer HTTP/1.1\r\nhost: x\r\ncontent-length: ${9 * 1024 * 1024}\r\n\r\n`);
      return s;
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(held()).toBe(0);
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
    for (const s of idle) s.destroy();
  });

  test('a declared length past what is left is a 503 with Retry-After before a byte is sent; small requests still pass; what was held is given back', async () => {
    // 9 MB received of a 9.5 MB body, the rest never sent.
    const holder = net.connect(server.port, '127.0.0.1');
    holder.on('error', () => {});
    holder.write(`POST /v2/models/big/infer HTTP/1.1\r\nhost: x\r\ncontent-length: ${9.5 * 1024 * 1024}\r\n\r\n`);
    holder.write(Buffer.alloc(9 * 1024 * 1024, 0x20));
    // What is held is the buffer's capacity: doubled past 8 MB, up to the declared 9.5 MB.
    await until(() => held() === 9.5 * 1024 * 1024);
    expect(held()).toBe(9.5 * 1024 * 1024);
    const r = await request(`${server.url}/v2/models/big/infer`, { headers: { 'content-length': String(2 * 1024 * 1024) } });
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(r.json.error).toBe(`the server holds ${9.5 * 1024 * 1024} bytes of requests, near its in-flight limit of ${10 * 1024 * 1024} bytes: try again shortly`);
    // Bodies up to 64 KB are never refused by the budget.
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
    const metrics = (await request(`${server.url}/metrics`, { method: 'GET' })).text;
    expect(metrics).toMatch(/^zgc_inflight_bytes 9961472$/m);
    expect(metrics).toMatch(/^zgc_inflight_limit_bytes 10485760$/m);
    expect(metrics).toMatch(/^zgc_inflight_refusals_total 1$/m);
    expect(metrics).toMatch(/zgc_inference_requests_total\{model="big",version="1",outcome="over_budget",protocol="rest"\} 1/);
    holder.destroy();
    await until(() => held() === 0);
    expect(held()).toBe(0);
  });

  test('a chunked body is counted as it arrives and refused once past the budget', async () => {
    const r = await streamBody(`${server.url}/v2/models/big/infer`, 12 * 1024 * 1024);
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(server.server.zgc.budget.held).toBe(0);
  });

  test('large bodies that fit are answered right, one after another, and hold nothing after', async () => {
    const n = 1 << 20;
    const a = Float32Array.from({ length: n }, (_, i) => i % 97);
    const b = Float32Array.from({ length: n }, (_, i) => -(i % 13));
    const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [n], parameters: { binary_data_size: 4 * n } }, { name: 'b', datatype: 'FP32', shape: [n], parameters: { binary_data_size: 4 * n } }], outputs: [{ name: 'output_0', parameters: { binary_data: true } }] }));
    const body = Buffer.concat([head, Buffer.from(a.buffer), Buffer.from(b.buffer)]);
    for (let k = 0; k < 2; k++) {
      const res = await new Promise((resolve) => {
        const req = http.request(`${server.url}/v2/models/big/infer`, { method: 'POST', agent: false, headers: { 'inference-header-content-length': String(head.length) } }, (r) => {
          const chunks = [];
          r.on('data', (c) => chunks.push(c));
          r.on('end', () => resolve({ status: r.statusCode, body: Buffer.concat(chunks), headers: r.headers }));
        });
        req.end(body);
      });
      expect(res.status).toBe(200);
      const at = Number(res.headers['inference-header-content-length']);
      const out = new Float32Array(res.body.buffer.slice(res.body.byteOffset + at, res.body.byteOffset + at + 4 * n));
      for (let i = 0; i < n; i += 4099) expect(out[i]).toBe((i % 97) - (i % 13));
    }
    expect(server.server.zgc.budget.held).toBe(0);
  });
});

describe('parsing in linear time, nesting refused by name', () => {
  const rt = load(fixture('add'));
  const sig = signatureOf(rt);
  afterAll(() => rt.close());
  const parse = (text) => {
    const body = Buffer.from(text);
    try {
      parseInfer(sig, body, body.length);
      return 'accepted';
    } catch (err) {
      return err.message;
    }
  };
  const MB = 1 << 20;

  test.each([
    ['escaped quotes then NaN', `{"inputs":"${'\\"'.repeat(MB / 2 - 16)} NaN`],
    ['quotes then NaN', `${'"'.repeat(MB - 4)}NaN`],
    ['backslashes then NaN', `{"a":"${'\\\\'.repeat(MB / 2 - 16)}", "b": NaN`],
    ['tokens', `{"inputs":[${'NaN,'.repeat(MB / 4 - 8)}NaN]}`],
    ['open brackets and a NaN', `${'['.repeat(MB - 4)}NaN`],
    ['open brackets', '['.repeat(MB)],
    ['objects', '{"a":'.repeat(MB / 5)],
    ['empty objects in a list', `{"x":[${'{},'.repeat(MB / 3 - 8)}{}]}`],
    ['keys', `{${Array.from({ length: MB / 12 }, (_, i) => `"k${i}":1`).join(',')}}`],
    ['strings as inputs', `{"inputs":[${'"a",'.repeat(MB / 4 - 8)}"a"]}`],
    ['tokens in parameters', `{"parameters":{"x":[${'NaN,'.repeat(MB / 4 - 20)}NaN]}}`],
    ['numbers in data', `{"inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":[${'1,'.repeat(MB / 2 - 40)}1]}]}`],
  ])('1 MB of %s is refused, each part of the text looked at a bounded number of times', (_, text) => {
    const cpu = process.cpuUsage();
    const message = parse(text);
    const { user, system } = process.cpuUsage(cpu);
    expect(message).not.toBe('accepted');
    expect(message).not.toMatch(/call stack/);
    // Quadratic work on 1 MB takes seconds; a linear pass takes a few milliseconds.
    expect((user + system) / 1000).toBeLessThan(500);
  });

  test('nesting deeper than 256 levels is refused by name, with or without NaN', () => {
    const deep = (n, inside) => `{"inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":${'['.repeat(n)}${inside}${']'.repeat(n)}}]}`;
    expect(parse(deep(100000, 'NaN'))).toBe('the request header nests arrays and objects deeper than 256 levels');
    expect(parse(deep(100000, '1'))).toBe('the request header nests arrays and objects deeper than 256 levels');
    // 256 levels in all (3 around the data) pass the scan, and fail for their shape; 257 do not.
    expect(parse(deep(253, 'NaN'))).toMatch(/nested "data" does not match shape/);
    expect(parse(deep(254, 'NaN'))).toBe('the request header nests arrays and objects deeper than 256 levels');
  });

  test('brackets and tokens inside strings are text, not nesting', () => {
    const text = `{"id":"${'['.repeat(5000)} NaN \\" Infinity","inputs":[{"name":"a","datatype":"FP32","shape":[4],"data":[NaN,Infinity,-Infinity,1]},{"name":"b","datatype":"FP32","shape":[4],"data":[1,2,3,4]}]}`;
    const body = Buffer.from(text);
    const r = parseInfer(sig, body, body.length);
    expect(r.id).toBe(`${'['.repeat(5000)} NaN " Infinity`);
    expect(Array.from(r.inputs.a)).toEqual([NaN, Infinity, -Infinity, 1]);
  });
});

describe('the parse timeout', () => {
  let server;
  beforeAll(async () => {
    server = await listenInProcess([repo, '--parse-timeout-ms', '1', '--max-body', '64m']);
  });
  afterAll(() => server.stop());

  test('a large JSON parse past the timeout is a 400, its thread replaced, and the server answers on', async () => {
    const n = 1 << 20;
    const data = `[${Array.from({ length: n }, (_, i) => (i % 7) + 0.25).join(',')}]`;
    const body = `{"inputs":[{"name":"a","datatype":"FP32","shape":[${n}],"data":${data}},{"name":"b","datatype":"FP32","shape":[${n}],"data":${data}}]}`;
    const r = await request(`${server.url}/v2/models/big/infer`, { body });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('the request took over 1 ms to parse and was abandoned (the server\'s parse timeout)');
    expect(server.server.zgc.context.parsers.replaced).toBe(1);
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
  });
});

describe('connections and header time', () => {
  let server;
  beforeAll(async () => {
    server = await listenInProcess([repo, '--max-connections', '3', '--headers-timeout-ms', '300', '--keep-alive-timeout-ms', '30000']);
  });
  afterAll(() => server.stop());

  test('a client sending its headers too slowly gets a 408 within the header timeout and the connection is closed', async () => {
    const r = await raw(server.port, 'POST /v2/models/add/infer HTTP/1.1\r\nhost: x\r\n', { keepOpen: true, waitMs: 5000 });
    expect(r.text).toMatch(/^HTTP\/1.1 408/);
    // Node checks every quarter of the timeout: at most ~1.25 of it, and well under a second here.
    expect(r.ms).toBeLessThan(2000);
  });

  test('when full, a new connection takes the place of an idle keep-alive one, else of the one heard from longest ago still owing bytes; with every one answering a whole request, it gets a 503', async () => {
    await server.stop();
    server = await listenInProcess([repo, '--max-connections', '3', '--keep-alive-timeout-ms', '30000']);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 3 });
    const body = addBody([1, 2, 3, 4], [1, 1, 1, 1]);
    const infer = () =>
      new Promise((resolve) => {
        const req = http.request(`${server.url}/v2/models/add/infer`, { method: 'POST', agent }, (res) => {
          let t = '';
          res.on('data', (d) => (t += d));
          res.on('end', () => resolve(JSON.parse(t)));
        });
        req.end(body);
      });
    // Three keep-alive connections, idle after their requests.
    await Promise.all([infer(), infer(), infer()]);
    expect(server.server.connectionCount()).toBe(3);
    // A fourth client gets in: one idle connection is closed for it.
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
    agent.destroy();
    await new Promise((r) => setTimeout(r, 100));
    // Three connections that have sent nothing: a new client takes the place of the oldest.
    const silent = [];
    for (let i = 0; i < 3; i++) {
      silent.push(net.connect(server.port, '127.0.0.1').on('error', () => {}));
      await new Promise((r) => setTimeout(r, 20));
    }
    const closed = silent.map((s) => new Promise((r) => s.once('close', () => r(true))));
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
    expect(await Promise.race([closed[0], new Promise((r) => setTimeout(() => r(false), 1000))])).toBe(true);
    expect(silent[1].destroyed || silent[2].destroyed).toBe(false);
    for (const s of silent) s.destroy();
    await new Promise((r) => setTimeout(r, 100));
    // Three whose bodies stalled: the one heard from longest ago makes way.
    const stalled = [];
    for (let i = 0; i < 3; i++) {
      const s = net.connect(server.port, '127.0.0.1').on('error', () => {});
      s.write('POST /v2/models/add/infer HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{');
      stalled.push(s);
      await new Promise((r) => setTimeout(r, 20));
    }
    // The first one sends a byte again: the second is now the one heard from longest ago.
    stalled[0].write(' ');
    await new Promise((r) => setTimeout(r, 20));
    const gone = new Promise((r) => stalled[1].once('close', () => r(true)));
    expect(await probe(server.url)).toEqual([1.5, 2.5, 3.5, 4.5]);
    expect(await Promise.race([gone, new Promise((r) => setTimeout(() => r(false), 1000))])).toBe(true);
    for (const s of stalled) s.destroy();
    await new Promise((r) => setTimeout(r, 100));
    // Three whole requests being answered (a model that sleeps 1 s): a fourth is refused.
    const busy = [0, 1, 2].map(() => request(`${server.url}/v2/models/slow/infer`, { body: JSON.stringify({ inputs: [tensor('x', [1, 2, 3, 4])] }) }).catch(() => null));
    await new Promise((r) => setTimeout(r, 200));
    const refused = await raw(server.port, 'GET /v2/health/live HTTP/1.1\r\nhost: x\r\n\r\n', { waitMs: 2000 });
    expect(refused.text).toMatch(/^HTTP\/1.1 503 Service Unavailable/);
    expect(refused.text).toMatch(/too many connections/);
    await Promise.all(busy);
    await new Promise((r) => setTimeout(r, 100));
    const metrics = (await request(`${server.url}/metrics`, { method: 'GET' })).text;
    expect(metrics).toMatch(/^zgc_connection_refusals_total 1$/m);
  });
});

describe('bounded error messages', () => {
  let server;
  beforeAll(async () => {
    server = await listenInProcess([repo]);
  });
  afterAll(() => server.stop());

  test('a shape of 1,000 entries comes back elided; one of 100,000 is more values than any request of the model holds', async () => {
    const shaped = (n) => JSON.stringify({ inputs: [tensor('a', [1, 2, 3, 4], new Array(n).fill(4)), tensor('b', [1, 2, 3, 4])] });
    const r = await request(`${server.url}/v2/models/add/infer`, { body: shaped(1000) });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('input "a": shape [4,4,4,4,4,4,4,4, … 1,000 entries] given, the model takes [4]');
    // 256 values per tensor of the model (2 inputs, 1 output) and 256 more.
    const big = await request(`${server.url}/v2/models/add/infer`, { body: shaped(100000) });
    expect(big.status).toBe(400);
    expect(big.json.error).toBe('the request header holds more than 1024 values outside tensor data, more than any request of this model needs');
  });

  test('a model name of 10,000 characters is cut in the 404', async () => {
    // Under node:http's 16 KB limit on a request head (past it, node:http refuses the request itself).
    const name = 'm'.repeat(10000);
    const r = await request(`${server.url}/v2/models/${name}/infer`, { body: '{}', headers: {} });
    expect(r.status).toBe(404);
    expect(r.text.length).toBeLessThan(1024);
    expect(r.json.error).toBe(`unknown model "${'m'.repeat(100)}…"`);
  });
});

describe('gRPC: hostile bytes get INVALID_ARGUMENT with the reason and where', () => {
  let server;
  let client;
  let port;
  beforeAll(async () => {
    server = await listenInProcess([repo, '--max-body', '512m', '--grpc-handshake-timeout-ms', '300', '--grpc-max-concurrent-streams', '7']);
    port = await server.server.listenGrpc(0, '127.0.0.1');
    // A client that sends bytes as they are: the service's ModelInfer, unencoded.
    const Client = grpc.makeGenericClientConstructor({
      ModelInfer: { path: '/inference.GRPCInferenceService/ModelInfer', requestStream: false, responseStream: false, requestSerialize: (b) => b, responseDeserialize: (b) => b },
    });
    client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': -1, 'grpc.max_receive_message_length': -1 });
  });
  afterAll(async () => {
    client.close();
    await server.stop();
  });
  const call = (bytes) => new Promise((resolve) => client.ModelInfer(bytes, (err, res) => resolve(err ? { code: err.code, details: err.details } : { ok: res })));
  const name = field(1, Buffer.from('add'));

  test('malformed bytes name the reason and the byte offset', async () => {
    expect(await call(Buffer.concat([name, Buffer.from([0x9b, 0x06])]))).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: 'the request is not a valid ModelInferRequest: wire type 3 is not supported at byte 5' });
    expect(await call(Buffer.concat([name, Buffer.from([0x2a, 0x09, 0x0a])]))).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: 'the request is not a valid ModelInferRequest: truncated field at byte 5' });
  });

  test('an empty request is told that model_name is required', async () => {
    expect(await call(Buffer.alloc(0))).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: 'model_name is required: a ModelInferRequest names the model to run' });
  });

  test('a shape of 62,914,560 entries is refused from its length, before one is read, in a short message', async () => {
    const shape = Buffer.alloc(62914560, 4);
    const input = Buffer.concat([field(1, Buffer.from('a')), field(2, Buffer.from('FP32')), field(3, shape)]);
    const r = await call(Buffer.concat([name, field(5, input)]));
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.details).toMatch(/^the request is not a valid ModelInferRequest: field shape has 62,914,560 entries: a tensor has at most 64 dimensions at byte \d+$/);
  });

  test('contents longer than the model\'s largest input are refused before they are read', async () => {
    const floats = Buffer.alloc(4 * 1000);
    const contents = field(6, floats);
    const input = Buffer.concat([field(1, Buffer.from('a')), field(2, Buffer.from('FP32')), Buffer.from([0x18, 0x04]), field(5, contents)]);
    const r = await call(Buffer.concat([name, field(5, input)]));
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.details).toMatch(/field fp32Contents has 1,000 entries: the model's largest input has 4 elements at byte \d+$/);
  });

  test('a connection that sends no HTTP/2 preface is closed at the handshake timeout; the limit on streams is announced', async () => {
    const r = await raw(port, '', { keepOpen: true, waitMs: 5000 });
    expect(r.ms).toBeGreaterThanOrEqual(250);
    expect(r.ms).toBeLessThan(3000);
    const session = require('node:http2').connect(`http://127.0.0.1:${port}`);
    const settings = await new Promise((resolve) => session.once('remoteSettings', resolve));
    expect(settings.maxConcurrentStreams).toBe(7);
    // Past the timeout, a handshaken connection stays open.
    await new Promise((r) => setTimeout(r, 500));
    expect(session.closed || session.destroyed).toBe(false);
    session.close();
  });

  test('with model control none, load and unload are PERMISSION_DENIED', async () => {
    const Repo = grpc.makeGenericClientConstructor({
      RepositoryModelUnload: { path: '/inference.GRPCInferenceService/RepositoryModelUnload', requestStream: false, responseStream: false, requestSerialize: (b) => b, responseDeserialize: (b) => b },
    });
    const repoClient = new Repo(client.getChannel().getTarget().replace(/^dns:/, ''), grpc.credentials.createInsecure());
    const r = await new Promise((resolve) => repoClient.RepositoryModelUnload(field(2, Buffer.from('add')), (err) => resolve(err)));
    repoClient.close();
    expect(r.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(r.details).toMatch(/model control "none"/);
  });
});

describe('a server config file', () => {
  test('--config sets limits and model control; flags given win', async () => {
    const file = path.join(repo, 'server.json');
    fs.writeFileSync(file, JSON.stringify({ maxBody: '1k', modelControl: 'explicit', headersTimeoutMs: 2000 }));
    const server = await listenInProcess([repo, '--config', file, '--headers-timeout-ms', '3000']);
    expect(server.server.zgc.config).toMatchObject({ maxBody: 1024, modelControl: 'explicit', headersTimeoutMs: 3000 });
    expect(server.server.headersTimeout).toBe(3000);
    await server.stop();
    fs.writeFileSync(file, JSON.stringify({ maxbody: '1k' }));
    await expect(listenInProcess([repo, '--config', file])).rejects.toThrow(`the server config ${file} has no option "maxbody" (did you mean "maxBody"?)`);
    fs.rmSync(file);
  });
});

test('docs/serving.md and --help list every limit with its default', () => {
  const page = fs.readFileSync(path.join(testDir, '..', 'docs', 'serving.md'), 'utf8');
  const section = page.slice(page.indexOf('## A public endpoint: limits'));
  const rows = section.slice(0, section.indexOf('\n## ', 5)).split('\n').filter((l) => /^\| `--/.test(l));
  expect(rows.map((l) => /^\| `([^`]+)`/.exec(l)[1])).toEqual(LIMITS.map((l) => l.flag));
  for (const l of LIMITS) expect(rows).toContainEqual(expect.stringContaining(`| \`${l.flag}\` | ${l.shown} |`));
  const help = require('node:child_process').execFileSync(process.execPath, [path.join(testDir, '..', 'bin', 'zgc-runtime.js'), '--help'], { encoding: 'utf8' });
  for (const l of LIMITS) expect(help).toMatch(new RegExp(`^    ${l.flag} (SIZE|N) +.*\\[${l.shown.replace(/[()]/g, '\\$&')}`, 'm'));
});

