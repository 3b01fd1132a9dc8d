'use strict';

/**
 * Every failure the runtime reports is a ZgcError with a stable `code`. Errors that come
 * from a status the artifact returned also carry `status` (the integer) and `operation`
 * (the C function); errors about one source carry `source` (its name).
 */
class ZgcError extends Error {
  constructor(code, message, fields) {
    super(message);
    this.name = 'ZgcError';
    this.code = code;
    if (fields) Object.assign(this, fields);
  }
}

const STATUS = /^(zgc_\w+) returned .*\(status (-?\d+)\)/;
const SOURCE = /\bsource ("(?:[^"\\]|\\.)*")/;

/** Turns an error thrown by the native layer into a ZgcError; leaves others as they are. */
function fromNative(err) {
  if (!err || typeof err.code !== 'string' || !err.code.startsWith('ERR_ZGC_')) return err;
  const fields = {};
  const status = STATUS.exec(err.message);
  if (status) {
    fields.operation = status[1];
    fields.status = Number(status[2]);
  }
  const source = SOURCE.exec(err.message);
  if (source) {
    try {
      fields.source = JSON.parse(source[1]);
    } catch {
      // A name Rust quoted in a way JSON does not read: the message still has it.
    }
  }
  return new ZgcError(err.code, err.message, fields);
}

module.exports = { ZgcError, fromNative };
