'use strict';

// Request bodies sent compressed (Content-Encoding gzip or deflate, as tritonclient's
// request_compression_algorithm sends them), compressed here by node:zlib: answered as the same
// body uncompressed, bounded by their decompressed size, refused by name when they are not
// what they say.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { writeModel, listenInProcess } = require('./setup');
const { request } = require('./wire');

const MAX_BODY = 1 << 20;
let repo;
let server;
beforeAll(async () => {
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-compression-'));
  writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
  server = await listenInProcess([repo, '--max-body', String(MAX_BODY)]);
});
afterAll(async () => {
  await server.stop();
  fs.rmSync(repo, { recursive: true, force: true });
});

const infer = (body, headers) => request(`${server.url}/v2/models/add/infer`, { body, headers });
const a = [1.5, -2, 3.25, 1e-3];
const b = [0.5, 0.5, -7, 2];
const want = a.map((v, i) => Math.fround(Math.fround(v) + Math.fround(b[i])));
// Floats come as the shortest text that reads back to the same f32.
const sums = (r) => r.json.outputs[0].data.map(Math.fround);
const json = JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: a }, { name: 'b', datatype: 'FP32', shape: [4], data: b }] });

/** A binary request: its JSON header, then a's and b's raw bytes. */
function binaryBody() {
  const head = Buffer.from(JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } }, { name: 'b', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } }] }));
  return { head, body: Buffer.concat([head, Buffer.from(Float32Array.from(a).buffer), Buffer.from(Float32Array.from(b).buffer)]) };
}

const COMPRESS = { gzip: zlib.gzipSync, deflate: zlib.deflateSync };

describe('Content-Encoding gzip and deflate', () => {
  test.each(Object.keys(COMPRESS))('a JSON body in %s is answered as the same body sent plain', async (encoding) => {
    const plain = await infer(json, { 'content-type': 'application/json' });
    const r = await infer(COMPRESS[encoding](json), { 'content-type': 'application/json', 'content-encoding': encoding });
    expect([r.status, sums(r)]).toEqual([200, want]);
    expect(r.json).toEqual(plain.json);
  });

  test.each(Object.keys(COMPRESS))('a binary body in %s: its header length counts the decompressed bytes', async (encoding) => {
    const { head, body } = binaryBody();
    const r = await infer(COMPRESS[encoding](body), { 'inference-header-content-length': String(head.length), 'content-encoding': encoding });
    expect([r.status, sums(r)]).toEqual([200, want]);
  });

  test('the encoding is read as HTTP reads it: any case, and x-gzip for gzip', async () => {
    for (const encoding of ['GZIP', 'x-gzip', ' Deflate ']) {
      const r = await infer((encoding.toLowerCase().includes('gzip') ? zlib.gzipSync : zlib.deflateSync)(json), { 'content-encoding': encoding });
      expect([encoding, r.status]).toEqual([encoding, 200]);
    }
  });

  test('a decompression bomb is a 413 at the body limit, holding nothing after, and the server answers on', async () => {
    // 64 MB of zeros: 64 KB compressed, 64 times the limit once decompressed.
    const bomb = zlib.gzipSync(Buffer.alloc(64 * MAX_BODY));
    expect(bomb.length).toBeLessThan(MAX_BODY);
    const r = await infer(bomb, { 'content-encoding': 'gzip' });
    expect([r.status, r.json.error]).toEqual([413, `the request body is over the server's limit of ${MAX_BODY} bytes`]);
    expect((await request(`${server.url}/metrics`, { method: 'GET' })).text).toMatch(/^zgc_inflight_bytes 0$/m);
    expect(sums(await infer(json))).toEqual(want);
  });

  test('a compressed body declared longer than the limit is a 413 before it is read', async () => {
    const r = await infer(Buffer.alloc(MAX_BODY + 1), { 'content-encoding': 'gzip' });
    expect([r.status, r.json.error]).toEqual([413, `the request body of ${MAX_BODY + 1} bytes is over the server's limit of ${MAX_BODY} bytes`]);
  });

  test('bytes that are not what their encoding says are a 400 naming it', async () => {
    const notGzip = await infer(Buffer.from(json), { 'content-encoding': 'gzip' });
    expect(notGzip.status).toBe(400);
    expect(notGzip.json.error).toMatch(/^the request body is not valid gzip data: /);
    const truncated = await infer(zlib.deflateSync(json).subarray(0, 20), { 'content-encoding': 'deflate' });
    expect(truncated.status).toBe(400);
    expect(truncated.json.error).toMatch(/^the request body is not valid deflate \(zlib\) data: /);
    expect(sums(await infer(json))).toEqual(want);
  });

  test('a chunked body is bounded by its compressed bytes too: empty members that inflate to nothing are a 413', async () => {
    // 20-byte gzip members of nothing, 1.2 MB of them, sent without a declared length.
    const empties = Buffer.concat(Array.from({ length: 60000 }, () => zlib.gzipSync(Buffer.alloc(0))));
    const r = await infer(empties, { 'content-encoding': 'gzip', 'transfer-encoding': 'chunked' });
    expect([r.status, r.json.error]).toEqual([413, `the request body is over the server's limit of ${MAX_BODY} bytes`]);
    expect(sums(await infer(json))).toEqual(want);
  });

  test('bytes after the end of the compressed data are a 400, for deflate as for gzip', async () => {
    const r = await infer(Buffer.concat([zlib.deflateSync(json), Buffer.from('trailing bytes')]), { 'content-encoding': 'deflate' });
    expect([r.status, r.json.error]).toEqual([400, 'the request body has 14 bytes after the end of its deflate (zlib) data']);
    const g = await infer(Buffer.concat([zlib.gzipSync(json), Buffer.from('trailing bytes')]), { 'content-encoding': 'gzip' });
    expect(g.status).toBe(400);
  });

  test('another encoding is a 400 naming the ones taken', async () => {
    const r = await infer(zlib.brotliCompressSync(json), { 'content-encoding': 'br' });
    expect([r.status, r.json.error]).toEqual([400, 'Content-Encoding "br" is not supported: send the request uncompressed, or gzip or deflate']);
  });
});
