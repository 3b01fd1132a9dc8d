'use strict';

// What a server holds while it serves a model repository: its settings, the repository and
// its pools, the metrics, the in-flight budget, the parser threads and its state. Built once
// by createHandler and handed, explicitly, to the routes (routes.js), the inference path
// (infer.js) and the gRPC service (grpc.js); the functions here are what they share.

const { ModelRepository } = require('./repository');
const { RequestError } = require('./reasons');
const { parserPool } = require('./parsers');
const { createMetrics } = require('./metrics');
const { createBudget } = require('./body');
const { createRegions } = require('./shm');
const { Logging } = require('./logging');
const { TraceSettings } = require('./trace-settings');

/** Loads every model of `config.models` (checked options) and starts what serving them needs. */
function createContext(config) {
  const defaults = { poolSize: config.poolSize, maxQueue: config.maxQueue, timeoutMs: config.timeoutMs, offload: config.offload, isolate: config.isolate };
  let metrics;
  const logging = new Logging(config.log);
  // An info line unless `level` says otherwise ('warning', 'error'), as the logging settings allow.
  const log = (line, level = 'info') => logging.write(level, line);
  const repository = new ModelRepository(config.models, defaults, { onRetired: (v) => metrics.retire(v), log });
  metrics = createMetrics(repository);
  repository.loadAll();
  for (const v of repository.served()) log(`model "${v.model.name}" version ${v.version} ready (${v.pool.size} instances)`);
  const budget = createBudget(config.maxInflightBytes);
  metrics.watchBudget(budget);
  const shm = createRegions({ allowed: config.allowClientShm === true });
  metrics.watchRegions(shm);
  // Started with the first large JSON request.
  const parsers = parserPool({ timeoutMs: config.parseTimeoutMs });
  const ctx = {
    config,
    repository,
    metrics,
    log,
    logging,
    trace: new TraceSettings(),
    restricted: config.restricted,
    /** Inference requests being answered; draining (readiness false, connections close); closed. */
    state: { active: 0, draining: false, closed: false, idle: null },
    budget,
    shm,
    parsers,
    poller: null,
  };
  metrics.watchState(ctx.state);
  if (config.modelControl === 'poll' && config.pollMs > 0) {
    ctx.poller = setInterval(() => {
      for (const r of repository.poll()) {
        if (r.ok) log(`model "${r.name}" reloaded`);
        else log(`model "${r.name}" failed to reload, still serving what it served: ${r.reason}`, 'warning');
      }
    }, config.pollMs);
    ctx.poller.unref();
  }
  return ctx;
}

function resolveVersion(ctx, name, versionText) {
  const { repository } = ctx;
  const model = repository.models.get(name);
  // Not looked for on disk: a client naming models at will must not make the server read directories.
  if (model === undefined) throw new RequestError('not_found', `unknown model ${describeName(name)}`);
  if (model.versions.size === 0) throw new RequestError('not_ready', `model "${name}" is not ready (${model.state}: ${model.reason})`);
  if (versionText === undefined) return model.latest;
  const v = model.versions.get(versionText);
  if (v === undefined) throw new RequestError('not_found', `model "${name}" has no version "${versionText}" being served (versions: ${[...model.versions.keys()].join(', ')})`);
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

/**
 * Models that were loaded (at start, by polling or by request) and serve no version now:
 * readiness follows them, so that a failed or unloaded model takes the server out of rotation.
 */
function notServing(ctx) {
  const { repository } = ctx;
  const out = [];
  for (const m of repository.models.values()) if (m.stamp !== undefined && m.versions.size === 0) out.push(m.name);
  return out;
}

/** Load and unload's refusal (REST 403, gRPC PERMISSION_DENIED) unless model control is explicit; else null. */
function controlOff(ctx) {
  const { config } = ctx;
  if (config.modelControl === 'explicit') return null;
  return new RequestError('forbidden', `loading and unloading models is off: the server runs with model control "${config.modelControl}" (start it with --model-control explicit to allow it)`);
}

function settle(ctx) {
  const { state } = ctx;
  state.active--;
  if (state.active === 0 && state.idle) state.idle();
}

/** At verbose level 1: one line per inference request answered. */
function logRequest(ctx, name, v, outcome, seconds, protocol) {
  ctx.logging.verbose(1, `infer ${JSON.stringify(name).slice(0, 200)}${v === undefined ? '' : ` version ${v.version}`} (${protocol}): ${outcome} in ${(seconds * 1000).toFixed(3)} ms`);
}

/** Stops polling and closes every pool once their runs are done, and the parser threads. */
function closeContext(ctx) {
  ctx.state.draining = true;
  ctx.state.closed = true;
  if (ctx.poller) clearInterval(ctx.poller);
  ctx.shm.close();
  ctx.logging.close();
  return Promise.all([ctx.repository.close(), ctx.parsers.close()]).then(() => undefined);
}

/** A model name from a URL or message, quoted and cut short. */
const describeName = (name) => JSON.stringify(typeof name === 'string' && name.length > 100 ? `${name.slice(0, 100)}…` : name);

/** The protocol extensions the server offers, which its metadata lists (REST and gRPC). */
/**
 * The server metadata's extensions: Triton's names (2.51 lists them in this order) for what
 * serve does as Triton does, and no others. Metrics and dynamic batching are no protocol
 * extensions; the trace and logging extensions are not Triton's yet.
 */
function extensionsOf(ctx) {
  const list = ['classification', 'sequence', 'model_repository', 'schedule_policy', 'model_configuration'];
  if (ctx.shm.allowed) list.push('system_shared_memory');
  list.push('binary_tensor_data', 'statistics', 'trace', 'logging');
  return list;
}

module.exports = { extensionsOf, createContext, resolveVersion, metadata, notServing, controlOff, settle, closeContext, describeName, logRequest };
