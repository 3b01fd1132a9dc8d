'use strict';

const { load, Runtime } = require('./runtime');
const { createPool, Pool } = require('./pool');
const { ZgcError } = require('./errors');
const pto = require('./pto');

module.exports = { load, createPool, Runtime, Pool, ZgcError, ABI_VERSION: 1, pto };
