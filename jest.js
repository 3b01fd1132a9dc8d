'use strict';

// Tensor matchers for Jest: expect.extend(require('zgc-runtime/jest')). See docs/testing-with-jest.md.
module.exports = require('./lib/jest');
