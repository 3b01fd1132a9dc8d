'use strict';

const { load, Runtime } = require('./lib/runtime');
const { createPool, Pool } = require('./lib/pool');
const { ZgcError } = require('./lib/errors');
const pto = require('./lib/pto');

module.exports = { load, createPool, Runtime, Pool, ZgcError, ABI_VERSION: 1, pto };
