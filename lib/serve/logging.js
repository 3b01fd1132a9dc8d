'use strict';

// Triton's logging extension over serve's own log: which lines are written (info, warnings,
// errors, and at verbose level 1 each request answered), in which format, and where (the log
// callback, which `zgc-runtime serve` writes to stderr, or a file). GET/POST /v2/logging and
// gRPC LogSettings read and change it, with Triton's keys.

const fs = require('node:fs');
const { RequestError } = require('./reasons');

const FORMATS = ['default', 'ISO8601'];
const LETTER = { info: 'I', warning: 'W', error: 'E', verbose: 'V' };
/** Each setting's kind, in Triton's order. */
const KINDS = { log_file: 'string', log_info: 'boolean', log_warning: 'boolean', log_error: 'boolean', log_verbose_level: 'level', log_format: 'format' };

const describe = (v) => (typeof v === 'string' ? JSON.stringify(v) : String(v));

/** `value` checked as setting `key`; a RequestError naming both when it is not one. */
function checked(key, value) {
  const kind = KINDS[key];
  const refuse = (what) => new RequestError('bad_request', `log setting "${key}" must be ${what}, got ${describe(value)}`);
  if (kind === undefined) throw new RequestError('bad_request', `unknown log setting "${key}" (the settings: ${Object.keys(KINDS).join(', ')})`);
  if (kind === 'boolean' && typeof value !== 'boolean') throw refuse('true or false');
  if (kind === 'string' && typeof value !== 'string') throw refuse('a string (a file path, or "" for the server\'s own log)');
  if (kind === 'level' && !(Number.isSafeInteger(value) && value >= 0 && value < 2 ** 32)) throw refuse('a non-negative integer');
  if (kind === 'format' && !FORMATS.includes(value)) throw refuse(FORMATS.map((f) => `"${f}"`).join(' or '));
  return value;
}

class Logging {
  #sink;
  /** The file lines go to, while log_file names one. */
  #fd = null;

  /** `sink(line)`: where lines go while log_file is "" (none: nowhere). */
  constructor(sink) {
    this.#sink = sink === undefined ? () => {} : sink;
    this.settings = { log_file: '', log_info: true, log_warning: true, log_error: true, log_verbose_level: 0, log_format: 'default' };
  }

  /** The settings, as Triton gives them. */
  get() {
    return { ...this.settings };
  }

  /** Applies `changes` (some of the settings) all or none; returns the settings now. */
  update(changes) {
    if (changes === null || typeof changes !== 'object' || Array.isArray(changes)) throw new RequestError('bad_request', 'log settings must be an object of setting names to values');
    const next = { ...this.settings };
    for (const [key, value] of Object.entries(changes)) next[key] = checked(key, value);
    let fd = this.#fd;
    if (next.log_file !== this.settings.log_file) {
      try {
        fd = next.log_file === '' ? null : fs.openSync(next.log_file, 'a');
      } catch (err) {
        throw new RequestError('bad_request', `log setting "log_file": cannot open ${JSON.stringify(next.log_file)} to append to it: ${err.code || err.message}`);
      }
      if (this.#fd !== null) fs.closeSync(this.#fd);
    }
    this.#fd = fd;
    this.settings = next;
    return this.get();
  }

  /** A line of `level` ('info', 'warning' or 'error'), unless that level is off. */
  write(level, line) {
    const s = this.settings;
    if (level === 'info' ? s.log_info : level === 'warning' ? s.log_warning : s.log_error) this.#emit(level, line);
  }

  /** Whether lines of verbose `level` are written: callers skip making them otherwise. */
  verboseAt(level) {
    return this.settings.log_verbose_level >= level;
  }

  verbose(level, line) {
    if (this.verboseAt(level)) this.#emit('verbose', line);
  }

  #emit(level, line) {
    const text = this.settings.log_format === 'ISO8601' ? `${new Date().toISOString()} ${LETTER[level]} ${line}` : line;
    if (this.#fd === null) this.#sink(text);
    else fs.writeSync(this.#fd, `${text}\n`);
  }

  close() {
    if (this.#fd !== null) fs.closeSync(this.#fd);
    this.#fd = null;
  }
}

module.exports = { Logging, LOG_SETTINGS: Object.keys(KINDS) };
