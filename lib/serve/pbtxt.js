'use strict';

// Protocol buffers' text format (what Triton's config.pbtxt is written in), read without a
// schema: a message is an object whose every field holds the list of its values in order (a
// repeated field written as `f: [a, b]` or as several `f:` lines reads the same), and a value
// is a message, a number (a BigInt for an integer past 2^53), a string (`"…"` or `'…'`, adjacent ones joined, C escapes decoded
// as UTF-8 bytes) or an identifier (an enum value, `true`, `false`) as `{ ident }`. Checked
// against protobuf's own parser in __test__/serve/config-pbtxt.spec.js.

class PbtxtError extends Error {
  constructor(reason, line, column) {
    super(`line ${line}, column ${column}: ${reason}`);
    this.reason = reason;
    this.line = line;
    this.column = column;
  }
}

const IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
// Decimal, hex and octal integers, floats with an optional f suffix, inf and nan (after a sign).
const NUMBER = /-?\s*(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?|inf(?:inity)?|nan)(?![A-Za-z0-9_.])/iy;
const SIMPLE_ESCAPES = { n: 10, t: 9, r: 13, a: 7, b: 8, f: 12, v: 11, '\\': 92, "'": 39, '"': 34, '?': 63 };

class Reader {
  constructor(text) {
    this.text = text;
    this.pos = 0;
  }

  fail(reason, at = this.pos) {
    const before = this.text.slice(0, at);
    const line = before.split('\n').length;
    throw new PbtxtError(reason, line, at - before.lastIndexOf('\n'));
  }

  /** Steps over whitespace and # comments. */
  skip() {
    for (;;) {
      const c = this.text[this.pos];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v') this.pos++;
      else if (c === '#') {
        const end = this.text.indexOf('\n', this.pos);
        this.pos = end < 0 ? this.text.length : end + 1;
      } else return;
    }
  }

  peek() {
    this.skip();
    return this.text[this.pos];
  }

  eat(c) {
    if (this.peek() !== c) return false;
    this.pos++;
    return true;
  }

  expect(c, what) {
    if (!this.eat(c)) this.fail(`expected ${JSON.stringify(c)} ${what}, found ${this.shown()}`);
  }

  shown() {
    return this.pos >= this.text.length ? 'the end of the text' : JSON.stringify(this.text.slice(this.pos, this.pos + 12));
  }

  ident() {
    this.skip();
    IDENT.lastIndex = this.pos;
    const m = IDENT.exec(this.text);
    if (m === null) return null;
    this.pos += m[0].length;
    return m[0];
  }

  /** The fields up to `close` (a character, or undefined for the end of the text). */
  message(close) {
    const fields = Object.create(null);
    for (;;) {
      const c = this.peek();
      if (close === undefined ? c === undefined : c === close) {
        if (c !== undefined) this.pos++;
        return fields;
      }
      if (c === undefined) this.fail(`expected ${JSON.stringify(close)} to close a message, found the end of the text`);
      let name;
      if (c === '[') {
        // An extension or Any's type URL: no ModelConfig field is one.
        this.fail('extension and Any fields ([…]) are not taken here');
      } else name = this.ident();
      if (name === null) this.fail(`expected a field name, found ${this.shown()}`);
      const colon = this.eat(':');
      const next = this.peek();
      // An empty list gives the field no value: as if it were not written.
      const values = [];
      if (next === '{' || next === '<') {
        this.pos++;
        values.push(this.message(next === '{' ? '}' : '>'));
      } else if (next === '[') {
        this.pos++;
        if (!this.eat(']')) {
          do values.push(this.listItem(colon));
          while (this.eat(','));
          this.expect(']', 'to close a list');
        }
      } else {
        if (!colon) this.fail(`expected ":" after field ${name}, found ${this.shown()}`);
        values.push(this.scalar());
      }
      if (values.length > 0) (fields[name] ??= []).push(...values);
      // Fields may be separated by , or ; as well as by space.
      if (!this.eat(',')) this.eat(';');
    }
  }

  listItem(colon) {
    const c = this.peek();
    if (c === '{' || c === '<') {
      this.pos++;
      return this.message(c === '{' ? '}' : '>');
    }
    if (!colon) this.fail(`expected ":" before a list of scalars, found ${this.shown()}`);
    return this.scalar();
  }

  scalar() {
    const c = this.peek();
    if (c === '"' || c === "'") return this.string();
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (m !== null) {
      this.pos += m[0].length;
      return numberOf(m[0].replace(/\s+/g, ''));
    }
    const negative = this.eat('-');
    const id = this.ident();
    if (id === null) this.fail(`expected a value, found ${this.shown()}`);
    return negative ? { ident: `-${id}` } : { ident: id };
  }

  /** One or more adjacent quoted strings, joined. */
  string() {
    const bytes = [];
    while (this.peek() === '"' || this.peek() === "'") {
      const quote = this.text[this.pos++];
      for (;;) {
        if (this.pos >= this.text.length) this.fail('a string is not closed');
        const ch = this.text[this.pos++];
        if (ch === quote) break;
        if (ch === '\n') this.fail('a string is not closed before the end of its line', this.pos - 1);
        if (ch !== '\\') {
          // A character outside the BMP is two UTF-16 units: encoded together.
          bytes.push(...Buffer.from(isHighSurrogate(ch) && this.pos < this.text.length ? ch + this.text[this.pos++] : ch));
          continue;
        }
        bytes.push(...this.escape());
      }
    }
    return new TextDecoder('utf-8', { fatal: false }).decode(Uint8Array.from(bytes));
  }

  escape() {
    const e = this.text[this.pos++];
    if (e !== undefined && Object.hasOwn(SIMPLE_ESCAPES, e)) return [SIMPLE_ESCAPES[e]];
    if (e >= '0' && e <= '7') {
      let digits = e;
      while (digits.length < 3 && this.text[this.pos] >= '0' && this.text[this.pos] <= '7') digits += this.text[this.pos++];
      return [parseInt(digits, 8) & 0xff];
    }
    if (e === 'x' || e === 'X') {
      const m = /^[0-9a-fA-F]{1,2}/.exec(this.text.slice(this.pos, this.pos + 2));
      if (m === null) this.fail('\\x needs a hex digit', this.pos);
      this.pos += m[0].length;
      return [parseInt(m[0], 16)];
    }
    if (e === 'u' || e === 'U') {
      const n = e === 'u' ? 4 : 8;
      const hex = this.text.slice(this.pos, this.pos + n);
      if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(hex)) this.fail(`\\${e} needs ${n} hex digits`, this.pos);
      this.pos += n;
      const cp = parseInt(hex, 16);
      if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) this.fail(`\\${e}${hex} is no Unicode scalar value`, this.pos - n);
      return [...Buffer.from(String.fromCodePoint(cp))];
    }
    return this.fail(`unknown escape \\${e ?? ''}`, this.pos - 1);
  }
}

const isHighSurrogate = (ch) => ch >= '\ud800' && ch <= '\udbff';

/** A number token's value: an integer past 2^53 as a BigInt, exact (a uint64 field may hold one). */
function numberOf(text) {
  const lower = text.toLowerCase();
  const sign = lower.startsWith('-') ? -1 : 1;
  const body = sign < 0 ? lower.slice(1) : lower;
  if (body.startsWith('inf')) return sign * Infinity;
  if (body === 'nan') return NaN;
  // Integers: hex, octal (a leading 0 followed by digits only, as in C) and decimal.
  const integer = body.startsWith('0x') ? BigInt(body) : /^0[0-7]+$/.test(body) ? BigInt(`0o${body.slice(1)}`) : /^\d+$/.test(body) ? BigInt(body) : null;
  if (integer !== null) {
    const n = sign < 0 ? -integer : integer;
    return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
  }
  return sign * Number(body.replace(/f$/, ''));
}

/** The text's top-level message; a PbtxtError naming the line and column of the first mistake. */
function parsePbtxt(text) {
  return new Reader(String(text)).message(undefined);
}

module.exports = { parsePbtxt, PbtxtError };
