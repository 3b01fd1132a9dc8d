#!/usr/bin/env node
'use strict';

// Builds the host program of isolated instances (`isolate: 'process'`) and puts it next to
// the addon as zgc-runtime-host.<platform>. Its own cargo invocation: the addon's build
// (--features node) leaves the binary out, since a binary cannot link the napi symbols.
const { buildHost } = require('../lib/build-from-source');

if (process.platform !== 'linux') {
  console.log('build-host: isolated instances run on Linux only; no host program to build here');
  process.exit(0);
}
process.exit(buildHost({ profile: process.argv.includes('--debug') ? 'debug' : 'release' }));
