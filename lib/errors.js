'use strict';

/**
 * Every failure the runtime reports is a ZgcError with a stable `code`. Errors that come
 * from a status the artifact returned also carry `status` (the integer) and `operation`
 * (the C function); errors about one source carry `source` (its name). The native layer sets
 * these properties itself (src/js.rs: `js::with_detail`); nothing is read from a message.
 * A run an isolated instance's process did not finish also carries how it ended: `signal`
 * and `exitCode` (a crash), `timeoutMs`, or `maxMemoryMb` and `residentBytes`, with `stderr`.
 */
class ZgcError extends Error {
  constructor(code, message, fields) {
    super(message);
    this.name = 'ZgcError';
    this.code = code;
    Object.assign(this, fields);
  }
}

/** The properties the native layer may set: an artifact status's, and an isolated process's end. */
const DETAIL = ['status', 'operation', 'source', 'signal', 'exitCode', 'stderr', 'timeoutMs', 'maxMemoryMb', 'residentBytes'];

/** Turns an error thrown by the native layer into a ZgcError; leaves others as they are. */
function fromNative(err) {
  if (!err || typeof err.code !== 'string' || !err.code.startsWith('ERR_ZGC_')) return err;
  const fields = {};
  for (const key of DETAIL) if (err[key] !== undefined) fields[key] = err[key];
  return new ZgcError(err.code, err.message, fields);
}

/** Every `err.code` the package gives: the one table, in the core (crates/core/src/error.rs). */
function errorCodes() {
  return require('./native').errorCodes();
}

module.exports = { ZgcError, fromNative, errorCodes };
