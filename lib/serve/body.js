'use strict';

// Request bodies, read under two limits: each body's own (maxBody, 413) and the server's
// in-flight budget (maxInflightBytes, 503), the bytes every request being answered holds.
// Memory grows with the bytes that arrive: a declared Content-Length is checked against what
// is left of the budget but neither reserved nor allocated ahead.

const zlib = require('node:zlib');
const { RequestError } = require('./reasons');

/** A body's first buffer; it doubles as bytes arrive, up to the declared length. */
const FIRST_CAPACITY = 1 << 16;

/**
 * Bodies up to this size are never refused by the budget (only counted): small requests are
 * answered whatever large ones hold, so the server may hold up to the limit plus this much per
 * open connection.
 */
const SMALL_BODY = 1 << 16;

/**
 * The bytes of request bodies held by requests being answered, against `limit`. Only bytes
 * received count: a declared length is checked against what is left, never reserved, so that
 * idle connections declaring large bodies hold nothing.
 */
function createBudget(limit) {
  const budget = {
    limit,
    held: 0,
    refused: 0,
    /** Whether `n` more bytes fit; counts a refusal when they do not. */
    fits(n) {
      if (n <= SMALL_BODY || budget.held + n <= limit) return true;
      budget.refused++;
      return false;
    },
    /** Takes `n` bytes for a body now `total` long, or returns false (a refusal) past the limit. */
    claim(n, total = n) {
      if (total > SMALL_BODY && budget.held + n > limit) {
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
  new RequestError('over_budget', `the server holds ${budget.held} bytes of requests, near its in-flight limit of ${budget.limit} bytes: try again shortly`);

/** `length` bytes whose byte `headerLength` (where binary data starts) is 8-byte aligned. */
function alignedBody(length, headerLength) {
  const pad = (8 - (headerLength % 8)) % 8;
  return new Uint8Array(new ArrayBuffer(length + pad), pad, length);
}

/**
 * The whole body of `req`, at most `maxBody` bytes, held against `budget` until `claim.release()`.
 * For a binary request (`headerLength` given) the binary part starts 8-byte aligned, so that
 * its tensors are read in place. `claim` is `{ bytes }`, the buffer bytes this request holds
 * now (its capacity, which grows by doubling up to the declared length).
 */
function readBody(req, options) {
  return new Promise((resolve, reject) => collectBody(req, options, (err, body) => (err === null ? resolve(body) : reject(err))));
}

/**
 * readBody's work, calling `done(err, body)` once: from the body's 'end' event itself, so that a
 * small request is answered in the same tick as its last bytes, with no promise between.
 */
function collectBody(req, { maxBody, budget, claim, headerLength }, done) {
  let finished = false;
  const resolve = (body) => {
    if (!finished) {
      finished = true;
      done(null, body);
    }
  };
  const reject = (err) => {
    if (!finished) {
      finished = true;
      done(err, undefined);
    }
  };
  const declared = req.headers['content-length'];
  // Stryker disable next-line ConditionalExpression: Number(undefined) is NaN, which every test below treats as -1
  const length = declared === undefined ? -1 : Number(declared);
  if (length > maxBody) return reject(new RequestError('too_large', `the request body of ${length} bytes is over the server's limit of ${maxBody} bytes`, { connection: 'close' }));
  // Checked before a byte is read: a body that cannot fit now is never read.
  // Stryker disable next-line ConditionalExpression,EqualityOperator: an empty body always fits, and no data comes for it
  if (length > 0 && !budget.fits(length)) return reject(overBudget(budget));
  // Stryker disable next-line ConditionalExpression,EqualityOperator: as above, for a declared length of 0
  const limit = length >= 0 ? length : maxBody;
  const make = (n) => (headerLength === undefined ? Buffer.from(new ArrayBuffer(n)) : alignedBody(n, headerLength));
  let into = null;
  let got = 0;
  const refuse = (err) => {
    // Stryker disable next-line StringLiteral: paused next, so no more data comes either way
    req.off('data', onData);
    // Not read on: the client is held back by TCP until the connection closes after the answer.
    req.pause();
    reject(err);
  };
  const onData = (chunk) => {
    const end = got + chunk.length;
    if (end > limit) {
      // Stryker disable next-line ConditionalExpression,EqualityOperator: node:http never hands over more than a Content-Length; this 400 is a guard
      return refuse(length >= 0
        ? new RequestError('bad_request', `the request body is longer than its Content-Length of ${length}`, { connection: 'close' })
        : new RequestError('too_large', `the request body is over the server's limit of ${maxBody} bytes`, { connection: 'close' }));
    }
    // The memory held is what counts: each growth of the buffer is claimed before it is made,
    // and past the budget (others' bodies filled it meanwhile) the body is refused midway.
    // Stryker disable next-line ConditionalExpression: only saves a copy (the same bytes, the same claim)
    const whole = into === null && end === limit && headerLength === undefined;
    if (whole || into === null || end > into.length) {
      // Doubling, and straight to the declared length once an eighth of it has come: the
      // buffers left behind (garbage until collected) stay under a quarter of the body.
      const doubled = Math.max(FIRST_CAPACITY, end, into === null ? 0 : 2 * into.length);
      const capacity = whole ? chunk.length : Math.min(limit, length >= 0 && end >= length / 8 ? length : doubled);
      if (!budget.claim(capacity - claim.bytes, capacity)) return refuse(overBudget(budget));
      claim.bytes = capacity;
      // Stryker disable next-line ConditionalExpression: as \`whole\` above
      if (whole) {
        // The whole body in one chunk: taken as it is.
        into = chunk;
      } else {
        const grown = make(capacity);
        if (into !== null) grown.set(into.subarray(0, got));
        into = grown;
      }
    }
    // Stryker disable next-line ConditionalExpression: copying a chunk onto itself changes nothing
    if (into !== chunk) into.set(chunk, got);
    got = end;
  };
  req.on('data', onData);
  req.once('end', () => {
    // Stryker disable next-line StringLiteral: no data comes after the end
    req.off('data', onData);
    if (into === null) resolve(make(0));
    // Stryker disable next-line ConditionalExpression: a whole-length subarray holds the same bytes
    else resolve(got === into.length ? into : into.subarray(0, got));
  });
  req.once('close', () => {
    // Stryker disable next-line ConditionalExpression: a body already given ignores the reject
    if (!req.complete) {
      // Stryker disable next-line StringLiteral: no data comes after the close
      req.off('data', onData);
      reject(new RequestError('canceled', 'the client went away'));
    }
  });
}

/** The Content-Encodings a request body may come in (tritonclient's request_compression_algorithm), and their decoders. */
const DECODERS = { gzip: zlib.createGunzip, 'x-gzip': zlib.createGunzip, deflate: zlib.createInflate };

/**
 * collectBody for a body sent compressed (`encoding`: gzip or deflate). maxBody and the
 * in-flight budget bound the decompressed bytes, so a decompression bomb is a 413 as soon as
 * it grows past maxBody, never more memory; maxBody bounds the compressed bytes too, declared
 * or chunked (a stream of empty members inflates to nothing). Bytes that do not decompress, or
 * that come after the compressed data ends, are a 400.
 */
function collectCompressed(req, encoding, options, done) {
  const { maxBody } = options;
  const tooLarge = (n) => new RequestError('too_large', `the request body${n === undefined ? '' : ` of ${n} bytes`} is over the server's limit of ${maxBody} bytes`, { connection: 'close' });
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBody) return done(tooLarge(declared), undefined);
  const inflate = DECODERS[encoding]();
  const what = encoding === 'deflate' ? 'deflate (zlib)' : 'gzip';
  // What collectBody reads of a request: no declared length (the decompressed one is unknown),
  // and complete once the decompressed stream has ended.
  inflate.headers = {};
  inflate.complete = false;
  inflate.once('end', () => (inflate.complete = true));
  let finished = false;
  const finish = (err, body) => {
    if (finished) return;
    finished = true;
    if (err !== null) {
      // Nothing more is read or decompressed: the client is held back by TCP until the connection closes.
      req.unpipe(inflate);
      req.pause();
      inflate.destroy();
    }
    done(err, body);
  };
  let compressed = 0;
  let ended = false;
  let decoded = null;
  // Answered once both the request and its decompressed data have ended, and only when the
  // decoder took every byte sent (zlib ends a deflate stream at its end, whatever follows).
  const complete = () => {
    if (!ended || decoded === null) return;
    if (inflate.bytesWritten < compressed) return finish(new RequestError('bad_request', `the request body has ${compressed - inflate.bytesWritten} bytes after the end of its ${what} data`, { connection: 'close' }), undefined);
    finish(null, decoded.body);
  };
  req.on('data', (chunk) => {
    compressed += chunk.length;
    if (compressed > maxBody) finish(tooLarge(undefined), undefined);
  });
  req.once('end', () => {
    ended = true;
    complete();
  });
  inflate.on('error', (err) => finish(new RequestError('bad_request', `the request body is not valid ${what} data: ${err.message}`, { connection: 'close' }), undefined));
  req.once('close', () => {
    if (!req.complete) finish(new RequestError('canceled', 'the client went away'), undefined);
  });
  collectBody(inflate, options, (err, body) => {
    if (err !== null) return finish(err, undefined);
    decoded = { body };
    complete();
  });
  req.pipe(inflate);
}

module.exports = { readBody, collectBody, collectCompressed, DECODERS, createBudget, overBudget, SMALL_BODY };
