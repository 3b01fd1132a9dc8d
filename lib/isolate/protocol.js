'use strict';

// The shared region's numbers, as the core defines them (crates/core/src/isolate/mod.rs) and
// the binding hands them over: the commands, the mark of values set in a frame, the word
// DONE is in, and the outcome codes of a wait. JavaScript keeps no offsets of its own.

const native = require('../native');

/**
 * The protocol where isolation is built (Linux). Elsewhere it is empty: no lane is ever made
 * there (options.js refuses isolate: 'process'), but lane.js is still loaded.
 */
const PROTOCOL = native.isolateProtocol ? native.isolateProtocol() : {};

module.exports = { PROTOCOL };
