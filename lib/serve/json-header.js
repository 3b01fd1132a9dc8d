'use strict';

// A request's JSON header, read safely: a linear scan that refuses deep nesting and header
// floods, NaN and the infinities as Python's json writes them, and large flat data arrays
// read natively.

const { randomBytes } = require('node:crypto');
const { takeInputData } = require('../native');
const { bad } = require('./reasons');

/*
 * NaN, Infinity and -Infinity: JSON has no numbers for them, but Python's json (and so
 * tritonclient) reads and writes them as bare tokens. A request holding one is parsed again
 * with each token outside strings turned into a marker string, which FP32 and FP16 tensor
 * data take as the value and everything else refuses by the token's name.
 */
const MARK = `\u0000zgc-${randomBytes(6).toString('hex')}:`;
const NON_FINITE = new Map([
  [`${MARK}NaN`, NaN],
  [`${MARK}Infinity`, Infinity],
  [`${MARK}-Infinity`, -Infinity],
]);
// Stryker disable next-line ConditionalExpression: a fast path for numbers, which Map.get would also miss
const nonFinite = (v) => (typeof v === 'string' ? NON_FINITE.get(v) : undefined);

/** Arrays and objects nested deeper than this are refused before parsing (a tensor has rank 64 at most). */
const MAX_DEPTH = 256;
/** Values a header may hold outside tensor data, per tensor of the model (name, datatype, a shape of rank 64, parameters). */
const VALUES_PER_TENSOR = 256;
const marker = (token) => `"\\u0000${MARK.slice(1)}${token}"`;
const OBJECT = 0;
const LIST = 1;

/**
 * One pass over a request header's text, in time linear in its length, before JSON.parse:
 * - nesting deeper than MAX_DEPTH is refused;
 * - past `maxValues` values outside `inputs[i].data` (far more than any request of the
 *   model holds), the header is refused: JSON.parse would spend 50 ms on 1 MB of `{},`;
 * - NaN, Infinity and -Infinity are refused outside `inputs[i].data`, naming where, and
 *   with `mark` set, turned into marker strings inside it (JSON has no tokens for them).
 * Gives the text to parse. An unterminated string ends the scan: JSON.parse refuses it.
 */
function scan(text, mark, maxValues) {
  const kinds = new Uint8Array(MAX_DEPTH + 1);
  const index = new Uint32Array(MAX_DEPTH + 1);
  const keyFrom = new Int32Array(MAX_DEPTH + 1);
  const keyTo = new Int32Array(MAX_DEPTH + 1);
  const keyIs = (d, name) => keyTo[d] - keyFrom[d] === name.length && text.startsWith(name, keyFrom[d]);
  // Whether the value starting here (at `depth`) is an input's "data".
  const isData = (d) => d === 3 && kinds[3] === OBJECT && keyIs(3, 'data') && kinds[2] === LIST && kinds[1] === OBJECT && keyIs(1, 'inputs');
  const pieces = [];
  let from = 0;
  let depth = 0;
  // The depth of the data array being read (0: outside data).
  let dataDepth = 0;
  let expectKey = false;
  let values = 0;
  const n = text.length;
  const pathTo = (d) => {
    let path = '';
    for (let k = 1; k <= d; k++) {
      if (kinds[k] === LIST) path += `[${index[k]}]`;
      else {
        const raw = text.slice(keyFrom[k], keyTo[k]);
        let key = raw;
        try {
          key = JSON.parse(`"${raw}"`);
        } catch {
          // Left as sent.
        }
        path += path ? `.${key}` : key;
      }
    }
    return path;
  };
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      const start = i + 1;
      // To the closing quote: an escape takes the character after it.
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === 92) i++;
        else if (d === 34) break;
      }
      if (expectKey) {
        keyFrom[depth] = start;
        keyTo[depth] = i;
        expectKey = false;
      }
    } else if (c === 91 || c === 123) {
      if (depth === MAX_DEPTH) throw bad(`the request header nests arrays and objects deeper than ${MAX_DEPTH} levels`);
      if (dataDepth === 0 && isData(depth)) dataDepth = depth + 1;
      depth++;
      kinds[depth] = c === 91 ? LIST : OBJECT;
      index[depth] = 0;
      keyFrom[depth] = keyTo[depth] = 0;
      expectKey = c === 123;
      if (dataDepth === 0 && ++values > maxValues) throw tooMany(maxValues);
    } else if (c === 93 || c === 125) {
      if (dataDepth === depth) dataDepth = 0;
      if (depth > 0) depth--;
      expectKey = false;
    } else if (c === 44) {
      if (kinds[depth] === LIST) index[depth]++;
      else expectKey = true;
      if (dataDepth === 0 && ++values > maxValues) throw tooMany(maxValues);
    } else if (c === 78 || c === 73 || c === 45) {
      let token = null;
      if (c === 78 && text.startsWith('NaN', i)) token = 'NaN';
      else if (c === 73 && text.startsWith('Infinity', i)) token = 'Infinity';
      else if (c === 45 && text.startsWith('Infinity', i + 1)) token = '-Infinity';
      // Part of a longer word (NaNa) is no token: JSON.parse refuses the word.
      if (token === null || /[\w$]/.test(text[i - 1] ?? '') || /[\w$]/.test(text[i + token.length] ?? '')) continue;
      if (dataDepth === 0 && !isData(depth)) {
        const path = pathTo(depth);
        throw bad(`${token} at ${path || 'the top level'}: NaN, Infinity and -Infinity are taken only as FP32 and FP16 tensor "data"`);
      }
      if (mark) {
        pieces.push(text.slice(from, i), marker(token));
        from = i + token.length;
      }
      i += token.length - 1;
    }
  }
  if (from === 0) return text;
  pieces.push(text.slice(from));
  return pieces.join('');
}

const tooMany = (max) => bad(`the request header holds more than ${max} values outside tensor data, more than any request of this model needs`);

/** Headers from this size on are scanned before JSON.parse: under it, no text can cost much to parse. */
const SCAN_BYTES = 1 << 12;

/** The header's JSON, with NaN, Infinity and -Infinity read in tensor data. `maxValues`: see scan(). */
function parseJsonWithNonFinite(text, maxValues = Infinity) {
  if (text.length >= SCAN_BYTES) return JSON.parse(scan(text, true, maxValues));
  // Stryker disable BlockStatement,ConditionalExpression: fast paths; text without tokens parses the same marked, and fails the same
  try {
    return JSON.parse(text);
  } catch (err) {
    if (!/NaN|Infinity/.test(text)) throw err;
  }
  // Stryker restore BlockStatement,ConditionalExpression
  return JSON.parse(scan(text, true, maxValues));
}

/*
 * Headers from this size on have the flat number arrays of their inputs' data read natively
 * (takeInputData): JSON.parse would make a JavaScript array of every number first, 115 ms for
 * a request of two million. Each array taken out is in the header as a marker string.
 */
const TAKE_BYTES = 1 << 14;
const DATA_MARK = `${MARK}data:`;
const DATA_MARK_TEXT = `\\u0000${DATA_MARK.slice(1)}`;

/** The request header, and the arrays taken out of it (null when none were). */
function readHeader(body, headerLength, maxValues = Infinity) {
  if (headerLength >= TAKE_BYTES) {
    const taken = takeInputData(body, headerLength, DATA_MARK_TEXT);
    if (taken !== null) {
      try {
        return { header: parseJsonWithNonFinite(taken.header.toString('utf8'), maxValues), arrays: taken.arrays };
      } catch {
        // Refused either way: read whole again, so that the error is the one of the text as sent.
      }
    }
  }
  return { header: parseJsonWithNonFinite(Buffer.from(body.buffer, body.byteOffset, headerLength).toString('utf8'), maxValues), arrays: null };
}

const describe = (v) => {
  const token = nonFinite(v);
  if (token !== undefined) return String(token);
  return v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'string' ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v) : typeof v === 'object' ? 'an object' : String(v);
};

module.exports = { readHeader, describe, nonFinite, DATA_MARK, VALUES_PER_TENSOR, TAKE_BYTES };
