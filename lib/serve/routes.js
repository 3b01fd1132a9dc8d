'use strict';

// The REST endpoints: which request goes where (health, server and model metadata, model
// config and readiness, infer, the repository extension, /metrics), each behind its method and,
// where the API is restricted, its header.

const { RequestError } = require('./reasons');
const { LoadError } = require('./repository');
const { readBody } = require('./body');
const { bounded } = require('./elide');
const { refusal } = require('./restricted');
const { send, fail } = require('./respond');
const { resolveVersion, metadata, notServing, controlOff, describeName, extensionsOf } = require('./context');
const { tritonModelConfig } = require('./model-config');
const { infer } = require('./infer');
const { generate } = require('./generate');
const { modelStatistics } = require('./statistics');
const { version: packageVersion } = require('../../package.json');

/** The body a repository request may have (the protocol's parameters): small, whatever maxBody is. */
const CONTROL_BODY = 64 * 1024;

/** Answers 403 when `category` is restricted and the request lacks its header. */
function denied(ctx, req, res, category) {
  const why = refusal(ctx.restricted, category, (h) => req.headers[h]);
  if (why === null) return false;
  req.resume();
  fail(res, 403, why);
  return true;
}

/** GET /metrics: prom-client's text. */
function metricsRoute({ ctx, res }) {
  const { metrics } = ctx;
  metrics.text().then(
    (text) => {
      res.writeHead(200, { 'content-type': metrics.contentType, 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
    // A collector that throws must not reach unhandledRejection, which ends the process.
    (err) => fail(res, 500, `internal error: the metrics could not be collected: ${err && err.message}`),
  );
}

/** /v2/health/live and /v2/health/ready. */
function healthRoute({ ctx, res, parts, want }) {
  const [, , , a] = parts;
  if (!((a === 'live' || a === 'ready') && parts.length === 4)) return false;
  if (!want('GET', 'health')) return true;
  const missing = a === 'live' || ctx.state.draining ? [] : notServing(ctx);
  if (a === 'live') send(res, 200);
  else if (ctx.state.draining) fail(res, 503, 'the server is shutting down');
  else if (missing.length === 0) send(res, 200);
  else fail(res, 503, `not every model is loaded: ${missing.map((m) => `"${m}"`).join(', ')} ${missing.length > 1 ? 'are' : 'is'} not`);
  return true;
}

/** /v2/models/stats, and /v2/models/{m}[/versions/{v}][/infer|/stats|/ready|/config]. */
function modelsRoute({ ctx, req, res, p, parts, want }) {
  const [, , , a] = parts;
  if (a === 'stats' && parts.length === 4) {
    if (want('GET', 'statistics')) send(res, 200, modelStatistics(ctx));
    return true;
  }
  if (a === undefined || a === '') return false;
  let versionText;
  let rest = parts.length === 4 ? [] : parts.slice(4);
  if (rest[0] === 'versions') {
    versionText = rest[1];
    if (versionText === undefined || versionText === '') {
      fail(res, 404, `no endpoint ${p}`);
      return true;
    }
    rest = rest.slice(2);
  }
  if (rest.length === 2 && rest[0] === 'trace' && rest[1] === 'setting' && versionText === undefined) {
    // The restriction before the model's existence, which it must not tell.
    if (ctx.restricted.size !== 0 && denied(ctx, req, res, 'trace')) return true;
    if (!ctx.repository.models.has(a)) {
      req.resume();
      fail(res, 404, `unknown model ${describeName(a)}`);
    } else settingsRequest(ctx, req, res, p, 'trace', () => ctx.trace.get(a), (body) => ctx.trace.update(body, a));
    return true;
  }
  const endpoint = rest.length === 0 ? 'metadata' : rest.length === 1 ? rest[0] : null;
  if (endpoint === 'infer') {
    if (want('POST', 'inference')) {
      ctx.state.active++;
      infer(ctx, req, res, a, versionText, process.hrtime.bigint());
    }
    return true;
  }
  if (endpoint === 'generate' || endpoint === 'generate_stream') {
    if (want('POST', 'inference')) generate(ctx, req, res, a, versionText, endpoint === 'generate_stream');
    return true;
  }
  if (endpoint === 'stats') {
    if (!want('GET', 'statistics')) return true;
    try {
      send(res, 200, modelStatistics(ctx, a, versionText));
    } catch (err) {
      fail(res, err.status, err.message);
    }
    return true;
  }
  if (endpoint !== 'metadata' && endpoint !== 'ready' && endpoint !== 'config') return false;
  if (!want('GET', endpoint === 'ready' ? 'health' : endpoint === 'config' ? 'model-config' : 'metadata')) return true;
  let v;
  try {
    v = resolveVersion(ctx, a, versionText);
  } catch (err) {
    fail(res, err.status, err.message);
    return true;
  }
  // An isolated model is not ready while none of its instances' processes is alive.
  if (endpoint === 'ready') {
    if (v.pool.isolate === 'process' && v.pool.stats().alive === 0) fail(res, 503, `model "${a}" has no live instance`);
    else send(res, 200);
  } else send(res, 200, endpoint === 'metadata' ? metadata(v) : tritonModelConfig(v));
  return true;
}

/** /v2/systemsharedmemory: status, unregister; region/{name}/status, register, unregister. */
function sharedMemoryRoute({ ctx, req, res, parts, want }) {
  const [, , , a, b, c] = parts;
  const named = a === 'region' && b !== undefined && b !== '' && parts.length === 6;
  const action = named ? c : parts.length === 4 ? a : undefined;
  if (!(action === 'status' || action === 'unregister' || (named && action === 'register'))) return false;
  if (want(action === 'status' ? 'GET' : 'POST', 'shared-memory')) shmRequest(ctx, req, res, action, named ? b : undefined);
  return true;
}

/** /v2/repository/index, and /v2/repository/models/{m}/load|unload. */
function repositoryRoute({ ctx, req, res, parts, want }) {
  const [, , , a, b, c] = parts;
  if (a === 'index' && parts.length === 4) {
    if (want('POST', 'model-repository')) repositoryRequest(ctx, req, res, 'index');
    return true;
  }
  if (a === 'models' && b && (c === 'load' || c === 'unload') && parts.length === 6) {
    if (want('POST', 'model-repository')) repositoryRequest(ctx, req, res, c, b);
    return true;
  }
  return false;
}

/** /v2/logging: Triton's log settings. */
function loggingRoute({ ctx, req, res, p, parts }) {
  if (parts.length !== 3) return false;
  settingsRequest(ctx, req, res, p, 'logging', () => ctx.logging.get(), (body) => ctx.logging.update(body));
  return true;
}

/** /v2/trace/setting: the server's trace settings. */
function traceRoute({ ctx, req, res, p, parts }) {
  if (!(parts[3] === 'setting' && parts.length === 4)) return false;
  settingsRequest(ctx, req, res, p, 'trace', () => ctx.trace.get(), (body) => ctx.trace.update(body));
  return true;
}

/** The routes under /v2/{area}: each answers true when the path was its own. */
const AREAS = { health: healthRoute, models: modelsRoute, systemsharedmemory: sharedMemoryRoute, repository: repositoryRoute, logging: loggingRoute, trace: traceRoute };

function route(ctx, req, res, next) {
  const url = req.url;
  const q = url.indexOf('?');
  const p = q < 0 ? url : url.slice(0, q);
  // The method, then the category's header where it is restricted (--restricted-api).
  const want = (m, category) => allowed(req, res, p, m) && (ctx.restricted.size === 0 || !denied(ctx, req, res, category));
  if (p === '/metrics') {
    if (want('GET', 'metrics')) metricsRoute({ ctx, res });
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
  // ['', 'v2', area, ...]
  const area = parts[2];
  if (area === undefined || (area === '' && parts.length === 3)) {
    if (want('GET', 'metadata')) send(res, 200, { name: 'zgc-runtime', version: packageVersion, extensions: extensionsOf(ctx) });
    return;
  }
  const handler = Object.hasOwn(AREAS, area) ? AREAS[area] : undefined;
  if (handler !== undefined && handler({ ctx, req, res, p, parts, want })) return;
  req.resume();
  return fail(res, 404, `no endpoint ${req.method} ${p}`);
}

/** The repository extension: the index, and load and unload when model control is explicit. */
function repositoryRequest(ctx, req, res, action, name) {
  const { repository, budget, log } = ctx;
  const claim = { bytes: 0 };
  const type = req.headers['content-type'];
  if (type !== undefined && !/^application\/json\s*(;|$)/i.test(type)) {
    req.resume();
    return fail(res, 415, `the repository API takes a JSON body (Content-Type: application/json), got Content-Type ${JSON.stringify(bounded(type).slice(0, 80))}`);
  }
  const off = action === 'index' ? null : controlOff(ctx);
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
      done.catch(() => {});
      // A load with warmup answers once the model serves, or its warmup failed.
      return Promise.resolve(done.warm).then(() => {
        log(`model "${name}" ${action === 'load' ? 'loaded' : 'unloaded'} by request`);
        send(res, 200);
      });
    })
    .catch((err) => {
      if (err instanceof RequestError) {
        if (err.status !== 0) fail(res, err.status, err.message, err.headers);
      } else if (err instanceof LoadError) {
        log(`failed to load model "${name}" by request: ${err.message}`, 'error');
        fail(res, 400, `failed to load model "${name}": ${err.message}`);
      }
      else fail(res, 500, `internal error: ${err && err.message}`);
    })
    .finally(() => budget.release(claim.bytes));
}

/** The shared memory extension: a region's register (its JSON body), status and unregister. */
function shmRequest(ctx, req, res, action, name) {
  const { shm, budget } = ctx;
  if (action !== 'register') {
    req.resume();
    try {
      if (action === 'status') return send(res, 200, shm.status(name));
      shm.unregister(name);
      return send(res, 200);
    } catch (err) {
      return fail(res, err.status, err.message);
    }
  }
  const claim = { bytes: 0 };
  readBody(req, { maxBody: CONTROL_BODY, budget, claim })
    .then((bytes) => {
      const body = parseControlBody(bytes) ?? {};
      shm.register(name, body.key, body.offset ?? 0, body.byte_size);
      return send(res, 200);
    })
    .catch((err) => {
      if (err instanceof RequestError) {
        if (err.status !== 0) fail(res, err.status, err.message, err.headers);
      } else fail(res, 500, `internal error: ${err && err.message}`);
    })
    .finally(() => budget.release(claim.bytes));
}

/**
 * Settings (logging, trace): GET answers them; POST changes them by its JSON body, all or
 * none, and answers them as they are then.
 */
function settingsRequest(ctx, req, res, p, category, get, update) {
  const method = req.method;
  if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') {
    req.resume();
    return fail(res, 405, `${method} ${p}: use GET or POST`, { allow: 'GET, HEAD, POST' });
  }
  if (ctx.restricted.size !== 0 && denied(ctx, req, res, category)) return;
  if (method !== 'POST') {
    req.resume();
    return send(res, 200, get());
  }
  const claim = { bytes: 0 };
  readBody(req, { maxBody: CONTROL_BODY, budget: ctx.budget, claim })
    .then((bytes) => send(res, 200, update(parseControlBody(bytes) ?? {})))
    .catch((err) => {
      if (err instanceof RequestError) {
        if (err.status !== 0) fail(res, err.status, err.message, err.headers);
      } else fail(res, 500, `internal error: ${err && err.message}`);
    })
    .finally(() => ctx.budget.release(claim.bytes));
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
    throw new RequestError('bad_request', `the request body is not JSON: ${err.message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new RequestError('bad_request', 'the request body must be a JSON object');
  return body;
}

module.exports = { route };
