'use strict';

// Triton's trace extension settings, server-wide and per model: which requests get a trace
// (tracing.js hands it to the application's OpenTelemetry SDK). trace_level OFF traces none;
// TIMESTAMPS traces each request's steps; trace_rate N traces the first of every N requests;
// trace_count N traces N more, then none (-1: no end). Values are strings or lists of strings,
// as Triton gives them. GET/POST /v2/trace/setting, /v2/models/{m}/trace/setting and gRPC
// TraceSetting read and change them; a model's null setting goes back to the server's.

const { RequestError } = require('./reasons');

const DEFAULTS = { trace_level: ['TIMESTAMPS'], trace_rate: '1', trace_count: '-1', log_frequency: '0', trace_file: '', trace_mode: 'opentelemetry' };
const KEYS = Object.keys(DEFAULTS);

const describe = (v) => JSON.stringify(v);

/** A whole number in a string (Triton's form) or a number, within [min, 2^53). */
function wholeText(key, value, min) {
  const text = Array.isArray(value) && value.length === 1 ? value[0] : value;
  const n = typeof text === 'number' ? text : typeof text === 'string' && /^-?\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new RequestError('bad_request', `trace setting "${key}" must be an integer ${min === -1 ? '(-1 for no end) ' : ''}>= ${min}, given as a string, got ${describe(value)}`);
  return String(n);
}

/** `value` checked as setting `key`, in the form it is kept and answered in. */
function checked(key, value) {
  switch (key) {
    case 'trace_level': {
      const levels = Array.isArray(value) ? value : [value];
      if (levels.length === 0 || !levels.every((l) => typeof l === 'string')) throw new RequestError('bad_request', `trace setting "trace_level" must be a list of levels ("OFF", "TIMESTAMPS"), got ${describe(value)}`);
      for (const l of levels) {
        if (l === 'TENSORS') throw new RequestError('bad_request', 'trace setting "trace_level": TENSORS is not recorded by this server (its traces hold timestamps: the request\'s steps); use "TIMESTAMPS" or "OFF"');
        if (l !== 'OFF' && l !== 'TIMESTAMPS') throw new RequestError('bad_request', `trace setting "trace_level": unknown level ${describe(l)} (levels: "OFF", "TIMESTAMPS")`);
      }
      // OFF alongside another level means that level, as in Triton.
      const on = levels.filter((l) => l !== 'OFF');
      return on.length === 0 ? ['OFF'] : [...new Set(on)];
    }
    case 'trace_rate':
      return wholeText(key, value, 1);
    case 'trace_count':
      return wholeText(key, value, -1);
    case 'log_frequency':
      return wholeText(key, value, 0);
    case 'trace_file': {
      const text = Array.isArray(value) && value.length === 1 ? value[0] : value;
      if (typeof text !== 'string') throw new RequestError('bad_request', `trace setting "trace_file" must be a string, got ${describe(value)}`);
      return text;
    }
    case 'trace_mode': {
      const text = Array.isArray(value) && value.length === 1 ? value[0] : value;
      if (text !== 'opentelemetry') throw new RequestError('bad_request', `trace setting "trace_mode" must be "opentelemetry": this server's traces go to the application's OpenTelemetry SDK, never to Triton's trace files; got ${describe(value)}`);
      return text;
    }
    default:
      throw new RequestError('bad_request', `unknown trace setting ${describe(key)} (the settings: ${KEYS.join(', ')})`);
  }
}

/** What one scope (the server, or a model with settings of its own) counts between requests. */
const counters = () => ({ seen: 0, left: null });

class TraceSettings {
  constructor() {
    this.global = { ...DEFAULTS };
    this.globalCount = counters();
    /** Per model name: its own settings (some keys), and its counters. */
    this.models = new Map();
  }

  /** The settings in effect for `model` (undefined: the server's). */
  get(model) {
    const own = model === undefined ? undefined : this.models.get(model);
    return { ...this.global, ...(own === undefined ? {} : own.settings) };
  }

  /**
   * Applies `changes` to the server's settings, or to `model`'s own (a null value: back to the
   * server's), all or none. Returns the settings in effect there.
   */
  update(changes, model) {
    if (changes === null || typeof changes !== 'object' || Array.isArray(changes)) throw new RequestError('bad_request', 'trace settings must be an object of setting names to values');
    const entries = Object.entries(changes).map(([key, value]) => {
      if (!KEYS.includes(key)) return checked(key, value);
      return [key, value === null ? null : checked(key, value)];
    });
    if (model === undefined) {
      for (const [key, value] of entries) this.global[key] = value === null ? DEFAULTS[key] : value;
      // A new count starts over; a new rate starts its cycle.
      if (entries.some(([k]) => k === 'trace_count' || k === 'trace_rate')) this.globalCount = counters();
      return this.get();
    }
    const own = this.models.get(model) ?? { settings: {}, count: counters() };
    for (const [key, value] of entries) {
      if (value === null) delete own.settings[key];
      else own.settings[key] = value;
    }
    if (entries.some(([k]) => k === 'trace_count' || k === 'trace_rate')) own.count = counters();
    if (Object.keys(own.settings).length === 0) this.models.delete(model);
    else this.models.set(model, own);
    return this.get(model);
  }

  /** Whether a request to `model` gets a trace; counts it against the rate and the count. */
  take(model) {
    const own = this.models.get(model);
    const s = own === undefined ? this.global : { ...this.global, ...own.settings };
    if (s.trace_level[0] === 'OFF') return false;
    // The rate and count of the scope that set them: a model's own, or the server's.
    const scope = own !== undefined && ('trace_rate' in own.settings || 'trace_count' in own.settings) ? own.count : this.globalCount;
    if (scope.left === null) scope.left = Number(s.trace_count);
    if (scope.left === 0) return false;
    const first = scope.seen % Number(s.trace_rate) === 0;
    scope.seen++;
    if (!first) return false;
    if (scope.left > 0) scope.left--;
    return true;
  }
}

module.exports = { TraceSettings, TRACE_SETTINGS: KEYS };
