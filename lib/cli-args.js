'use strict';

// The command line of `npx zgc-runtime` read into options, and `--input` specs into run
// values: apart from bin/zgc-runtime.js so that they are tested in process, rule by rule.

const fs = require('node:fs');
const { parseNpy } = require('./npy');
const { didYouMean } = require('./options');
const { LIMITS, BY_KEY, valueOf, ruleOf, MODEL_CONTROL } = require('./serve/limits');
const { parseRestricted } = require('./serve/restricted');

class UsageError extends Error {}

function parseArgs(argv) {
  const [command, artifact, ...rest] = argv;
  // --help anywhere asks for the usage, whatever else is on the line.
  if (command === undefined || command === 'help' || argv.some((a) => a === '--help' || a === '-h')) return { command: 'help' };
  if (command === '--version' || command === '-v' || command === 'version') return { command: 'version' };
  if (command === 'serve') return parseServeArgs([artifact, ...rest].filter((a) => a !== undefined));
  if (command === 'build-from-source') {
    const extra = [artifact, ...rest].filter((a) => a !== undefined && a !== '--force');
    if (extra.length > 0) throw new UsageError(`build-from-source does not take ${JSON.stringify(extra[0])} (it takes --force)`);
    // Anything but --force was refused above, so a --force in `rest` means `artifact` is one too.
    return { command, force: artifact === '--force' };
  }
  if (!['inspect', 'run', 'bench'].includes(command)) {
    const commands = ['inspect', 'run', 'bench', 'serve', 'build-from-source'];
    throw new UsageError(`unknown command ${JSON.stringify(command)}${didYouMean(command, commands)} (${commands.join(', ')})`);
  }
  if (artifact === undefined || artifact.startsWith('--')) throw new UsageError(`${command} needs an artifact path`);
  const options = { command, artifact, inputs: [], json: false, progress: false };
  const allowed = { inspect: ['--json'], run: ['--input', '--save', '--json'], bench: ['--runs', '--seconds', '--progress'] }[command];
  for (let i = 0; i < rest.length; i++) {
    let arg = rest[i];
    let value;
    // Only `--` options are allowed, so `a=b` split here is refused by its whole text below.
    if (arg.includes('=')) [arg, value] = [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)];
    if (!allowed.includes(arg)) throw new UsageError(`${command} does not take ${JSON.stringify(rest[i])}${arg.startsWith('--') ? didYouMean(arg, allowed) : ''} (it takes ${allowed.join(', ')})`);
    const needsValue = ['--input', '--save', '--runs', '--seconds'].includes(arg);
    if (!needsValue && value !== undefined) throw new UsageError(`${arg} takes no value, got ${JSON.stringify(rest[i])}`);
    if (needsValue && value === undefined) {
      value = rest[++i];
      if (value === undefined) throw new UsageError(`${arg} needs a value`);
    }
    if (arg === '--json') options.json = true;
    else if (arg === '--progress') options.progress = true;
    else if (arg === '--input') options.inputs.push(value);
    else if (arg === '--save') options.save = value;
    else {
      // --runs or --seconds: `allowed` holds no other.
      const n = Number(value);
      if (!(n > 0) || (arg === '--runs' && !Number.isInteger(n))) throw new UsageError(`${arg} must be a positive ${arg === '--runs' ? 'integer' : 'number'}, got ${JSON.stringify(value)}`);
      options[arg.slice(2)] = n;
    }
  }
  return options;
}

const SERVE_FLAGS = {
  '--port': 'port',
  '--host': 'host',
  '--pool-size': 'poolSize',
  '--max-queue': 'maxQueue',
  '--timeout-ms': 'timeoutMs',
  '--poll-ms': 'pollMs',
  '--shutdown-timeout-ms': 'shutdownTimeoutMs',
  '--isolate': 'isolate',
  '--grpc-port': 'grpcPort',
  '--model-control': 'modelControl',
  '--restricted-api': 'restrictedApi',
  '--config': 'config',
  '--allow-client-shm': 'allowClientShm',
  ...Object.fromEntries(LIMITS.map((l) => [l.flag, l.key])),
};

function parseServeArgs(args) {
  const options = { command: 'serve', models: [], port: 8000, host: '127.0.0.1' };
  for (let i = 0; i < args.length; i++) {
    let arg = args[i];
    if (!arg.startsWith('--')) {
      options.models.push(arg);
      continue;
    }
    let value;
    if (arg.includes('=')) [arg, value] = [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)];
    const key = SERVE_FLAGS[arg];
    if (key === undefined) throw new UsageError(`serve does not take ${JSON.stringify(args[i])}${didYouMean(arg, Object.keys(SERVE_FLAGS))} (it takes ${Object.keys(SERVE_FLAGS).join(', ')})`);
    // A switch: it takes no value.
    if (key === 'allowClientShm') {
      if (value !== undefined) throw new UsageError(`${arg} takes no value, got ${JSON.stringify(value)}`);
      options.allowClientShm = true;
      continue;
    }
    if (value === undefined) {
      value = args[++i];
      if (value === undefined) throw new UsageError(`${arg} needs a value`);
    }
    if (key === 'host') {
      options.host = value;
      continue;
    }
    if (key === 'restrictedApi') {
      try {
        parseRestricted(value, '--restricted-api');
      } catch (err) {
        throw new UsageError(err.message);
      }
      (options.restrictedApi ||= []).push(value);
      continue;
    }
    if (key === 'config') {
      options.config = value;
      continue;
    }
    if (key === 'modelControl') {
      if (!MODEL_CONTROL.includes(value)) throw new UsageError(`--model-control must be ${MODEL_CONTROL.join(', ')}, got ${JSON.stringify(value)}`);
      options.modelControl = value;
      continue;
    }
    const limit = BY_KEY.get(key);
    if (limit !== undefined) {
      const n = valueOf(limit, value);
      if (n === null) throw new UsageError(`${arg} must be ${ruleOf(limit)}, got ${JSON.stringify(value)}`);
      options[key] = n;
      continue;
    }
    if (key === 'isolate') {
      if (value !== 'none' && value !== 'process') throw new UsageError(`--isolate must be none or process, got ${JSON.stringify(value)}`);
      options.isolate = value;
      continue;
    }
    // Number('') is 0: an empty value (`--poll-ms=`) is a mistake, not a zero.
    const n = value.trim() === '' ? NaN : Number(value);
    const min = key === 'poolSize' ? 1 : 0;
    const isPort = key === 'port' || key === 'grpcPort';
    if (!Number.isSafeInteger(n) || n < min || (isPort && n > 65535)) {
      throw new UsageError(`${arg} must be ${isPort ? 'a port from 0 to 65535' : `an integer >= ${min}`}, got ${JSON.stringify(value)}`);
    }
    options[key] = n;
  }
  if (options.models.length === 0) throw new UsageError('serve needs at least one model: a repository directory, name=artifact.so or artifact.so');
  return options;
}

/** `name=file.npy` or `name=1,2,3` for one source. */
function readInput(rt, spec) {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new UsageError(`--input ${JSON.stringify(spec)} must be name=file.npy or name=v1,v2,...`);
  const name = spec.slice(0, eq);
  const text = spec.slice(eq + 1);
  const source = rt.sources.find((s) => s.name === name);
  if (!source) throw new UsageError(`--input ${name}: the artifact has no source named ${JSON.stringify(name)} (its sources: ${rt.sources.map((s) => s.name).join(', ')})`);
  if (text.endsWith('.npy')) {
    let bytes;
    try {
      bytes = fs.readFileSync(text);
    } catch (err) {
      throw new UsageError(`--input ${name}: cannot read ${text}: ${err.code || err.message}`);
    }
    const npy = parseNpy(bytes, text);
    if (npy.dtype !== source.dtype) throw new UsageError(`--input ${name}: ${text} holds ${npy.dtype}, source ${JSON.stringify(name)} is ${source.dtype}`);
    if (npy.shape.join() !== source.shape.join()) throw new UsageError(`--input ${name}: ${text} has shape (${npy.shape.join(', ')}), source ${JSON.stringify(name)} has shape (${source.shape.join(', ')})`);
    return [name, npy.data];
  }
  const parts = text.split(',').map((s) => s.trim());
  const values = parts.map((p) => {
    if (source.dtype === 'bool' && (p === 'true' || p === 'false')) return p === 'true';
    const infinity = /^[+-]?(inf|infinity)$/i.test(p);
    const n = p === '' ? NaN : infinity ? (p.startsWith('-') ? -Infinity : Infinity) : Number(p);
    if (Number.isNaN(n) && p.toLowerCase() !== 'nan') throw new UsageError(`--input ${name}: ${JSON.stringify(p)} is not a number`);
    // A number too large for the source's type would silently become an infinity: f32 rounds
    // to infinity from 2^128 - 2^103 on, f16 from 65520 on (both half-way past their largest).
    if ((source.dtype === 'f32' || source.dtype === 'f16') && !infinity && !Number.isNaN(n) && (source.dtype === 'f32' ? !Number.isFinite(Math.fround(n)) : Math.abs(n) >= 65520)) {
      const largest = source.dtype === 'f16' ? 65504 : 3.4028234663852886e38;
      throw new UsageError(`--input ${name}: ${p} is beyond ${source.dtype}'s largest finite value (${largest}); write inf or -inf for an infinity`);
    }
    return n;
  });
  // Logical values: a BOUND source's elementCount counts its physical storage, padding included.
  const count = source.shape.reduce((a, b) => a * b, 1);
  if (values.length !== count) {
    throw new UsageError(`--input ${name}: ${values.length} value${values.length === 1 ? '' : 's'} given, source ${JSON.stringify(name)} (${source.dtype} [${source.shape.join(', ')}]) takes ${count}`);
  }
  return [name, source.shape.length === 0 ? values[0] : values];
}

/**
 * `run` needs every INPUT source (one left out would silently run on zeros) and every BOUND
 * one (the artifact has no storage for it); --input gives either.
 */
function checkInputsGiven(rt, inputs) {
  const list = (sources) => sources.map((s) => `${s.name} (${s.kind}, ${s.dtype} [${s.shape.join(', ')}])`).join(', ');
  const missing = rt.sources.filter((s) => s.kind === 'input' && !Object.hasOwn(inputs, s.name));
  if (missing.length > 0) throw new UsageError(`run needs --input for every INPUT source; missing: ${list(missing)}`);
  const unbound = rt.sources.filter((s) => s.binding === 'bound' && !Object.hasOwn(inputs, s.name));
  if (unbound.length > 0) {
    throw new UsageError(`run needs values for every BOUND source, parameters too; missing: ${list(unbound)}. Give each with --input, as inputs are given: --input ${unbound[0].name}=${unbound[0].name}.npy`);
  }
}

module.exports = { UsageError, parseArgs, parseServeArgs, readInput, checkInputsGiven, SERVE_FLAGS };
