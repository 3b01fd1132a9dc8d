'use strict';

// An HTTP service around a pool: POST /predict {"x":[4 numbers]} -> {"logits":[...],"probs":[...]}.
// Runs go to the pool's own worker threads (or inline when that is cheaper), so the event
// loop keeps accepting requests; a bad input is a 400 naming the problem, a full queue a 503.
// SIGTERM or SIGINT stops the server, lets the runs in flight finish, and exits.
//   node examples/service.js [port]
const http = require('node:http');
const { createPool, ZgcError } = require('..');
const { buildMlp, weights } = require('./build');

function startService({ port = 0, size } = {}) {
  const pool = createPool(buildMlp(), {
    size,
    maxQueue: 256,
    setup(rt) {
      // Same parameters on every instance: w1 packed into its column-major storage, w2 into its padded one.
      for (const name of ['w1', 'b1', 'w2']) rt.set(name, weights[name]);
    },
  });
  const server = http.createServer(async (req, res) => {
    const reply = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'POST' || req.url !== '/predict') return reply(404, { error: 'POST /predict' });
    let body = '';
    for await (const chunk of req) body += chunk;
    try {
      const { x } = JSON.parse(body);
      const [logits, probs] = await pool.run({ x });
      reply(200, { logits: Array.from(logits.data), probs: Array.from(probs.data) });
    } catch (err) {
      if (err instanceof SyntaxError) return reply(400, { error: 'body is not JSON' });
      if (!(err instanceof ZgcError)) return reply(500, { error: 'internal error' });
      reply(err.code === 'ERR_ZGC_QUEUE_FULL' ? 503 : 400, { error: err.message, code: err.code });
    }
  });
  // Stop accepting, then let queued runs finish before the instances close.
  const close = async () => {
    await new Promise((resolve) => server.close(resolve));
    await pool.close();
  };
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve({ server, pool, port: server.address().port, close })));
}

module.exports = { startService };

if (require.main === module) {
  startService({ port: Number(process.argv[2] || 8080) }).then(({ port, close }) => {
    console.log(`POST http://127.0.0.1:${port}/predict  {"x":[1,2,3,4]}`);
    for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => close().then(() => process.exit(0)));
  });
}
