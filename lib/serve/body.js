'use strict';

// Request bodies, read under two limits: each body's own (maxBody, 413) and the server's
// in-flight budget (maxInflightBytes, 503), the bytes every request being answered holds.
// Memory grows with the bytes that arrive: a declared Content-Length is counted against the
// budget but never allocated ahead.

const os = require('node:os');
const { RequestError } = require('./protocol');

/** A body's first buffer; it doubles as bytes arrive, up to the declared length. */
const FIRST_CAPACITY = 1 << 16;

/**
 * The default in-flight budget: an eighth of the memory this process may use (the cgroup's
 * limit where one is set), at least 256 MiB and at most 2 GiB.
 */
function defaultInflightBytes() {
  const constrained = typeof process.constrainedMemory === 'function' ? process.constrainedMemory() : 0;
  const memory = constrained > 0 && constrained < os.totalmem() ? constrained : os.totalmem();
  return Math.min(2 ** 31, Math.max(2 ** 28, Math.floor(memory / 8)));
}

/** The bytes held by requests being answered, against `limit`. */
function createBudget(limit) {
  const budget = {
    limit,
    held: 0,
    refused: 0,
    /** Takes `n` bytes, or returns false (and counts a refusal) when they would go past the limit. */
    claim(n) {
      if (budget.held + n > limit) {
        budget.refused++;
        return false;
      }
      budget.held += n;
      return true;
    },
    release(n) {
      budget.held -= n;
    },
  };
  return budget;
}

/** The refusal past the budget: a 503 (gRPC: UNAVAILABLE) that clients retry. */
const overBudget = (budget) =>
  Object.assign(new RequestError(503, `the server holds ${budget.held} bytes of requests, near its in-flight limit of ${budget.limit} bytes: try again shortly`, { 'retry-after': '1', connection: 'close' }), { overBudget: true });

/** `length` bytes whose byte `headerLength` (where binary data starts) is 8-byte aligned. */
function alignedBody(length, headerLength) {
  const pad = (8 - (headerLength % 8)) % 8;
  return new Uint8Array(new ArrayBuffer(length + pad), pad, length);
}

/**
 * The whole body of `req`, at most `maxBody` bytes, held against `budget` until `claim.release()`.
 * For a binary request (`headerLength` given) the binary part starts 8-byte aligned, so that
 * its tensors are read in place. `claim` is `{ bytes }`, the bytes this request holds now.
 */
function readBody(req, { maxBody, budget, claim, headerLength }) {
  return new Promise((resolve, reject) => {
    const declared = req.headers['content-length'];
    const length = declared === undefined ? -1 : Number(declared);
    if (length > maxBody) return reject(new RequestError(413, `the request body of ${length} bytes is over the server's limit of ${maxBody} bytes`, { connection: 'close' }));
    // Counted before a byte is read: past the budget, the body is never read.
    if (length > 0) {
      if (!budget.claim(length)) return reject(overBudget(budget));
      claim.bytes = length;
    }
    const limit = length >= 0 ? length : maxBody;
    const make = (n) => (headerLength === undefined ? Buffer.from(new ArrayBuffer(n)) : alignedBody(n, headerLength));
    let into = null;
    let got = 0;
    const refuse = (err) => {
      req.off('data', onData);
      req.resume();
      reject(err);
    };
    const onData = (chunk) => {
      const end = got + chunk.length;
      if (end > limit) {
        return refuse(length >= 0
          ? new RequestError(400, `the request body is longer than its Content-Length of ${length}`, { connection: 'close' })
          : new RequestError(413, `the request body is over the server's limit of ${maxBody} bytes`, { connection: 'close' }));
      }
      if (end > claim.bytes) {
        // A body of no declared length is counted as it arrives.
        if (!budget.claim(end - claim.bytes)) return refuse(overBudget(budget));
        claim.bytes = end;
      }
      if (into === null && end === limit && headerLength === undefined) {
        // The whole body in one chunk: taken as it is.
        into = chunk;
      } else if (into === null || end > into.length) {
        const grown = make(Math.min(limit, Math.max(FIRST_CAPACITY, end, into === null ? 0 : 2 * into.length)));
        if (into !== null) grown.set(into.subarray(0, got));
        into = grown;
      }
      if (into !== chunk) into.set(chunk, got);
      got = end;
    };
    req.on('data', onData);
    req.once('end', () => {
      req.off('data', onData);
      if (into === null) resolve(make(0));
      else resolve(got === into.length ? into : into.subarray(0, got));
    });
    req.once('close', () => {
      if (!req.complete) {
        req.off('data', onData);
        reject(new RequestError(0, 'the client went away'));
      }
    });
  });
}

module.exports = { readBody, createBudget, defaultInflightBytes, overBudget };
