'use strict';

// The Open Inference Protocol's REST endpoints (health, metadata, infer with the binary tensor
// data extension, the model repository extension) and GET /metrics, as one request handler
// that a node:http server, express or fastify can call.

const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const { ModelRepository, LoadError } = require('./repository');
const { RequestError, parseInfer, formatInfer } = require('./protocol');
const { parserPool, OFF_THREAD_BYTES } = require('./parsers');
const { createMetrics } = require('./metrics');
const { outcomeOf } = require('./outcomes');
const { runNow } = require('../pool');
const { version: packageVersion } = require('../../package.json');

const DEFAULTS = { maxQueue: 1024, timeoutMs: 30000, pollMs: 2000, offload: 'auto', modelControl: 'none' };
const EXTENSIONS = ['binary_tensor_data', 'model_repository', 'metrics'];
const { refuseUnknownKeys } = require('../options');
const { LIMITS, MODEL_CONTROL, resolveLimits } = require('./limits');
const { readBody, createBudget } = require('./body');
const { bounded } = require('./elide');
const { parseRestricted, refusal } = require('./restricted');
const { connectionLimit, limitConnections } = require('./connections');

const JSON_TYPE = 'application/json';
const EMPTY = Buffer.alloc(0);
/** The body a repository request may have (the protocol's parameters): small, whatever maxBody is. */
const CONTROL_BODY = 64 * 1024;

/** Statuses of run failures that are the request's fault, not the model's. */

/** Every option createServer and createHandler take: the serve flags in camelCase, models, config and log. */
const SERVER_OPTIONS = ['models', 'config', 'poolSize', 'maxQueue', 'timeoutMs', 'pollMs', 'shutdownTimeoutMs', 'offload', 'isolate', 'modelControl', 'restrictedApi', ...LIMITS.map((l) => l.key), 'log'];

/** Server settings from a JSON file: the createServer options but log (options given in code win). */
function readConfig(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new TypeError(`the server config ${file} cannot be read: ${err.code || err.message}`);
  }
  let config;
  try {
    config = JSON.parse(text);
  } catch (err) {
    throw new TypeError(`the server config ${file} is not JSON: ${err.message}`);
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new TypeError(`the server config ${file} must hold a JSON object`);
  refuseUnknownKeys(`the server config ${file}`, config, SERVER_OPTIONS.filter((k) => k !== 'log' && k !== 'config'));
  return config;
}

function checkOptions(given) {
  if (given === null || typeof given !== 'object') throw new TypeError('createServer options must be an object');
  refuseUnknownKeys('createServer()', given, SERVER_OPTIONS);
  const options = given.config === undefined ? given : { ...readConfig(given.config), ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) };
  const models = typeof options.models === 'string' ? [options.models] : options.models;
  if (!Array.isArray(models) || models.length === 0) throw new TypeError('createServer needs "models": a repository directory, name=artifact.so or artifact.so (or an array of them)');
  const out = { ...DEFAULTS, poolSize: os.availableParallelism(), ...options, models, ...resolveLimits(options, (l) => `createServer option ${l.key}`) };
  if (out.isolate !== undefined && out.isolate !== 'none' && out.isolate !== 'process') throw new TypeError(`createServer option isolate must be 'none' or 'process', got ${JSON.stringify(out.isolate)}`);
  // Checked before any model loads.
  out.restricted = parseRestricted(out.restrictedApi, 'createServer option restrictedApi');
  if (!MODEL_CONTROL.includes(out.modelControl)) throw new TypeError(`createServer option modelControl must be ${MODEL_CONTROL.map((m) => `'${m}'`).join(', ')}, got ${JSON.stringify(out.modelControl)}`);
  for (const key of ['poolSize', 'maxQueue', 'timeoutMs', 'pollMs', 'shutdownTimeoutMs']) {
    if (out[key] === undefined) continue;
    const min = key === 'poolSize' ? 1 : 0;
    if (!Number.isSafeInteger(out[key]) || out[key] < min) throw new RangeError(`createServer option ${key} must be an integer >= ${min}, got ${String(out[key])}`);
  }
  return out;
}

function send(res, status, body, headers) {
  const text = body === undefined ? EMPTY : JSON.stringify(body.error === undefined ? body : { ...body, error: bounded(body.error) });
  const h = { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) };
  if (headers) Object.assign(h, headers);
  res.writeHead(status, h);
  res.end(text);
  // A body refused midway is not read on (lib/serve/body.js pauses it): once the answer is out,
  // the connection goes, a moment later, so that the client can read the answer first.
  if (h.connection === 'close' && res.req && !res.req.complete) {
    res.once('finish', () => {
      const socket = res.socket;
      if (socket) setTimeout(() => socket.destroy(), LINGER_MS).unref();
    });
  }
}

/** How long a connection whose body was refused stays open after its answer. */
const LINGER_MS = 200;

const fail = (res, status, message, headers) => send(res, status, { error: message }, headers);

function createHandler(options) {
  const config = checkOptions(options);
  const defaults = { poolSize: config.poolSize, maxQueue: config.maxQueue, timeoutMs: config.timeoutMs, offload: config.offload, isolate: config.isolate };
  let metrics;
  const repository = new ModelRepository(config.models, defaults, { onRetired: (v) => metrics.retire(v) });
  metrics = createMetrics(repository);
  const log = config.log === undefined ? () => {} : config.log;
  repository.loadAll();
  for (const v of repository.served()) log(`model "${v.model.name}" version ${v.version} ready (${v.pool.size} instances)`);

  const { restricted } = config;
  /** Answers 403 when `category` is restricted and the request lacks its header. */
  const denied = (req, res, category) => {
    const why = refusal(restricted, category, (h) => req.headers[h]);
    if (why === null) return false;
    req.resume();
    fail(res, 403, why);
    return true;
  };
  const state = { active: 0, draining: false, closed: false, idle: null };
  const budget = createBudget(config.maxInflightBytes);
  metrics.watchBudget(budget);
  // Started with the first large JSON request.
  const parsers = parserPool({ timeoutMs: config.parseTimeoutMs });
  let poller = null;
  if (config.modelControl === 'poll' && config.pollMs > 0) {
    poller = setInterval(() => {
      for (const r of repository.poll()) log(r.ok ? `model "${r.name}" reloaded` : `model "${r.name}" failed to reload, still serving what it served: ${r.reason}`);
    }, config.pollMs);
    poller.unref();
  }

  function resolveVersion(name, versionText) {
    const model = repository.models.get(name);
    // Not looked for on disk: a client naming models at will must not make the server read directories.
    if (model === undefined) throw new RequestError(404, `unknown model ${describeName(name)}`);
    if (model.versions.size === 0) throw new RequestError(400, `model "${name}" is not ready (${model.state}: ${model.reason})`, undefined, 'not_ready');
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
    // The body bytes this request holds against the budget, given back once it is answered.
    const claim = { bytes: 0 };
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
        headerLength = /^[0-9]{1,15}$/.test(lengthHeader) ? Number(lengthHeader) : NaN;
        if (Number.isNaN(headerLength)) throw new RequestError(400, `Inference-Header-Content-Length must be decimal digits (a byte count), got ${JSON.stringify(bounded(lengthHeader).slice(0, 40))}`);
      }
      const body = await readBody(req, { maxBody: config.maxBody, budget, claim, headerLength });
      if (headerLength !== undefined && headerLength > body.length) throw new RequestError(400, `Inference-Header-Content-Length is ${headerLength}, the body has only ${body.length} bytes`);
      // Looked up again: a reload may have switched versions while the body arrived.
      v = resolveVersion(name, versionText);
      const jsonLength = headerLength === undefined ? body.length : headerLength;
      // A large JSON header is parsed on a parser thread, so that other requests are answered meanwhile.
      const request = jsonLength >= OFF_THREAD_BYTES ? await parsers.parse(v.signature, body, jsonLength) : parseInfer(v.signature, body, jsonLength);
      if (answered) return;
      // A run the pool does inline is over before this returns: no timer, no signal, no
      // cancel on close, no promise (a signal's listeners alone cost more than a tiny run).
      let tensors = runNow(v.pool, request.inputs);
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
      const o = outcomeOf(err, name, v);
      // A run the server's own timer gave up on stays a timeout, whatever ends it after.
      if (outcome !== 'timeout') outcome = o.outcome;
      if (o.http !== 0) answer(o.http, o.message, o.headers, o.code);
    } finally {
      budget.release(claim.bytes);
      // Names that are no model share one label: a client must not grow the series at will.
      const label = v !== undefined || repository.models.has(name) ? name : '_unknown';
      metrics.count(label, v === undefined ? '' : v.version, outcome, Number(process.hrtime.bigint() - started) / 1e9, 'rest');
      // Answered (or given up by its client): the response is written, the run is over.
      settle();
    }
  }

  /** The repository extension: the index, and load and unload when model control is explicit. */
  function repositoryRequest(req, res, action, name) {
    const claim = { bytes: 0 };
    const type = req.headers['content-type'];
    if (type !== undefined && !/^application\/json\s*(;|$)/i.test(type)) {
      req.resume();
      return fail(res, 415, `the repository API takes a JSON body (Content-Type: application/json), got Content-Type ${JSON.stringify(bounded(type).slice(0, 80))}`);
    }
    const off = action === 'index' ? null : controlOff();
    if (off !== null) {
      req.resume();
      return fail(res, off.status, off.message);
    }
    readBody(req, { maxBody: CONTROL_BODY, budget, claim })
      .then((bytes) => {
        const body = parseControlBody(bytes);
        if (action === 'index') return send(res, 200, repository.index(body !== null && body.ready === true));
        if (!repository.models.has(name)) repository.scan();
        if (!repository.models.has(name)) return fail(res, 404, `unknown model ${describeName(name)}`);
        const done = action === 'load' ? repository.load(name) : repository.unload(name);
        log(`model "${name}" ${action === 'load' ? 'loaded' : 'unloaded'} by request`);
        done.catch(() => {});
        return send(res, 200);
      })
      .catch((err) => {
        if (err instanceof RequestError) {
          if (err.status !== 0) fail(res, err.status, err.message, err.headers);
        } else if (err instanceof LoadError) fail(res, 400, `failed to load model "${name}": ${err.message}`);
        else fail(res, 500, `internal error: ${err && err.message}`);
      })
      .finally(() => budget.release(claim.bytes));
  }

  function route(req, res, next) {
    const url = req.url;
    const q = url.indexOf('?');
    const p = q < 0 ? url : url.slice(0, q);
    const method = req.method;
    // The method, then the category's header where it is restricted (--restricted-api).
    const want = (m, category) => allowed(req, res, p, m) && (restricted.size === 0 || !denied(req, res, category));
    if (p === '/metrics') {
      if (!want('GET', 'metrics')) return;
      metrics.text().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.contentType, 'content-length': Buffer.byteLength(text) });
          res.end(text);
        },
        // A collector that throws must not reach unhandledRejection, which ends the process.
        (err) => fail(res, 500, `internal error: the metrics could not be collected: ${err && err.message}`),
      );
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
      if (!want('GET', 'metadata')) return;
      return send(res, 200, { name: 'zgc-runtime', version: packageVersion, extensions: EXTENSIONS });
    }
    if (area === 'health' && (a === 'live' || a === 'ready') && parts.length === 4) {
      if (!want('GET', 'health')) return;
      if (a === 'live') return send(res, 200);
      if (state.draining) return fail(res, 503, 'the server is shutting down');
      const missing = notServing();
      return missing.length === 0 ? send(res, 200) : fail(res, 503, `not every model is loaded: ${missing.map((m) => `"${m}"`).join(', ')} ${missing.length > 1 ? 'are' : 'is'} not`);
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
        if (!want('POST', 'inference')) return;
        state.active++;
        return void infer(req, res, a, versionText, process.hrtime.bigint());
      }
      if (endpoint === 'metadata' || endpoint === 'ready' || endpoint === 'config') {
        if (!want('GET', endpoint === 'ready' ? 'health' : endpoint === 'config' ? 'model-config' : 'metadata')) return;
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
        if (!want('POST', 'model-repository')) return;
        return repositoryRequest(req, res, 'index');
      }
      if (a === 'models' && b && (c === 'load' || c === 'unload') && parts.length === 6) {
        if (!want('POST', 'model-repository')) return;
        return repositoryRequest(req, res, c, b);
      }
    }
    req.resume();
    return fail(res, 404, `no endpoint ${method} ${p}`);
  }

  /**
   * Models that were loaded (at start, by polling or by request) and serve no version now:
   * readiness follows them, so that a failed or unloaded model takes the server out of rotation.
   */
  function notServing() {
    const out = [];
    for (const m of repository.models.values()) if (m.stamp !== undefined && m.versions.size === 0) out.push(m.name);
    return out;
  }

  /** Load and unload's refusal (REST 403, gRPC PERMISSION_DENIED) unless model control is explicit; else null. */
  function controlOff() {
    if (config.modelControl === 'explicit') return null;
    return new RequestError(403, `loading and unloading models is off: the server runs with model control "${config.modelControl}" (start it with --model-control explicit to allow it)`);
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
  handler.context = { repository, metrics, state, resolveVersion, metadata, log, notServing, controlOff, budget, parsers, config, restricted };
  handler.config = config;
  handler.budget = budget;
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

/** A repository request's JSON body: null when empty, else an object. */
function parseControlBody(bytes) {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8').trim();
  if (text === '') return null;
  let body;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new RequestError(400, `the request body is not JSON: ${err.message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new RequestError(400, 'the request body must be a JSON object');
  return body;
}

/** A model name from a URL or message, quoted and cut short. */
const describeName = (name) => JSON.stringify(typeof name === 'string' && name.length > 100 ? `${name.slice(0, 100)}…` : name);

/**
 * A node:http server answering the protocol for `options.models`, loaded before this returns.
 * `server.shutdown({ deadlineMs })` stops accepting, answers what was accepted, closes the
 * pools, and resolves `{ drained }` (false when the deadline cut requests off).
 */
function createServer(options = {}) {
  const handler = createHandler(options);
  const { config } = handler;
  const connections = connectionLimit(config.maxConnections, handler.metrics);
  const server = http.createServer(
    {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      // Node checks the two timeouts above this often (30 s by default, so a slow client got its 408 after 78 s).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(config.headersTimeoutMs / 4))),
    },
    (req, res) => {
      connections.request(req.socket, req, res);
      handler(req, res);
    },
  );
  limitConnections(server, connections);
  server.connectionCount = () => connections.size;
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
    return listenGrpc(handler, port, host, { extensions: EXTENSIONS, version: packageVersion, connections }).then((r) => {
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
