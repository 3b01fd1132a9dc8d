'use strict';

// A server that dies while it holds a request: the client says the request may have run
// (ERR_ZGC_CONNECTION, sent: true), over REST and gRPC, so that a request that is not
// idempotent is never sent again. The run is held by construction: the faulty fixture's mode
// 7 waits in the server until a file exists, and the server is killed while it waits.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { connect } = require('../../lib/client');
const { writeModel } = require('../serve/setup');

const BIN = path.join(__dirname, '..', '..', 'bin', 'zgc-runtime.js');

/** serve in a child process over `repo`, with REST and gRPC; its stdout read until both listen. */
function startChild(repo, env) {
  const child = spawn(process.execPath, [BIN, 'serve', repo, '--port', '0', '--grpc-port', '0'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      const g = /gRPC listening on [\d.]+:(\d+)/.exec(out);
      if (m && g) resolve({ child, url: m[1], grpc: `grpc://127.0.0.1:${g[1]}` });
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
  });
}

/** Resolves once the server counts a request in flight (its /metrics gauge). */
async function inFlight(url) {
  for (;;) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = /^zgc_http_requests_in_flight (\d+)/m.exec(text);
    if (m && Number(m[1]) > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a server that dies holding a request', () => {
  test.each([['REST', 'url'], ['gRPC', 'grpc']])('over %s: ERR_ZGC_CONNECTION with sent: true, the request not sent again', async (_, key) => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-client-lost-'));
    const hold = path.join(repo, 'release');
    writeModel(repo, 'faulty', { 1: 'faulty' }, { instances: 1 });
    const server = await startChild(repo, { ZGC_FAULTY_HOLD: hold });
    const client = await connect(server[key]);
    try {
      const model = await client.model('faulty');
      const held = model.runAsync({ x: [1, 2, 3, 4], mode: 7, id: 1 }).catch((e) => e);
      await inFlight(server.url);
      const before = client.stats()[0].requests;
      server.child.kill('SIGKILL');
      const err = await held;
      expect(err).toMatchObject({ code: 'ERR_ZGC_CONNECTION', sent: true, server: server[key] });
      expect(client.stats()[0].requests).toBe(before);
    } finally {
      client.close();
      server.child.kill('SIGKILL');
      fs.rmSync(repo, { recursive: true, force: true });
    }
  });
});
