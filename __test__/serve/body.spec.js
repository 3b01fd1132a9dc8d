'use strict';

// lib/serve/body.js on its own: request bodies read under the body limit and the in-flight
// budget, over real node:http requests sent byte by byte from sockets, with the memory each
// holds checked as it grows.
const http = require('node:http');
const net = require('node:net');
const { readBody, createBudget, SMALL_BODY } = require('../../lib/serve/body');

const MB = 1 << 20;

describe('createBudget', () => {
  test('a body fits while what is held plus it stays within the limit, exactly to the byte', () => {
    const budget = createBudget(4 * MB);
    expect(budget.claim(3 * MB)).toBe(true);
    expect(budget.held).toBe(3 * MB);
    expect(budget.fits(MB)).toBe(true); // 4 MB in all: at the limit
    expect(budget.refused).toBe(0);
    expect(budget.fits(MB + 1)).toBe(false);
    expect(budget.refused).toBe(1);
    expect(budget.claim(MB + 1)).toBe(false);
    expect(budget.refused).toBe(2);
    expect(budget.held).toBe(3 * MB);
    expect(budget.claim(MB)).toBe(true);
    expect(budget.held).toBe(4 * MB);
    budget.release(4 * MB);
    expect(budget.held).toBe(0);
  });

  test('bodies up to 64 KB are never refused, only counted, whatever is held', () => {
    const budget = createBudget(MB);
    expect(budget.claim(MB)).toBe(true);
    expect(budget.fits(SMALL_BODY)).toBe(true);
    expect(budget.fits(SMALL_BODY + 1)).toBe(false);
    // A growth of a body still small in all is counted; one that makes it larger is refused.
    expect(budget.claim(SMALL_BODY, SMALL_BODY)).toBe(true);
    expect(budget.held).toBe(MB + SMALL_BODY);
    expect(budget.claim(1, SMALL_BODY + 1)).toBe(false);
    expect(budget.refused).toBe(2);
  });
});

/**
 * A server whose handler reads each body with readBody and answers what it saw: the bytes'
 * length and checksum, the claims the body made of the budget on the way, and where a binary
 * part starts in its buffer. `options(req)` gives readBody's options.
 */
function bodyServer(budget, options) {
  const seen = [];
  const server = http.createServer((req, res) => {
    const claims = [];
    const claim = {
      set bytes(n) {
        claims.push(n);
        this.value = n;
      },
      get bytes() {
        return this.value ?? 0;
      },
    };
    const opts = { budget, claim, ...options(req) };
    readBody(req, opts).then(
      (body) => {
        let sum = 0;
        for (const b of body) sum = (sum * 31 + b) >>> 0;
        const alignedAt = opts.headerLength === undefined ? null : (body.byteOffset + opts.headerLength) % 8;
        seen.push({ length: body.length, sum, claims, alignedAt, held: budget.held, instance: body.constructor.name });
        budget.release(claim.bytes);
        res.end('ok');
      },
      (err) => {
        seen.push({ status: err.status, message: err.message, headers: err.headers, claims, reason: err.reason });
        budget.release(claim.bytes);
        res.writeHead(err.status || 499, err.headers).end(err.message);
      },
    );
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: server.address().port, seen })));
}

/** Sends `head` then the body's pieces from a raw socket, each after the last was written; resolves the answer's status. */
function send(port, head, pieces, { pauseMs = 0, keepOpen = false } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (d) => {
      answer += d;
      const m = /^HTTP\/1\.1 (\d+)/.exec(answer);
      if (m && !keepOpen) {
        socket.destroy();
        resolve(Number(m[1]));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(Number((/^HTTP\/1\.1 (\d+)/.exec(answer) || [])[1]) || 0));
    (async () => {
      socket.write(head);
      for (const p of pieces) {
        if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
        if (!socket.destroyed) socket.write(p);
      }
    })();
  });
}

const checksum = (buf) => {
  let sum = 0;
  for (const b of buf) sum = (sum * 31 + b) >>> 0;
  return sum;
};
const bytes = (n, seed = 1) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff));
const pieces = (buf, size) => Array.from({ length: Math.ceil(buf.length / size) }, (_, k) => buf.subarray(k * size, (k + 1) * size));

describe('readBody over node:http', () => {
  let budget;
  let srv;
  let options;
  beforeEach(async () => {
    budget = createBudget(16 * MB);
    options = () => ({ maxBody: 8 * MB });
    srv = await bodyServer(budget, (req) => options(req));
  });
  afterEach(() => new Promise((r) => srv.server.close(r)));

  test('a body that came whole is taken as it is: one claim of its length', async () => {
    const body = bytes(3000);
    expect(await send(srv.port, Buffer.concat([Buffer.from(`POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n`), body]), [])).toBe(200);
    expect(srv.seen).toEqual([{ length: 3000, sum: checksum(body), claims: [3000], alignedAt: null, held: 3000, instance: 'Buffer' }]);
  });

  test('a declared body arriving in pieces grows from 64 KB by doubling, then to its length once an eighth has come', async () => {
    const body = bytes(2 * MB + 5);
    expect(await send(srv.port, `POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n`, pieces(body, 16 * 1024), { pauseMs: 1 })).toBe(200);
    const [seen] = srv.seen;
    expect(seen.length).toBe(body.length);
    expect(seen.sum).toBe(checksum(body));
    // Whatever the chunks: 64 KB first, each growth at least a doubling, the declared length last, reached by an eighth of the body.
    expect(seen.claims[0]).toBe(64 * 1024);
    expect(seen.claims.at(-1)).toBe(body.length);
    for (let k = 1; k < seen.claims.length - 1; k++) expect(seen.claims[k]).toBeGreaterThanOrEqual(2 * seen.claims[k - 1]);
    expect(seen.claims.at(-2)).toBeLessThanOrEqual(2 * Math.ceil(body.length / 8) + 16 * 1024);
    expect(seen.held).toBe(body.length);
  });

  test('a chunked body (no length) doubles up to what it needs and is handed over at its own length', async () => {
    const body = bytes(300 * 1024 + 7, 3);
    const chunked = pieces(body, 50 * 1024).map((p) => Buffer.concat([Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]));
    expect(await send(srv.port, 'POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n', [...chunked, Buffer.from('0\r\n\r\n')], { pauseMs: 1 })).toBe(200);
    const [seen] = srv.seen;
    expect(seen.length).toBe(body.length);
    expect(seen.sum).toBe(checksum(body));
    expect(seen.claims.at(-1)).toBe(512 * 1024); // 64, 128, 256, 512 KB
    for (let k = 1; k < seen.claims.length; k++) expect(seen.claims[k]).toBe(2 * seen.claims[k - 1]);
  });

  test('an empty body is an empty buffer; a body of exactly the limit is read, one byte more is a 413 before any is read', async () => {
    expect(await send(srv.port, 'POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n', [])).toBe(200);
    expect(srv.seen[0]).toMatchObject({ length: 0, claims: [] });
    options = () => ({ maxBody: 4096 });
    expect(await send(srv.port, 'POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 4096\r\n\r\n', [bytes(4096)])).toBe(200);
    expect(srv.seen[1]).toMatchObject({ length: 4096 });
    expect(await send(srv.port, 'POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 4097\r\n\r\n', [])).toBe(413);
    expect(srv.seen[2]).toEqual({ status: 413, message: "the request body of 4097 bytes is over the server's limit of 4096 bytes", headers: { connection: 'close' }, claims: [], reason: 'too_large' });
  });

  test('a chunked body past the limit is refused when it passes it, and not read on', async () => {
    options = () => ({ maxBody: 100 * 1024 });
    const chunk = (n) => Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), bytes(n), Buffer.from('\r\n')]);
    const status = await send(srv.port, 'POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n', [chunk(60 * 1024), chunk(60 * 1024), chunk(60 * 1024)], { pauseMs: 5 });
    expect(status).toBe(413);
    expect(srv.seen[0]).toMatchObject({ status: 413, message: "the request body is over the server's limit of 102400 bytes", headers: { connection: 'close' }, claims: [64 * 1024] });
  });

  test('a declared length that cannot fit in what is left is a 503 before a byte is read; one that can is read', async () => {
    budget.claim(15 * MB);
    expect(await send(srv.port, `POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${MB + 1}\r\n\r\n`, [])).toBe(503);
    expect(srv.seen[0]).toMatchObject({ status: 503, reason: 'over_budget', claims: [], headers: { 'retry-after': '1', connection: 'close' } });
    expect(srv.seen[0].message).toBe(`the server holds ${15 * MB} bytes of requests, near its in-flight limit of ${16 * MB} bytes: try again shortly`);
    expect(await send(srv.port, `POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${MB}\r\n\r\n`, pieces(bytes(MB), 64 * 1024))).toBe(200);
    expect(srv.seen[1]).toMatchObject({ length: MB, held: 16 * MB });
  });

  test('a body that outgrows what others left midway is refused then', async () => {
    budget.claim(15 * MB);
    const body = bytes(900 * 1024);
    // Fits when it starts (declared 900 KB of the 1 MB left); others take more meanwhile.
    const pending = send(srv.port, `POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n`, pieces(body, 8 * 1024), { pauseMs: 2 });
    await new Promise((r) => setTimeout(r, 20));
    budget.claim(512 * 1024);
    expect(await pending).toBe(503);
    expect(srv.seen[0]).toMatchObject({ status: 503, reason: 'over_budget' });
    expect(budget.refused).toBeGreaterThan(0);
  });

  test('a binary body starts its binary part 8-byte aligned, wherever the JSON header ends', async () => {
    for (let headerLength = 0; headerLength < 10; headerLength++) {
      options = () => ({ maxBody: MB, headerLength });
      const body = bytes(200 + headerLength);
      expect(await send(srv.port, `POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n`, [body])).toBe(200);
      expect(srv.seen.at(-1)).toMatchObject({ length: body.length, sum: checksum(body), alignedAt: 0, instance: 'Uint8Array' });
    }
  });

  test('a client that goes away midway is no body: status 0, and what it held is given back', async () => {
    const socket = net.connect(srv.port, '127.0.0.1');
    socket.write(`POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${MB}\r\n\r\n`);
    socket.write(bytes(200 * 1024));
    await new Promise((r) => setTimeout(r, 50));
    socket.destroy();
    const end = Date.now() + 5000;
    while (srv.seen.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(srv.seen[0]).toMatchObject({ status: 0, message: 'the client went away' });
    expect(budget.held).toBe(0);
  });
});
