'use strict';

const { load, Runtime } = require('./runtime');
const { createPool, Pool } = require('./pool');
const { createBatcher, Batcher } = require('./batcher');
const { Sequence } = require('./sequence');
const { ZgcError } = require('./errors');
const pto = require('./pto');
const { abiVersion } = require('./native');

/** The artifact ABI version this runtime loads: the core's, through the addon. */
const ABI_VERSION = abiVersion();

module.exports = { load, createPool, createBatcher, Runtime, Pool, Batcher, Sequence, ZgcError, ABI_VERSION, pto };
