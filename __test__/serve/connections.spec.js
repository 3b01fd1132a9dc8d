'use strict';

// lib/serve/connections.js on its own: which connection makes way for a new one when the limit
// is reached, over a real node:http server and raw client sockets.
const http = require('node:http');
const net = require('node:net');
const { connectionLimit, limitConnections } = require('../../lib/serve/connections');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A node:http server under a connection limit of `max`, wired as lib/serve/server.js wires it; requests to /slow are answered on release(). */
async function limitedServer(max) {
  const refused = { n: 0 };
  const limit = connectionLimit(max, { refuseConnection: () => refused.n++ });
  const held = [];
  const server = http.createServer((req, res) => {
    limit.request(req.socket, req, res);
    req.resume();
    req.on('end', () => {
      if (req.url === '/slow') held.push(res);
      else res.end('ok');
    });
  });
  limitConnections(server, limit);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, limit, refused, port: server.address().port, release: () => held.splice(0).forEach((res) => res.end('ok')) };
}

/** A client socket that records whether the server closed it and what it answered. */
function client(port) {
  const s = net.connect(port, '127.0.0.1');
  s.answer = '';
  s.closedByServer = false;
  s.on('data', (d) => (s.answer += d));
  s.on('end', () => (s.closedByServer = true));
  s.on('close', () => (s.closedByServer = true));
  s.on('error', () => {});
  return new Promise((resolve) => s.on('connect', () => resolve(s)));
}

const get = (path) => `GET ${path} HTTP/1.1\r\nhost: x\r\n\r\n`;
/** Each socket in turn asks GET / and gets its answer: idle keep-alive connections, idle longest first. */
async function askInTurn(sockets, pauseMs = 0) {
  for (const s of sockets) {
    s.write(get('/'));
    expect(await until(() => s.answer.includes('ok'))).toBe(true);
    if (pauseMs) await sleep(pauseMs);
  }
}
async function until(cond, ms = 3000) {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await sleep(5);
  return cond();
}

describe('the connection limit', () => {
  let srv;
  afterEach(async () => {
    srv.release();
    srv.server.closeAllConnections();
    await new Promise((r) => srv.server.close(r));
  });

  test('full of idle keep-alive connections: the one idle longest makes way, the others stay', async () => {
    srv = await limitedServer(3);
    const a = await client(srv.port);
    const b = await client(srv.port);
    const c = await client(srv.port);
    // Answered in the order b, a, c: b is idle longest.
    await askInTurn([b, a, c], 20);
    expect(srv.limit.size).toBe(3);
    const d = await client(srv.port);
    expect(await until(() => b.closedByServer)).toBe(true);
    expect([a.closedByServer, c.closedByServer, d.closedByServer]).toEqual([false, false, false]);
    d.write(get('/'));
    expect(await until(() => d.answer.includes('ok'))).toBe(true);
    expect(srv.refused.n).toBe(0);
    for (const s of [a, c, d]) s.destroy();
  });

  test('idle connections go before ones owing bytes; among those owing, the one heard from longest ago', async () => {
    srv = await limitedServer(3);
    const slow = await client(srv.port);
    slow.write('GET / HTTP/1.1\r\n'); // part of a request
    await sleep(20);
    const silent = await client(srv.port); // never sends: owes a request, heard from when it came
    await sleep(20);
    const idle = await client(srv.port);
    idle.write(get('/'));
    expect(await until(() => idle.answer.includes('ok'))).toBe(true);
    // The idle one was heard from last, yet goes first.
    await client(srv.port);
    expect(await until(() => idle.closedByServer)).toBe(true);
    expect([silent.closedByServer, slow.closedByServer]).toEqual([false, false]);
    // Then the silent one: the slow one came first but has sent more since.
    await sleep(150); // past the 100 ms a ranking serves
    slow.write('host: x\r\n');
    await sleep(20);
    await client(srv.port);
    expect(await until(() => silent.closedByServer)).toBe(true);
    expect(slow.closedByServer).toBe(false);
  });

  test('a ranking serves 100 ms: after that the connections are ranked again as they are now', async () => {
    srv = await limitedServer(3);
    const [x, y, w] = [await client(srv.port), await client(srv.port), await client(srv.port)];
    await askInTurn([x, y]);
    await client(srv.port); // ranks x, y (idle) then w (owing), and takes x's place
    expect(await until(() => x.closedByServer)).toBe(true);
    // Since: y starts a request (owing now), w finishes one (idle now).
    y.write('GET / HTTP/1.1\r\n');
    w.write(get('/'));
    expect(await until(() => w.answer.includes('ok'))).toBe(true);
    await sleep(150);
    await client(srv.port);
    // Ranked afresh, w (idle) goes; the old ranking would have taken y.
    expect(await until(() => w.closedByServer)).toBe(true);
    expect(y.closedByServer).toBe(false);
  });

  test('a connection that closed since it was ranked is not counted twice', async () => {
    srv = await limitedServer(2);
    const [a, b] = [await client(srv.port), await client(srv.port)];
    await askInTurn([a, b]);
    await client(srv.port); // ranks a, b; a goes
    expect(await until(() => a.closedByServer)).toBe(true);
    b.destroy(); // ranked, now gone
    expect(await until(() => srv.limit.size === 1)).toBe(true);
    await client(srv.port); // a free place
    const last = await client(srv.port); // full again: b, the rest of the ranking, is gone; one that came since makes way
    await sleep(50);
    expect(srv.refused.n).toBe(0);
    expect(srv.limit.size).toBe(2);
    expect(last.closedByServer).toBe(false);
  });

  test('every connection busy with a request being answered: a new one gets the 503 and is counted as refused', async () => {
    srv = await limitedServer(2);
    const a = await client(srv.port);
    const b = await client(srv.port);
    a.write(get('/slow'));
    b.write(get('/slow'));
    await sleep(50);
    const c = await client(srv.port);
    expect(await until(() => c.answer.length > 0)).toBe(true);
    expect(c.answer).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(c.answer).toContain('retry-after: 1');
    expect(c.answer.endsWith('{"error":"the server has too many connections: try again"}\n')).toBe(true);
    expect(srv.refused.n).toBe(1);
    expect([a.closedByServer, b.closedByServer]).toEqual([false, false]);
    // A refused connection that sends a request anyway, and one that never reads its answer:
    // neither is counted, and the second is dropped after a second.
    c.write(get('/'));
    const mute = await client(srv.port);
    mute.pause();
    expect(await until(() => srv.refused.n === 2)).toBe(true);
    const count = () => new Promise((r) => srv.server.getConnections((_e, n) => r(n)));
    expect(await count()).toBeGreaterThanOrEqual(3);
    await sleep(1300);
    expect(await count()).toBe(2);
    expect(srv.limit.size).toBe(2);
    // Answered, they become idle, and make way again.
    srv.release();
    expect(await until(() => a.answer.includes('ok') && b.answer.includes('ok'))).toBe(true);
    await sleep(150);
    await client(srv.port);
    expect(await until(() => a.closedByServer || b.closedByServer)).toBe(true);
    expect(srv.refused.n).toBe(2);
  });

  test('arrivals within one ranking: a connection busy since it was ranked is skipped, and a used-up ranking is made again', async () => {
    srv = await limitedServer(3);
    const [a, b, c] = [await client(srv.port), await client(srv.port), await client(srv.port)];
    await askInTurn([a, b, c]);
    const d = await client(srv.port); // ranks a, b, c (all idle) and takes a's place
    expect(await until(() => a.closedByServer)).toBe(true);
    // Within the ranking's 100 ms: b starts a request, then e comes. b is skipped; c goes.
    b.write(get('/slow'));
    await sleep(10);
    const e = await client(srv.port);
    expect(await until(() => c.closedByServer)).toBe(true);
    expect(b.closedByServer).toBe(false);
    // The ranking is used up: f's arrival ranks again and finds d, which has sent nothing since it came before e.
    const f = await client(srv.port);
    expect(await until(() => d.closedByServer)).toBe(true);
    expect([b.closedByServer, e.closedByServer, f.closedByServer]).toEqual([false, false, false]);
    expect(srv.refused.n).toBe(0);
  });

  test('a handshaken gRPC connection is never displaced; closed connections stop counting', async () => {
    srv = await limitedServer(2);
    const sockets = [];
    srv.server.on('connection', (s) => sockets.push(s));
    const grpc = await client(srv.port);
    expect(await until(() => sockets.length === 1)).toBe(true);
    // As lib/serve/grpc.js marks a connection once its HTTP/2 handshake is done; one it never admitted is left alone.
    srv.limit.handshaken(sockets[0]);
    expect(() => srv.limit.handshaken(new net.Socket())).not.toThrow();
    await sleep(20);
    const other = await client(srv.port);
    expect(await until(() => srv.limit.size === 2)).toBe(true);
    const third = await client(srv.port);
    // Both sent nothing; the gRPC one was heard from longer ago, yet the other makes way.
    expect(await until(() => other.closedByServer)).toBe(true);
    expect(grpc.closedByServer).toBe(false);
    third.destroy();
    expect(await until(() => srv.limit.size === 1)).toBe(true);
    grpc.destroy();
    expect(await until(() => srv.limit.size === 0)).toBe(true);
  });
});
