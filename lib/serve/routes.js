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
const { resolveVersion, metadata, modelConfig, notServing, controlOff, describeName, extensionsOf } = require('./context');
const { infer } = require('./infer');
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

function route(ctx, req, res, next) {
  const { restricted, metrics, state } = ctx;
  const url = req.url;
  const q = url.indexOf('?');
  const p = q < 0 ? url : url.slice(0, q);
  const method = req.method;
  // The method, then the category's header where it is restricted (--restricted-api).
  const want = (m, category) => allowed(req, res, p, m) && (restricted.size === 0 || !denied(ctx, req, res, category));
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
    return send(res, 200, { name: 'zgc-runtime', version: packageVersion, extensions: extensionsOf(ctx) });
  }
  if (area === 'health' && (a === 'live' || a === 'ready') && parts.length === 4) {
    if (!want('GET', 'health')) return;
    if (a === 'live') return send(res, 200);
    if (state.draining) return fail(res, 503, 'the server is shutting down');
    const missing = notServing(ctx);
    return missing.length === 0 ? send(res, 200) : fail(res, 503, `not every model is loaded: ${missing.map((m) => `"${m}"`).join(', ')} ${missing.length > 1 ? 'are' : 'is'} not`);
  }
  if (area === 'models' && a === 'stats' && parts.length === 4) {
    if (!want('GET', 'statistics')) return;
    return send(res, 200, modelStatistics(ctx));
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
      return void infer(ctx, req, res, a, versionText, process.hrtime.bigint());
    }
    if (endpoint === 'stats') {
      if (!want('GET', 'statistics')) return;
      try {
        return send(res, 200, modelStatistics(ctx, a, versionText));
      } catch (err) {
        return fail(res, err.status, err.message);
      }
    }
    if (endpoint === 'metadata' || endpoint === 'ready' || endpoint === 'config') {
      if (!want('GET', endpoint === 'ready' ? 'health' : endpoint === 'config' ? 'model-config' : 'metadata')) return;
      let v;
      try {
        v = resolveVersion(ctx, a, versionText);
      } catch (err) {
        return fail(res, err.status, err.message);
      }
      // An isolated model is not ready while none of its instances' processes is alive.
      if (endpoint === 'ready') return v.pool.isolate === 'process' && v.pool.stats().alive === 0 ? fail(res, 503, `model "${a}" has no live instance`) : send(res, 200);
      return send(res, 200, endpoint === 'metadata' ? metadata(v) : modelConfig(v));
    }
  }
  if (area === 'systemsharedmemory') {
    // status, unregister; region/{name}/status, register, unregister
    const named = a === 'region' && b !== undefined && b !== '' && parts.length === 6;
    const action = named ? c : parts.length === 4 ? a : undefined;
    if (action === 'status' || action === 'unregister' || (named && action === 'register')) {
      if (!want(action === 'status' ? 'GET' : 'POST', 'shared-memory')) return;
      return shmRequest(ctx, req, res, action, named ? b : undefined);
    }
  }
  if (area === 'repository') {
    if (a === 'index' && parts.length === 4) {
      if (!want('POST', 'model-repository')) return;
      return repositoryRequest(ctx, req, res, 'index');
    }
    if (a === 'models' && b && (c === 'load' || c === 'unload') && parts.length === 6) {
      if (!want('POST', 'model-repository')) return;
      return repositoryRequest(ctx, req, res, c, b);
    }
  }
  req.resume();
  return fail(res, 404, `no endpoint ${method} ${p}`);
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
      } else if (err instanceof LoadError) fail(res, 400, `failed to load model "${name}": ${err.message}`);
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
