'use strict';

// The Open Inference Protocol's REST endpoints (health, metadata, infer with the binary tensor
// data extension, the model repository extension) and GET /metrics, as one request handler
// that a node:http server, express or fastify can call.

const http = require('node:http');
const os = require('node:os');
const { ModelRepository, LoadError } = require('./repository');
const { RequestError, parseInfer, formatInfer } = require('./protocol');
const { parserPool, OFF_THREAD_BYTES } = require('./parsers');
const { createMetrics } = require('./metrics');
const { ZgcError } = require('../errors');
const { kRunNow } = require('../pool');
const { version: packageVersion } = require('../../package.json');

const DEFAULTS = { maxQueue: 1024, timeoutMs: 30000, maxBody: 64 * 1024 * 1024, pollMs: 2000, offload: 'auto' };
const EXTENSIONS = ['binary_tensor_data', 'model_repository', 'metrics'];
const { refuseUnknownKeys, parseSize, SIZE_RULE } = require('../options');

const JSON_TYPE = 'application/json';
const EMPTY = Buffer.alloc(0);

/** Statuses of run failures that are the request's fault, not the model's. */
const INPUT_CODES = new Set(['ERR_ZGC_VALUE', 'ERR_ZGC_SIZE', 'ERR_ZGC_DTYPE', 'ERR_ZGC_UNKNOWN_SOURCE']);

/** Every option createServer and createHandler take: the serve flags in camelCase, models and log. */
const SERVER_OPTIONS = ['models', 'poolSize', 'maxQueue', 'timeoutMs', 'maxBody', 'pollMs', 'shutdownTimeoutMs', 'offload', 'isolate', 'log'];

function checkOptions(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('createServer options must be an object');
  const models = typeof options.models === 'string' ? [options.models] : options.models;
  if (!Array.isArray(models) || models.length === 0) throw new TypeError('createServer needs "models": a repository directory, name=artifact.so or artifact.so (or an array of them)');
  refuseUnknownKeys('createServer()', options, SERVER_OPTIONS);
  const out = { ...DEFAULTS, poolSize: os.availableParallelism(), ...options, models };
  if (options.maxBody !== undefined) {
    out.maxBody = parseSize(options.maxBody);
    if (out.maxBody === null || out.maxBody < 1) throw new RangeError(`createServer option maxBody must be ${SIZE_RULE}, at least 1 byte; got ${JSON.stringify(options.maxBody)}`);
  }
  if (out.isolate !== undefined && out.isolate !== 'none' && out.isolate !== 'process') throw new TypeError(`createServer option isolate must be 'none' or 'process', got ${JSON.stringify(out.isolate)}`);
  for (const key of ['poolSize', 'maxQueue', 'timeoutMs', 'maxBody', 'pollMs', 'shutdownTimeoutMs']) {
    if (out[key] === undefined) continue;
    const min = key === 'poolSize' || key === 'maxBody' ? 1 : 0;
    if (!Number.isSafeInteger(out[key]) || out[key] < min) throw new RangeError(`createServer option ${key} must be an integer >= ${min}, got ${String(out[key])}`);
  }
  return out;
}

function send(res, status, body, headers) {
  const text = body === undefined ? EMPTY : JSON.stringify(body);
  const h = { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) };
  if (headers) Object.assign(h, headers);
  res.writeHead(status, h);
  res.end(text);
}

const fail = (res, status, message, headers) => send(res, status, { error: message }, headers);

/**
 * The whole body: for a binary request, in one buffer whose binary part starts 8-byte aligned
 * (so its tensors are read in place); for JSON, the received chunk itself where it is one.
 */
/** JSON bodies declaring this many bytes or more are received into one buffer of that size. */
const PREALLOCATE_BYTES = 1 << 16;

/** `length` bytes whose byte `headerLength` (where binary data starts) is 8-byte aligned. */
function alignedBody(length, headerLength) {
  const pad = (8 - (headerLength % 8)) % 8;
  return new Uint8Array(new ArrayBuffer(length + pad), pad, length);
}

function readBody(req, maxBody, headerLength) {
  return new Promise((resolve, reject) => {
    const declared = req.headers['content-length'];
    const length = declared === undefined ? -1 : Number(declared);
    if (length > maxBody) return reject(new RequestError(413, `the request body of ${length} bytes is over the server's limit of ${maxBody} bytes`, { connection: 'close' }));
    let into = null;
    let chunks = null;
    let got = 0;
    if (headerLength !== undefined && length >= 0) {
      into = alignedBody(length, headerLength);
    } else if (length >= PREALLOCATE_BYTES) {
      // Copied in as it arrives: a concat at the end would hold the event loop for the whole body at once.
      into = Buffer.from(new ArrayBuffer(length));
    } else {
      chunks = [];
    }
    const onData = (chunk) => {
      if (got + chunk.length > (into ? into.length : maxBody)) {
        cleanup();
        req.resume();
        const message = into ? `the request body is longer than its Content-Length of ${into.length}` : `the request body is over the server's limit of ${maxBody} bytes`;
        return reject(new RequestError(into ? 400 : 413, message, { connection: 'close' }));
      }
      if (into) into.set(chunk, got);
      else chunks.push(chunk);
      got += chunk.length;
    };
    const onEnd = () => {
      cleanup();
      if (into) return resolve(into);
      let body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, got);
      if (headerLength !== undefined) {
        // Chunked upload of binary data: one copy into an aligned buffer.
        const aligned = alignedBody(got, headerLength);
        aligned.set(body);
        body = aligned;
      }
      resolve(body);
    };
    const onClose = () => {
      if (!req.complete) {
        cleanup();
        reject(new RequestError(0, 'the client went away'));
      }
    };
    // Only the data listener needs taking off (a refusal stops reading midway); the others
    // fire at most once more, on a settled promise.
    const cleanup = () => req.off('data', onData);
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
  });
}

function createHandler(options) {
  const config = checkOptions(options);
  const defaults = { poolSize: config.poolSize, maxQueue: config.maxQueue, timeoutMs: config.timeoutMs, offload: config.offload, isolate: config.isolate };
  let metrics;
  const repository = new ModelRepository(config.models, defaults, { onRetired: (v) => metrics.retire(v) });
  metrics = createMetrics(repository);
  const log = config.log === undefined ? () => {} : config.log;
  repository.loadAll();
  for (const v of repository.served()) log(`model "${v.model.name}" version ${v.version} ready (${v.pool.size} instances)`);

  const state = { active: 0, draining: false, closed: false, idle: null };
  // Started with the first large JSON request.
  const parsers = parserPool();
  let poller = null;
  if (config.pollMs > 0) {
    poller = setInterval(() => {
      for (const r of repository.poll()) log(r.ok ? `model "${r.name}" reloaded` : `model "${r.name}" failed to reload, still serving what it served: ${r.reason}`);
    }, config.pollMs);
    poller.unref();
  }

  function resolveVersion(name, versionText) {
    const model = repository.models.get(name);
    if (model === undefined) {
      repository.scan();
      if (!repository.models.has(name)) throw new RequestError(404, `unknown model "${name}"`);
      return resolveVersion(name, versionText);
    }
    if (model.versions.size === 0) throw new RequestError(400, `model "${name}" is not ready (${model.state}: ${model.reason})`);
    if (versionText === undefined) return model.latest;
    const v = model.versions.get(versionText);
    if (v === undefined) throw new RequestError(404, `model "${name}" has no version "${versionText}" being served (versions: ${[...model.versions.keys()].join(', ')})`);
    return v;
  }

  function metadata(v) {
    const model = v.model;
    return {
      name: model.name,
      versions: [...model.versions.keys()],
      platform: 'zgc_executable',
      inputs: v.signature.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
      outputs: v.signature.outputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    };
  }

  function modelConfig(v) {
    const c = v.config;
    return {
      name: v.model.name,
      platform: 'zgc_executable',
      instances: c.instances,
      maxQueue: c.maxQueue,
      timeoutMs: c.timeoutMs,
      offload: c.offload,
      versionPolicy: c.versionPolicy,
      input: v.signature.inputs.map(({ name, datatype, shape }) => ({ name, data_type: `TYPE_${datatype}`, dims: shape })),
      output: v.signature.outputs.map(({ name, datatype, shape }) => ({ name, data_type: `TYPE_${datatype}`, dims: shape })),
    };
  }

  async function infer(req, res, name, versionText, started) {
    let v;
    let outcome = 'success';
    let controller = null;
    let timer = null;
    let answered = false;
    const answer = (status, message, headers, code) => {
      if (answered || res.destroyed) return;
      answered = true;
      if (state.draining) res.shouldKeepAlive = false;
      if (message !== undefined) send(res, status, code === undefined ? { error: message } : { error: message, code }, headers);
    };
    // A run that waits for a worker: the timeout answers 504 and takes it off the queue; a
    // client that goes away takes it off too.
    const offloaded = (version, inputs) => {
      const timeoutMs = version.config.timeoutMs;
      controller = new AbortController();
      const onClose = () => {
        if (!answered) {
          outcome = 'canceled';
          answered = true;
          controller.abort(new RequestError(0, 'the client went away'));
        }
      };
      res.once('close', onClose);
      if (timeoutMs > 0) {
        timer = setTimeout(() => {
          outcome = 'timeout';
          const err = new RequestError(504, `model "${name}" did not answer within ${timeoutMs} ms`);
          controller.abort(err);
          answer(504, err.message);
        }, timeoutMs);
      }
      return version.pool.run(inputs, { signal: controller.signal }).finally(() => {
        if (timer !== null) clearTimeout(timer);
        res.off('close', onClose);
      });
    };
    try {
      v = resolveVersion(name, versionText);
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && encoding !== 'identity') throw new RequestError(400, `Content-Encoding ${encoding} is not supported: send the request uncompressed`);
      const lengthHeader = req.headers['inference-header-content-length'];
      let headerLength;
      if (lengthHeader !== undefined) {
        headerLength = Number(lengthHeader);
        if (!Number.isSafeInteger(headerLength) || headerLength < 0) throw new RequestError(400, `Inference-Header-Content-Length must be a non-negative integer, got ${JSON.stringify(lengthHeader)}`);
      }
      const body = await readBody(req, config.maxBody, headerLength);
      if (headerLength !== undefined && headerLength > body.length) throw new RequestError(400, `Inference-Header-Content-Length is ${headerLength}, the body has only ${body.length} bytes`);
      // Looked up again: a reload may have switched versions while the body arrived.
      v = resolveVersion(name, versionText);
      const jsonLength = headerLength === undefined ? body.length : headerLength;
      // A large JSON header is parsed on a parser thread, so that other requests are answered meanwhile.
      const request = jsonLength >= OFF_THREAD_BYTES ? await parsers.parse(v.signature, body, jsonLength) : parseInfer(v.signature, body, jsonLength);
      if (answered) return;
      // A run the pool does inline is over before this returns: no timer, no signal, no
      // cancel on close, no promise (a signal's listeners alone cost more than a tiny run).
      let tensors = v.pool[kRunNow](request.inputs);
      if (tensors === undefined) tensors = await offloaded(v, request.inputs);
      if (answered) return;
      let formatted = formatInfer(v.model.name, v.version, request.id, request.outputs, tensors);
      // Large float outputs are written off the event loop.
      if (formatted instanceof Promise) formatted = await formatted;
      if (answered) return;
      const { head, chunks } = formatted;
      answered = true;
      if (state.draining) res.shouldKeepAlive = false;
      if (chunks.length === 0) {
        res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(head) });
        res.end(head);
      } else {
        const headBytes = typeof head === 'string' ? Buffer.from(head) : head;
        let total = headBytes.length;
        for (const c of chunks) total += c.byteLength;
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'inference-header-content-length': headBytes.length, 'content-length': total });
        res.cork();
        res.write(headBytes);
        for (const c of chunks) res.write(c);
        res.end();
        res.uncork();
      }
    } catch (err) {
      if (err instanceof RequestError) {
        if (err.status === 0) outcome = 'canceled';
        else {
          if (outcome !== 'timeout') outcome = err.status === 404 ? 'not_found' : err.status === 413 ? 'too_large' : err.status === 504 ? 'timeout' : err.status === 400 && /not ready/.test(err.message) ? 'not_ready' : 'bad_request';
          answer(err.status, err.message, err.headers);
        }
      } else if (err instanceof ZgcError && err.code === 'ERR_ZGC_QUEUE_FULL') {
        outcome = 'queue_full';
        answer(503, `model "${name}" has ${v.config.maxQueue} requests waiting already: try again shortly`, { 'retry-after': '1' });
      } else if (err instanceof ZgcError && err.code === 'ERR_ZGC_CLOSED') {
        outcome = 'not_ready';
        answer(503, `model "${name}" is being unloaded`, { 'retry-after': '1' });
      } else if (err instanceof ZgcError && err.code === 'ERR_ZGC_TIMEOUT') {
        outcome = 'timeout';
        answer(504, `model "${name}" did not answer within ${v.config.timeoutMs} ms: its instance was stopped and restarts (${err.code})`, undefined, err.code);
      } else if (err instanceof ZgcError && err.code === 'ERR_ZGC_INSTANCE_FAILED') {
        outcome = 'not_ready';
        answer(503, `model "${name}" version ${v.version} has no live instance: ${err.message} (${err.code})`, undefined, err.code);
      } else if (err instanceof ZgcError && INPUT_CODES.has(err.code)) {
        outcome = 'bad_request';
        answer(400, err.message.replace(/^source /, 'input '));
      } else if (err instanceof ZgcError) {
        outcome = err.code === 'ERR_ZGC_INSTANCE_CRASHED' || err.code === 'ERR_ZGC_MEMORY_LIMIT' ? 'instance_crashed' : 'model_error';
        answer(500, `model "${name}" version ${v.version} failed: ${err.message} (${err.code})`, undefined, err.code);
      } else if (err && err.name === 'AbortError') {
        outcome = 'canceled';
      } else {
        outcome = 'model_error';
        answer(500, `internal error: ${err && err.message}`);
      }
    } finally {
      // Names that are no model share one label: a client must not grow the series at will.
      const label = v !== undefined || repository.models.has(name) ? name : '_unknown';
      metrics.count(label, v === undefined ? '' : v.version, outcome, Number(process.hrtime.bigint() - started) / 1e9, 'rest');
      // Answered (or given up by its client): the response is written, the run is over.
      settle();
    }
  }

  function repositoryRequest(req, res, action, name) {
    try {
      if (action === 'index') {
        readJson(req)
          .then((body) => send(res, 200, repository.index(body !== null && typeof body === 'object' && body.ready === true)))
          .catch((err) => fail(res, 400, err.message));
        return;
      }
      // A body (the protocol allows parameters) is read and ignored.
      req.resume();
      if (!repository.models.has(name)) repository.scan();
      if (!repository.models.has(name)) return fail(res, 404, `unknown model "${name}"`);
      const done = action === 'load' ? repository.load(name) : repository.unload(name);
      log(`model "${name}" ${action === 'load' ? 'loaded' : 'unloaded'} by request`);
      done.catch(() => {});
      send(res, 200);
    } catch (err) {
      if (err instanceof LoadError) return fail(res, 400, `failed to load model "${name}": ${err.message}`);
      throw err;
    }
  }

  function route(req, res, next) {
    const url = req.url;
    const q = url.indexOf('?');
    const p = q < 0 ? url : url.slice(0, q);
    const method = req.method;
    const want = (m) => allowed(req, res, p, m);
    if (p === '/metrics') {
      if (!want('GET')) return;
      metrics.text().then((text) => {
        res.writeHead(200, { 'content-type': metrics.contentType, 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
      return;
    }
    if (p !== '/v2' && !p.startsWith('/v2/')) return next ? next() : fail(res, 404, `no endpoint ${p}`);
    let parts;
    try {
      parts = p.split('/');
      if (p.includes('%')) parts = parts.map(decodeURIComponent);
    } catch {
      return fail(res, 400, `malformed percent-encoding in ${p}`);
    }
    // ['', 'v2', ...]
    const [, , area, a, b, c] = parts;
    if (area === undefined || (area === '' && parts.length === 3)) {
      if (!want('GET')) return;
      return send(res, 200, { name: 'zgc-runtime', version: packageVersion, extensions: EXTENSIONS });
    }
    if (area === 'health' && (a === 'live' || a === 'ready') && parts.length === 4) {
      if (!want('GET')) return;
      if (a === 'live') return send(res, 200);
      const ready = !state.draining && [...repository.models.values()].every((m) => m.unloaded || m.versions.size > 0);
      return ready ? send(res, 200) : fail(res, 503, state.draining ? 'the server is shutting down' : 'a model is not loaded');
    }
    if (area === 'models' && a !== undefined && a !== '') {
      let versionText;
      let rest = parts.length === 4 ? [] : parts.slice(4);
      if (rest[0] === 'versions') {
        versionText = rest[1];
        if (versionText === undefined || versionText === '') return fail(res, 404, `no endpoint ${p}`);
        rest = rest.slice(2);
      }
      const endpoint = rest.length === 0 ? 'metadata' : rest.length === 1 ? rest[0] : null;
      if (endpoint === 'infer') {
        if (!want('POST')) return;
        state.active++;
        return void infer(req, res, a, versionText, process.hrtime.bigint());
      }
      if (endpoint === 'metadata' || endpoint === 'ready' || endpoint === 'config') {
        if (!want('GET')) return;
        let v;
        try {
          v = resolveVersion(a, versionText);
        } catch (err) {
          return fail(res, err.status, err.message);
        }
        // An isolated model is not ready while none of its instances' processes is alive.
        if (endpoint === 'ready') return v.pool.isolate === 'process' && v.pool.stats().alive === 0 ? fail(res, 503, `model "${a}" has no live instance`) : send(res, 200);
        return send(res, 200, endpoint === 'metadata' ? metadata(v) : modelConfig(v));
      }
    }
    if (area === 'repository') {
      if (a === 'index' && parts.length === 4) {
        if (!want('POST')) return;
        return repositoryRequest(req, res, 'index');
      }
      if (a === 'models' && b && (c === 'load' || c === 'unload') && parts.length === 6) {
        if (!want('POST')) return;
        return repositoryRequest(req, res, c, b);
      }
    }
    req.resume();
    return fail(res, 404, `no endpoint ${method} ${p}`);
  }

  function settle() {
    state.active--;
    if (state.active === 0 && state.idle) state.idle();
  }

  function handler(req, res, next) {
    if (state.closed) {
      req.resume();
      return fail(res, 503, 'the server is shut down', { connection: 'close' });
    }
    try {
      route(req, res, typeof next === 'function' ? next : undefined);
    } catch (err) {
      if (!res.headersSent) fail(res, 500, `internal error: ${err.message}`);
    }
  }

  handler.repository = repository;
  handler.metrics = metrics;
  /** What the gRPC service (lib/serve/grpc.js) shares with this handler. */
  handler.context = { repository, metrics, state, resolveVersion, metadata, log, maxBody: config.maxBody };
  /** Requests being answered. */
  Object.defineProperty(handler, 'active', { get: () => state.active });
  /** Threads parsing large JSON requests (started on first use). */
  Object.defineProperty(handler, 'parserThreads', { get: () => parsers.size });
  /** Readiness goes false and responses close their connections; in-flight requests go on. */
  handler.drain = () => {
    state.draining = true;
  };
  /** Resolves once no inference request is being answered. */
  handler.idle = () => (state.active === 0 ? Promise.resolve() : new Promise((resolve) => (state.idle = resolve)));
  /** Stops polling and closes every pool once their runs are done. */
  handler.close = () => {
    state.draining = true;
    state.closed = true;
    if (poller) clearInterval(poller);
    return Promise.all([repository.close(), parsers.close()]).then(() => undefined);
  };
  return handler;
}

/** Whether the request's method is `m` (HEAD counts as GET); else answers 405. */
function allowed(req, res, p, m) {
  const method = req.method;
  if (method === m || (m === 'GET' && method === 'HEAD')) return true;
  req.resume();
  fail(res, 405, `${method} ${p}: use ${m}`, { allow: m === 'GET' ? 'GET, HEAD' : m });
  return false;
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8').trim();
      if (text === '') return resolve(null);
      try {
        resolve(JSON.parse(text));
      } catch (err) {
        reject(new Error(`the request body is not JSON: ${err.message}`));
      }
    });
  });
}

/**
 * A node:http server answering the protocol for `options.models`, loaded before this returns.
 * `server.shutdown({ deadlineMs })` stops accepting, answers what was accepted, closes the
 * pools, and resolves `{ drained }` (false when the deadline cut requests off).
 */
function createServer(options = {}) {
  const handler = createHandler(options);
  const server = http.createServer((req, res) => handler(req, res));
  server.zgc = handler;
  let shutting = null;
  let grpcServer = null;
  /**
   * Serves the protocol's gRPC service too, on `port` (0: a free one) of `host`; resolves the
   * port. Same models, pools, metrics (protocol="grpc") and shutdown. Needs @grpc/grpc-js.
   */
  server.listenGrpc = (port, host = '127.0.0.1') => {
    if (grpcServer !== null) return Promise.reject(new Error('the gRPC service is already listening'));
    const { listenGrpc } = require('./grpc');
    return listenGrpc(handler, port, host, { extensions: EXTENSIONS, version: packageVersion }).then((r) => {
      grpcServer = r.server;
      return r.port;
    });
  };
  server.shutdown = (shutdownOptions = {}) => {
    refuseUnknownKeys('server.shutdown()', shutdownOptions, ['deadlineMs']);
    const { deadlineMs = options.shutdownTimeoutMs ?? 30000 } = shutdownOptions;
    if (shutting) return shutting;
    handler.drain();
    shutting = new Promise((resolve) => {
      // Connections close as their last responses are written (they go out with Connection: close).
      const closed = new Promise((r) => server.close(() => r()));
      // gRPC refuses new calls at once and finishes the ones in flight.
      const grpcClosed = grpcServer === null ? Promise.resolve() : new Promise((r) => grpcServer.tryShutdown(() => r()));
      server.closeIdleConnections();
      let timer;
      const deadline = new Promise((r) => {
        timer = setTimeout(() => r(false), deadlineMs);
        timer.unref();
      });
      Promise.race([Promise.all([handler.idle(), closed, grpcClosed]).then(() => true), deadline]).then(async (drained) => {
        clearTimeout(timer);
        const unanswered = handler.active;
        if (!drained) {
          server.closeAllConnections();
          if (grpcServer !== null) grpcServer.forceShutdown();
        }
        await handler.close();
        resolve({ drained, unanswered });
      });
    });
    return shutting;
  };
  return server;
}

module.exports = { createServer, createHandler, DEFAULTS };
