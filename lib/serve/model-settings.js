'use strict';

// A model's settings: read from its config.json, or from Triton's config.pbtxt when it has no
// config.json (triton-config.js), then settled with the server's defaults, every key checked.

const fs = require('node:fs');
const path = require('node:path');
const { checkBatching } = require('./batching');
const { checkSequences } = require('./sequences');
const { checkWarmup } = require('./warmup');
const { checkDecoupled } = require('./decoupled');
const { configFromPbtxt, ConfigError } = require('./triton-config');

const CONFIG_KEYS = ['instances', 'maxQueue', 'timeoutMs', 'priorityLevels', 'defaultPriorityLevel', 'labels', 'warmup', 'dynamicBatching', 'sequenceBatching', 'decoupled', 'offload', 'isolate', 'maxMemoryMb', 'versionPolicy', 'outputs', 'parameters'];

/** A model that cannot be loaded as it is: the message says why. */
class LoadError extends Error {}

/** The file a model's settings are read from: its config.json, else Triton's config.pbtxt (either may be missing). */
function configFile(model) {
  const json = path.join(model.origin.dir, 'config.json');
  const pbtxt = path.join(model.origin.dir, 'config.pbtxt');
  return !fs.existsSync(json) && fs.existsSync(pbtxt) ? pbtxt : json;
}

function readConfig(model) {
  if (!model.origin.dir) return {};
  const file = configFile(model);
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (err.code === 'ENOENT') return {};
    throw new LoadError(`cannot read ${file}: ${err.code || err.message}`);
  }
  if (file.endsWith('.pbtxt')) {
    try {
      return configFromPbtxt(text, model.name);
    } catch (err) {
      if (err instanceof ConfigError) throw new LoadError(`${file}: ${err.message}`);
      throw err;
    }
  }
  let config;
  try {
    config = JSON.parse(text);
  } catch (err) {
    throw new LoadError(`${file} is not JSON: ${err.message}`);
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new LoadError(`${file} must hold a JSON object`);
  for (const key of Object.keys(config)) {
    if (!CONFIG_KEYS.includes(key)) throw new LoadError(`${file}: unknown key "${key}" (known: ${CONFIG_KEYS.join(', ')})`);
  }
  return config;
}

/** The config with the server's defaults filled in, every field checked. */
function settle(config, defaults, where) {
  const positive = (key, value, allowZero) => {
    if (!Number.isInteger(value) || value < (allowZero ? 0 : 1)) throw new LoadError(`${where}: "${key}" must be a ${allowZero ? 'non-negative' : 'positive'} integer, got ${JSON.stringify(value)}`);
    return value;
  };
  const out = {
    instances: positive('instances', config.instances ?? defaults.poolSize),
    maxQueue: positive('maxQueue', config.maxQueue ?? defaults.maxQueue, true),
    timeoutMs: positive('timeoutMs', config.timeoutMs ?? defaults.timeoutMs, true),
    priorityLevels: positive('priorityLevels', config.priorityLevels ?? 0, true),
    defaultPriorityLevel: positive('defaultPriorityLevel', config.defaultPriorityLevel ?? 0, true),
    offload: config.offload ?? defaults.offload ?? 'auto',
    isolate: config.isolate ?? defaults.isolate ?? 'none',
    maxMemoryMb: config.maxMemoryMb === undefined ? undefined : positive('maxMemoryMb', config.maxMemoryMb),
    versionPolicy: config.versionPolicy ?? 'latest',
    outputs: config.outputs,
    parameters: config.parameters ?? {},
    // The inputs and outputs a config.pbtxt declares, checked against the artifact as it loads.
    declared: config.declared,
    labels: config.labels ?? {},
    warmup: checkWarmup(config.warmup, where),
    dynamicBatching: checkBatching(config.dynamicBatching, where),
    sequenceBatching: checkSequences(config.sequenceBatching, where),
    decoupled: checkDecoupled(config.decoupled, where),
  };
  if (out.dynamicBatching !== undefined && out.sequenceBatching !== undefined) throw new LoadError(`${where}: a model takes "dynamicBatching" or "sequenceBatching", not both (a batch would mix sequences' state)`);
  if (out.decoupled !== undefined && (out.dynamicBatching !== undefined || out.sequenceBatching !== undefined)) {
    throw new LoadError(`${where}: a "decoupled" model runs each request's steps on state of its own, without "dynamicBatching" or "sequenceBatching"`);
  }

  if (out.priorityLevels > 0 && out.defaultPriorityLevel > out.priorityLevels) throw new LoadError(`${where}: "defaultPriorityLevel" ${out.defaultPriorityLevel} is past "priorityLevels" ${out.priorityLevels}`);
  if (out.isolate !== 'none' && out.isolate !== 'process') throw new LoadError(`${where}: "isolate" must be "none" or "process", got ${JSON.stringify(out.isolate)}`);
  if (out.maxMemoryMb !== undefined && out.isolate !== 'process') throw new LoadError(`${where}: "maxMemoryMb" needs "isolate": "process"`);
  if (!['auto', 'always', 'never'].includes(out.offload)) throw new LoadError(`${where}: "offload" must be "auto", "always" or "never", got ${JSON.stringify(out.offload)}`);
  const policy = out.versionPolicy;
  const specific = policy !== null && typeof policy === 'object' && Array.isArray(policy.specific) && policy.specific.every((v) => Number.isInteger(v) && v >= 0);
  if (policy !== 'latest' && policy !== 'all' && !specific) {
    throw new LoadError(`${where}: "versionPolicy" must be "latest", "all" or { "specific": [versions] }, got ${JSON.stringify(policy)}`);
  }
  if (out.outputs !== undefined && (!Array.isArray(out.outputs) || !out.outputs.every((n) => typeof n === 'string' && n !== ''))) {
    throw new LoadError(`${where}: "outputs" must be an array of output names, got ${JSON.stringify(out.outputs)}`);
  }
  if (out.parameters === null || typeof out.parameters !== 'object' || Array.isArray(out.parameters)) throw new LoadError(`${where}: "parameters" must be an object of source name -> .npy file`);
  const labels = out.labels;
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels) || !Object.values(labels).every((f) => typeof f === 'string' && f !== '')) {
    throw new LoadError(`${where}: "labels" must be an object of output name -> labels file (one label a line)`);
  }
  return out;
}

module.exports = { LoadError, CONFIG_KEYS, configFile, readConfig, settle };
