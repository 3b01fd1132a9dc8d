'use strict';

const { load, Runtime } = require('./lib/runtime');
const { ZgcError } = require('./lib/errors');

module.exports = { load, Runtime, ZgcError, ABI_VERSION: 1 };
