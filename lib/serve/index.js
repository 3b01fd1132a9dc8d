'use strict';

// zgc-runtime/serve: the Open Inference Protocol server (see README "Serving").
const { createServer, createHandler } = require('./server');
const { ModelRepository, LoadError } = require('./repository');

module.exports = { createServer, createHandler, ModelRepository, LoadError };
