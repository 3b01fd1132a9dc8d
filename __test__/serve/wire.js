'use strict';

// What the serve tests and scripts/hostile.js send by hand: protobuf fields written byte by
// byte (so that a message can be as malformed as a test needs), and a body streamed in chunks.
const http = require('node:http');

/** `n` as a protobuf varint. */
function varint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return Buffer.from(out);
}

/** A length-delimited field: its tag, its length, its bytes. */
const field = (number, bytes) => Buffer.concat([varint(number * 8 + 2), varint(bytes.length), bytes]);

/**
 * POSTs `total` bytes of spaces to `url` in chunks, declared (Content-Length) or chunked;
 * resolves `{ status, text, headers }`, or `{ status: code }` when the connection broke first.
 */
function streamBody(url, total, { declare = false, chunk = 256 * 1024, headers = {} } = {}) {
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { ...(declare ? { 'content-length': String(total) } : {}), ...headers } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, text, headers: res.headers }));
      res.on('error', () => resolve({ status: res.statusCode }));
    });
    req.on('error', (e) => resolve({ status: e.code || 'error' }));
    const piece = Buffer.alloc(chunk, 0x20);
    let sent = 0;
    const pump = () => {
      while (sent < total && !req.destroyed) {
        const n = Math.min(chunk, total - sent);
        sent += n;
        if (!req.write(n === chunk ? piece : piece.subarray(0, n))) return req.once('drain', pump);
      }
      if (!req.destroyed) req.end();
    };
    pump();
  });
}

/** One request; resolves { status, headers, text, json }. */
function request(url, { method = 'POST', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

module.exports = { varint, field, streamBody, request };
