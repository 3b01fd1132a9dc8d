'use strict';

// Writing a JSON answer: its length, its bounded error text, and the connection that goes a
// moment after an answer to a body refused midway.

const { bounded } = require('./elide');

const JSON_TYPE = 'application/json';
const EMPTY = Buffer.alloc(0);

function send(res, status, body, headers) {
  const text = body === undefined ? EMPTY : JSON.stringify(body.error === undefined ? body : { ...body, error: bounded(body.error) });
  const h = { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) };
  if (headers) Object.assign(h, headers);
  res.writeHead(status, h);
  res.end(text);
  // A body refused midway is not read on (lib/serve/body.js pauses it): once the answer is out,
  // the connection goes, a moment later, so that the client can read the answer first.
  if (h.connection === 'close' && res.req && !res.req.complete) {
    res.once('finish', () => {
      const socket = res.socket;
      if (socket) setTimeout(() => socket.destroy(), LINGER_MS).unref();
    });
  }
}

/** How long a connection whose body was refused stays open after its answer. */
const LINGER_MS = 200;

const fail = (res, status, message, headers) => send(res, status, { error: message }, headers);

module.exports = { send, fail, JSON_TYPE };
