'use strict';

// Models the server serves: a repository in Triton's layout (<repo>/<name>/<version>/model.so
// with <repo>/<name>/config.json), or single artifacts given as name=path. Each served version
// is a pool whose instances got their PARAMETER files at start. Loading again (by request, or
// when polling sees a changed file) builds the new pools first, switches, then drains and
// closes the old ones, so no request is dropped.

const fs = require('node:fs');
const path = require('node:path');
const { createPool } = require('../pool');
const { parseNpy } = require('../npy');
const { signatureOf } = require('./signature');
const { batchedPool } = require('./batching');
const { Sequences } = require('./sequences');
const { warmupPlan, warmUp } = require('./warmup');
const { checkDeclared, ConfigError } = require('./triton-config');
const { LoadError, configFile, readConfig, settle } = require('./model-settings');
const { checkDecoupledModel } = require('./decoupled');

const NAME = /^[A-Za-z0-9_.-]+$/;
const VERSION = /^[1-9][0-9]*$|^0$/;


/** A model: where it comes from, its config, and the versions being served. */
class Model {
  constructor(name, origin) {
    this.name = name;
    /** `{ dir }` for a repository model, `{ file }` for a single artifact. */
    this.origin = origin;
    /** version string -> Version, the ones serving now. */
    this.versions = new Map();
    this.reason = 'not loaded';
    /** What the files looked like at the last load (or failed load), for polling. */
    this.stamp = null;
    /** Unloaded by request: polling leaves it unloaded. */
    this.unloaded = false;
    /** The load whose versions warm up now (a newer load or an unload replaces it). */
    this.warming = null;
  }

  /** READY while any version serves: a failed reload leaves the old ones serving. */
  get state() {
    if (this.versions.size > 0) return 'READY';
    return this.warming !== null ? 'LOADING' : 'UNAVAILABLE';
  }

  get latest() {
    let best;
    for (const v of this.versions.values()) if (best === undefined || Number(v.version) > Number(best.version)) best = v;
    return best;
  }
}

/** One served version: its pool and what the protocol shows of it. */
class Version {
  constructor(model, version, pool, signature, config) {
    this.model = model;
    this.version = version;
    this.pool = pool;
    this.signature = signature;
    this.config = config;
    /** Its active client sequences, with config.json "sequenceBatching" (lib/serve/sequences.js). */
    this.sequences = undefined;
  }
}

function statKey(file) {
  try {
    const st = fs.statSync(file);
    return `${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return 'missing';
  }
}

/** Version directories holding a model.so, and which of them the policy serves. */
function versionsOf(model, config) {
  if (model.origin.file) return [{ version: '1', file: model.origin.file, dir: path.dirname(model.origin.file) }];
  let entries;
  try {
    entries = fs.readdirSync(model.origin.dir, { withFileTypes: true });
  } catch (err) {
    throw new LoadError(`cannot read model directory ${model.origin.dir}: ${err.code || err.message}`);
  }
  const found = entries
    .filter((e) => e.isDirectory() && VERSION.test(e.name) && fs.existsSync(path.join(model.origin.dir, e.name, 'model.so')))
    .map((e) => ({ version: e.name, file: path.join(model.origin.dir, e.name, 'model.so'), dir: path.join(model.origin.dir, e.name) }))
    .sort((a, b) => Number(a.version) - Number(b.version));
  if (found.length === 0) throw new LoadError(`${model.origin.dir} has no version directory with a model.so (<name>/<version>/model.so)`);
  const policy = config.versionPolicy;
  if (policy === 'latest') return found.slice(-1);
  if (policy === 'all') return found;
  const chosen = found.filter((f) => policy.specific.includes(Number(f.version)));
  if (chosen.length === 0) throw new LoadError(`${model.origin.dir}: none of versions ${policy.specific.join(', ')} has a model.so`);
  return chosen;
}

/** A parameter file, found next to the version's model.so first, then in the model directory. */
function parameterFile(model, where, file) {
  const candidates = path.isAbsolute(file) ? [file] : [path.join(where.dir, file), ...(model.origin.dir ? [path.join(model.origin.dir, file)] : [])];
  for (const c of candidates) if (fs.existsSync(c)) return c;
  throw new LoadError(`parameter file ${JSON.stringify(file)} not found (looked in ${candidates.join(', ')})`);
}

/** The classification labels of each output config "labels" names: its file's lines, in index order. */
function labelsOf(model, where, config, signature) {
  const out = new Map();
  for (const [name, file] of Object.entries(config.labels)) {
    if (!signature.outputByName.has(name)) throw new LoadError(`config "labels" names "${name}", which is no output (outputs: ${signature.outputs.map((o) => o.name).join(', ')})`);
    const found = parameterFile(model, where, file);
    let text;
    try {
      text = fs.readFileSync(found, 'utf8');
    } catch (err) {
      throw new LoadError(`labels file ${found} cannot be read: ${err.code || err.message}`);
    }
    const lines = text.split(/\r?\n/);
    if (lines[lines.length - 1] === '') lines.pop();
    out.set(name, lines);
  }
  return out;
}

/** Reads each PARAMETER file once and says how each instance takes it: `set` (logical values) or `bind` (physical storage). */
function parametersOf(model, where, config, sources) {
  const plan = [];
  for (const [name, spec] of Object.entries(config.parameters)) {
    const source = sources.find((s) => s.name === name);
    if (!source) throw new LoadError(`config "parameters" names "${name}", which the artifact has no source of (its sources: ${sources.map((s) => s.name).join(', ')})`);
    if (source.kind === 'input') throw new LoadError(`config "parameters" names "${name}", an INPUT: inputs come with each request`);
    if (source.binding === 'embedded') throw new LoadError(`config "parameters" names "${name}", an EMBEDDED source: its values are in the library`);
    const entry = typeof spec === 'string' ? { file: spec } : spec;
    if (entry === null || typeof entry !== 'object' || typeof entry.file !== 'string' || (entry.bind !== undefined && typeof entry.bind !== 'boolean')) {
      throw new LoadError(`config "parameters"."${name}" must be "file.npy" or { "file": "file.npy", "bind": true|false }`);
    }
    if (entry.bind && source.binding !== 'bound') throw new LoadError(`config "parameters"."${name}": "bind" needs a BOUND source, "${name}" is ${source.binding.toUpperCase()}`);
    const file = parameterFile(model, where, entry.file);
    let npy;
    try {
      npy = parseNpy(fs.readFileSync(file), file);
    } catch (err) {
      throw new LoadError(`parameter "${name}": ${err.message}`);
    }
    if (npy.dtype !== source.dtype) throw new LoadError(`parameter "${name}": ${file} holds ${npy.dtype}, the source is ${source.dtype}`);
    const count = npy.shape.reduce((a, b) => a * b, 1);
    if (entry.bind) {
      if (count !== source.elementCount) throw new LoadError(`parameter "${name}": ${file} has ${count} elements; binding takes the source's physical storage of ${source.elementCount}`);
    } else if (npy.shape.join() !== source.shape.join()) {
      throw new LoadError(`parameter "${name}": ${file} has shape (${npy.shape.join(', ')}), the source has shape (${source.shape.join(', ')})`);
    }
    plan.push({ name, bind: Boolean(entry.bind), data: npy.data, file });
  }
  // A sequence model's STATE is each sequence's own (lib/serve/sequences.js), and a decoupled
  // model's each request's own (decoupled.js), not the instance's.
  const own = (s) => !(s.kind === 'state' && (config.sequenceBatching !== undefined || config.decoupled !== undefined));
  const missing = sources.filter((s) => s.kind !== 'input' && s.binding === 'bound' && own(s) && !plan.some((p) => p.name === s.name));
  if (missing.length > 0) {
    const s = missing[0];
    let message = `source "${s.name}" is a BOUND ${s.kind.toUpperCase()} and config "parameters" gives it no file`;
    if (model.origin.file) {
      // A lone artifact has no config to give it one: say which layout does.
      const files = Object.fromEntries(missing.map((m) => [m.name, `${m.name}.npy`]));
      message +=
        `. A lone artifact has no config: serve it from a model directory, ${model.name}/1/model.so (a copy of ${path.basename(model.origin.file)})` +
        ` with ${model.name}/config.json ${JSON.stringify({ parameters: files })} and the .npy files beside it, then \`zgc-runtime serve ${model.name}=<that directory>\` (docs/serving.md)`;
    }
    throw new LoadError(message);
  }
  return plan;
}

/** "sequenceBatching"."initialState": each STATE source's values at a sequence's start, from .npy files found as parameter files are. */
function initialStateOf(model, where, settings, sources) {
  const out = {};
  for (const [name, file] of Object.entries(settings.initialState)) {
    const source = sources.find((s) => s.name === name);
    if (source === undefined || source.kind !== 'state') throw new LoadError(`"sequenceBatching" "initialState" names "${name}", which is no STATE source`);
    const path_ = parameterFile(model, where, file);
    let npy;
    try {
      npy = parseNpy(fs.readFileSync(path_), path_);
    } catch (err) {
      throw new LoadError(`"sequenceBatching" initial state "${name}": ${err.message}`);
    }
    if (npy.dtype !== source.dtype || npy.shape.join() !== source.shape.join()) {
      throw new LoadError(`"sequenceBatching" initial state "${name}": ${path_} holds ${npy.dtype} of shape (${npy.shape.join(', ')}), the source is ${source.dtype} of shape (${source.shape.join(', ')})`);
    }
    out[name] = npy.data;
  }
  return out;
}

const maxBatchOf = (batching) => Math.max(...Object.keys(batching.variants).map(Number));

/** A batch variant's file, beside the version's model.so. */
function variantFile(where, file) {
  const full = path.join(where.dir, file);
  if (!fs.existsSync(full)) throw new LoadError(`"dynamicBatching" names ${file}, which is not in ${where.dir}`);
  return full;
}

/** Builds one version's pool (a batcher's, with "dynamicBatching"); its instances take the parameters in `setup`. */
function openVersion(model, where, config) {
  const isolated = config.isolate === 'process';
  let plan;
  let signature;
  let warmup;
  // In-process, loaded from its bytes: each load is a library of its own (a path already
  // loaded would be handed back by dlopen), and rewriting model.so in place cannot touch a
  // running one. Isolated, each instance's process loads the file (and checks, when it
  // starts again, that what it finds is the same artifact).
  const batching = config.dynamicBatching;
  const options = {
    maxQueue: config.maxQueue,
    offload: config.offload,
    f16: 'bits',
    ...(isolated ? { isolate: 'process', timeoutMs: config.timeoutMs > 0 ? config.timeoutMs : undefined, maxMemoryMb: config.maxMemoryMb } : {}),
    setup(rt) {
      if (plan === undefined) {
        plan = parametersOf(model, where, config, rt.sources);
        if (config.outputs !== undefined && config.outputs.length !== rt.outputs.length) {
          throw new LoadError(`config "outputs" names ${config.outputs.length} outputs, the artifact has ${rt.outputs.length}`);
        }
        if (config.outputs !== undefined && new Set(config.outputs).size !== config.outputs.length) throw new LoadError('config "outputs" names an output twice');
        signature = signatureOf(rt, config.outputs, batching === undefined ? undefined : maxBatchOf(batching));
        if (config.declared !== undefined) {
          try {
            checkDeclared(config.declared, signature);
          } catch (err) {
            throw err instanceof ConfigError ? new LoadError(`${path.join(model.origin.dir, 'config.pbtxt')}: ${err.message}`) : err;
          }
        }
        if (config.decoupled !== undefined) checkDecoupledModel(config.decoupled, signature, rt);
        // Kept off the portable signature that parser threads are sent.
        signature.labels = labelsOf(model, where, config, signature);
        warmup = warmupPlan(config.warmup, signature, (file) => parameterFile(model, where, file));
      }
      // Bound storage is shared by the instances: the artifact reads it and never writes it.
      for (const p of plan) {
        // An isolated instance reads bound parameters in place from the shared region.
        if (p.bind && isolated) rt.storage(p.name).set(p.data);
        else (p.bind ? rt.bind : rt.set).call(rt, p.name, p.data);
      }
    },
  };
  const read = (file) => (isolated ? file : fs.readFileSync(file));
  const pool =
    batching === undefined
      ? createPool(read(where.file), { size: config.instances, ...options })
      : // The batcher's queue holds requests (at least one: each waits there a moment), its variants' pools only batches.
        batchedPool(batching, (file) => read(variantFile(where, file)), { ...options, instances: config.instances, maxQueue: Math.max(1, config.maxQueue) });
  const version = new Version(model, where.version, pool, signature, config);
  if (config.sequenceBatching !== undefined) {
    try {
      const initial = initialStateOf(model, where, config.sequenceBatching, pool.runtimes[0].sources);
      version.sequences = new Sequences(pool, config.sequenceBatching, model.name, pool.runtimes[0], initial);
    } catch (err) {
      pool.close();
      throw new LoadError(`"sequenceBatching": ${err.message}`);
    }
  }
  version.warmup = warmup;
  return version;
}

class ModelRepository {
  /**
   * `models`: repository directories, `name=path` (an artifact or a model directory) or
   * artifact paths. `defaults`: poolSize, maxQueue, timeoutMs, offload.
   */
  constructor(models, defaults, { onRetired, log } = {}) {
    this.defaults = defaults;
    this.log = log || (() => {});
    /** Versions built by a load and warming up, not serving yet. */
    this.warming = new Set();
    this.roots = [];
    this.models = new Map();
    /** Versions switched out whose pools are finishing their runs. */
    this.draining = new Set();
    this.onRetired = onRetired || (() => {});
    for (const spec of models) this.#add(spec);
  }

  #add(spec) {
    if (typeof spec !== 'string' || spec === '') throw new LoadError(`a model is a repository directory, name=artifact.so or artifact.so; got ${JSON.stringify(spec)}`);
    const eq = spec.indexOf('=');
    let name;
    let target = spec;
    if (eq > 0 && NAME.test(spec.slice(0, eq))) [name, target] = [spec.slice(0, eq), spec.slice(eq + 1)];
    let st;
    try {
      st = fs.statSync(target);
    } catch (err) {
      throw new LoadError(`model ${JSON.stringify(spec)}: cannot find ${target} (${err.code || err.message})`);
    }
    if (st.isDirectory() && name === undefined) {
      this.roots.push(path.resolve(target));
      return;
    }
    name ??= path.basename(target).replace(/\.so$/, '');
    if (!NAME.test(name)) throw new LoadError(`model name ${JSON.stringify(name)} may hold only letters, digits, "_", "." and "-"`);
    if (this.models.has(name)) throw new LoadError(`two models are named "${name}"`);
    this.models.set(name, new Model(name, st.isDirectory() ? { dir: path.resolve(target) } : { file: path.resolve(target) }));
  }

  /** Finds models added to the repository directories since the last scan. */
  scan() {
    for (const root of this.roots) {
      let entries;
      try {
        entries = fs.readdirSync(root, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const e of entries) {
        if (e.isDirectory() && NAME.test(e.name) && !this.models.has(e.name)) this.models.set(e.name, new Model(e.name, { dir: path.join(root, e.name) }));
      }
    }
  }

  /** The files a model's load reads, as one string: a changed one changes it. */
  stampOf(model) {
    if (model.origin.file) return statKey(model.origin.file);
    const parts = [statKey(path.join(model.origin.dir, 'config.json'))];
    try {
      for (const e of fs.readdirSync(model.origin.dir, { withFileTypes: true })) {
        const p = path.join(model.origin.dir, e.name);
        if (e.isDirectory()) {
          for (const f of fs.readdirSync(p)) parts.push(`${e.name}/${f}=${statKey(path.join(p, f))}`);
        } else {
          parts.push(`${e.name}=${statKey(p)}`);
        }
      }
    } catch {
      parts.push('unreadable');
    }
    return parts.sort().join('|');
  }

  /**
   * (Re)loads a model: every version the policy serves gets a new pool; only when all are
   * ready are they switched in, and the old pools drain and close. On failure the versions
   * already serving go on serving, and the error says why.
   */
  load(name) {
    this.scan();
    const model = this.models.get(name);
    if (!model) throw new LoadError(`no model named "${name}" in the repository`);
    return this.#load(model, this.stampOf(model));
  }

  /** `load` of a model already found, whose files read `stamp` now. */
  #load(model, stamp) {
    model.unloaded = false;
    const built = [];
    try {
      const config = settle(readConfig(model), this.defaults, model.origin.dir ? configFile(model) : model.name);
      for (const where of versionsOf(model, config)) built.push(openVersion(model, where, config));
    } catch (err) {
      for (const v of built) v.pool.close();
      model.stamp = stamp;
      model.reason = err.message;
      throw err instanceof LoadError ? err : new LoadError(err.message);
    }
    model.stamp = stamp;
    if (built.every((v) => v.warmup.length === 0)) {
      model.warming = null;
      return this.#switchTo(model, built);
    }
    return this.#warm(model, built);
  }

  /** Serves `built` in place of the model's versions; resolves once the old ones are closed. */
  #switchTo(model, built) {
    const old = [...model.versions.values()];
    model.versions = new Map(built.map((v) => [v.version, v]));
    model.reason = '';
    return this.#retire(old);
  }

  /**
   * Warms `built` up, then serves it, unless a newer load or an unload came meanwhile. The
   * promise has `warm`: it settles when the versions serve (or their warmup failed).
   */
  #warm(model, built) {
    const token = {};
    model.warming = token;
    if (model.versions.size === 0) model.reason = 'warming up';
    for (const v of built) this.warming.add(v);
    const letGo = () => {
      for (const v of built) {
        this.warming.delete(v);
        v.pool.close();
      }
    };
    let retiring;
    const warm = Promise.all(built.map((v) => warmUp(v, v.warmup).catch((err) => Promise.reject(new LoadError(`version ${v.version}: ${err.message}`))))).then(
      () => {
        if (model.warming !== token) {
          letGo();
          return;
        }
        for (const v of built) this.warming.delete(v);
        model.warming = null;
        for (const v of built) this.log(`model "${model.name}" version ${v.version} ready (${v.pool.size} instances, warmed up)`);
        retiring = this.#switchTo(model, built);
      },
      (err) => {
        letGo();
        if (model.warming === token) {
          model.warming = null;
          model.reason = err.message;
          this.log(`model "${model.name}" did not load: ${err.message}`, 'error');
        }
        throw err;
      },
    );
    // `warm` settles at the switch; `done`, as a load without warmup, once the old versions closed.
    const done = warm.then(() => retiring);
    done.warm = warm;
    return done;
  }

  /** Drains and closes switched-out versions; resolves when they are closed. */
  #retire(old) {
    return Promise.all(
      old.map((v) => {
        this.draining.add(v);
        if (v.sequences !== undefined) v.sequences.close();
        return v.pool.close().then(() => {
          this.onRetired(v);
          this.draining.delete(v);
        });
      }),
    );
  }

  /** Stops serving a model; requests already running finish first. */
  unload(name) {
    const model = this.models.get(name);
    if (!model) throw new LoadError(`no model named "${name}" in the repository`);
    const old = [...model.versions.values()];
    model.versions = new Map();
    model.reason = 'unloaded';
    model.unloaded = true;
    // A load warming up is dropped when its warmup ends.
    model.warming = null;
    return this.#retire(old);
  }

  /** Loads every model; the first failure is thrown, naming the model. */
  loadAll() {
    this.scan();
    if (this.models.size === 0) throw new LoadError(`no models found in ${this.roots.join(', ') || 'the arguments'}`);
    for (const [name, model] of this.models) {
      try {
        // A warmup's failure is not the start's: the model stays unavailable, with the reason logged.
        this.#load(model, this.stampOf(model)).catch(() => {});
      } catch (err) {
        throw new LoadError(`model "${name}": ${err.message}`);
      }
    }
  }

  /** Reloads the models whose files changed since their last load; returns what it did. */
  poll() {
    this.scan();
    const done = [];
    for (const model of this.models.values()) {
      if (model.unloaded) continue;
      const stamp = this.stampOf(model);
      if (stamp === model.stamp) continue;
      try {
        this.#load(model, stamp).catch(() => {});
        done.push({ name: model.name, ok: true });
      } catch (err) {
        done.push({ name: model.name, ok: false, reason: err.message });
      }
    }
    return done;
  }

  /** The repository extension's index: one row per served version, one per model serving none. */
  index(readyOnly) {
    this.scan();
    const rows = [];
    for (const model of [...this.models.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      if (model.versions.size === 0) {
        if (!readyOnly) rows.push({ name: model.name, state: model.state, reason: model.reason });
        continue;
      }
      for (const v of model.versions.values()) rows.push({ name: model.name, version: v.version, state: 'READY', reason: '' });
    }
    return rows;
  }

  /** Every version serving now. */
  *served() {
    for (const model of this.models.values()) yield* model.versions.values();
  }

  /** Stops every model; resolves when all their runs are done and the pools closed. */
  close() {
    const all = [...this.draining, ...this.warming].map((v) => v.pool.close());
    for (const model of this.models.values()) {
      all.push(this.#retire([...model.versions.values()]));
      model.warming = null;
      model.versions = new Map();
      model.reason = 'server stopped';
    }
    return Promise.all(all);
  }
}

module.exports = { ModelRepository, LoadError };
