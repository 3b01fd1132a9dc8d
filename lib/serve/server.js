'use strict';

// The Open Inference Protocol's REST endpoints (health, metadata, infer with the binary tensor
// data extension, the model repository extension) and GET /metrics, as one request handler
// that a node:http server, express or fastify can call, and createServer around it. The
// handler is a context (context.js) and the routes over it (routes.js, infer.js).

const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const { version: packageVersion } = require('../../package.json');
const { createContext, closeContext, extensionsOf } = require('./context');
const { route } = require('./routes');
const { fail } = require('./respond');

const DEFAULTS = { maxQueue: 1024, timeoutMs: 30000, pollMs: 2000, offload: 'auto', modelControl: 'none' };
const { refuseUnknownKeys } = require('../options');
const { LIMITS, MODEL_CONTROL, resolveLimits } = require('./limits');
const { parseRestricted } = require('./restricted');
const { connectionLimit, limitConnections } = require('./connections');

/** Every option createServer and createHandler take: the serve flags in camelCase, models, config and log. */
const SERVER_OPTIONS = ['models', 'config', 'poolSize', 'maxQueue', 'timeoutMs', 'pollMs', 'shutdownTimeoutMs', 'offload', 'isolate', 'modelControl', 'restrictedApi', 'allowClientShm', ...LIMITS.map((l) => l.key), 'log'];

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
  if (out.allowClientShm !== undefined && typeof out.allowClientShm !== 'boolean') throw new TypeError(`createServer option allowClientShm must be true or false, got ${JSON.stringify(out.allowClientShm)}`);
  // POSIX shared memory objects are files under /dev/shm on Linux only.
  if (out.allowClientShm === true && process.platform !== 'linux') throw new TypeError(`createServer option allowClientShm needs Linux (its /dev/shm); this is ${process.platform}`);
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

function createHandler(options) {
  const ctx = createContext(checkOptions(options));
  const { state } = ctx;

  function handler(req, res, next) {
    if (state.closed) {
      req.resume();
      return fail(res, 503, 'the server is shut down', { connection: 'close' });
    }
    try {
      route(ctx, req, res, typeof next === 'function' ? next : undefined);
    } catch (err) {
      if (!res.headersSent) fail(res, 500, `internal error: ${err.message}`);
    }
  }

  handler.repository = ctx.repository;
  handler.metrics = ctx.metrics;
  /** What the gRPC service (lib/serve/grpc.js) shares with this handler. */
  handler.context = ctx;
  handler.config = ctx.config;
  handler.budget = ctx.budget;
  /** Requests being answered. */
  Object.defineProperty(handler, 'active', { get: () => state.active });
  /** Threads parsing large JSON requests (started on first use). */
  Object.defineProperty(handler, 'parserThreads', { get: () => ctx.parsers.size });
  /** Readiness goes false and responses close their connections; in-flight requests go on. */
  handler.drain = () => {
    state.draining = true;
  };
  /** Resolves once no inference request is being answered. */
  handler.idle = () => (state.active === 0 ? Promise.resolve() : new Promise((resolve) => (state.idle = resolve)));
  /** Stops polling and closes every pool once their runs are done. */
  handler.close = () => closeContext(ctx);
  return handler;
}

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
    return listenGrpc(handler, port, host, { extensions: extensionsOf(handler.context), version: packageVersion, connections }).then((r) => {
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
