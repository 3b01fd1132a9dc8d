'use strict';

const { load, Runtime } = require('./runtime');
const { createPool, Pool } = require('./pool');
const { createBatcher, Batcher } = require('./batcher');
const { Sequence } = require('./sequence');
const { ZgcError } = require('./errors');
const pto = require('./pto');

module.exports = { load, createPool, createBatcher, Runtime, Pool, Batcher, Sequence, ZgcError, ABI_VERSION: 1, pto };
