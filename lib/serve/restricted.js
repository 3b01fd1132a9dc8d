'use strict';

// Restricted API categories in Triton's form (--http-restricted-api, --grpc-restricted-protocol):
// `--restricted-api model-repository,inference:admin-key=s3cret` lets a request of those
// categories through only with the header (gRPC: metadata) `admin-key: s3cret`. One rule
// covers REST and gRPC alike.

const { timingSafeEqual } = require('node:crypto');

const CATEGORIES = ['health', 'metadata', 'inference', 'model-config', 'model-repository', 'metrics', 'statistics', 'shared-memory', 'logging', 'trace'];
const RULE = `CATEGORY[,CATEGORY...]:HEADER=VALUE, categories from ${CATEGORIES.join(', ')}`;

/** Each category's required header, from a rule or rules; throws a RangeError naming what is wrong. */
function parseRestricted(rules, where) {
  const list = rules === undefined ? [] : Array.isArray(rules) ? rules : [rules];
  const out = new Map();
  for (const rule of list) {
    const m = typeof rule === 'string' ? /^([a-z,-]+):([^=\s]+)=(.+)$/.exec(rule) : null;
    if (m === null) throw new RangeError(`${where} must be ${RULE}; got ${JSON.stringify(rule)}`);
    const [, categories, header, value] = m;
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header)) throw new RangeError(`${where}: ${JSON.stringify(header)} is not a header name`);
    for (const c of categories.split(',')) {
      if (!CATEGORIES.includes(c)) throw new RangeError(`${where}: unknown category ${JSON.stringify(c)} (categories: ${CATEGORIES.join(', ')})`);
      if (out.has(c)) throw new RangeError(`${where}: category ${c} is restricted twice`);
      out.set(c, { header: header.toLowerCase(), value: Buffer.from(value) });
    }
  }
  return out;
}

/** Whether `given` (a header's value, or undefined) is the value the rule wants, compared in constant time. */
function matches(rule, given) {
  if (typeof given !== 'string') return false;
  const bytes = Buffer.from(given);
  return bytes.length === rule.value.length && timingSafeEqual(bytes, rule.value);
}

/** The refusal's message when `category` is restricted and `get(header)` does not give its value; else null. */
function refusal(restricted, category, get) {
  const rule = restricted.get(category);
  if (rule === undefined || matches(rule, get(rule.header))) return null;
  return `this API (${category}) is restricted: send the header ${rule.header} with the value the server was given`;
}

module.exports = { CATEGORIES, parseRestricted, refusal };
