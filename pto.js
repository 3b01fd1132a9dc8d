'use strict';

module.exports = require('./lib/pto');
