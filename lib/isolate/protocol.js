'use strict';

// The shared region's numbers, as the core defines them (crates/core/src/isolate/mod.rs) and
// the binding hands them over: the commands, the mark of values set in a frame, the word
// DONE is in, and the outcome codes of a wait. JavaScript keeps no offsets of its own.

const native = require('../native');

/** Where isolation is built (Linux): the protocol; elsewhere null (isolate: 'process' is refused). */
const PROTOCOL = native.isolateProtocol ? native.isolateProtocol() : null;

module.exports = { PROTOCOL };
