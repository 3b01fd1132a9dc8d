'use strict';

// zgc-runtime/serve: the Open Inference Protocol server (see README "Serving").
const { createServer, createHandler } = require('./lib/serve/server');
const { ModelRepository, LoadError } = require('./lib/serve/repository');

module.exports = { createServer, createHandler, ModelRepository, LoadError };
