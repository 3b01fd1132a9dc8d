'use strict';

// Error messages of bounded size: a client's shape or list is shown up to a few entries, and
// no message sent back is over 1 KB, whatever the request held.

/** The most characters of a message sent back. */
const MAX_MESSAGE = 1024;
/** Entries of a list shown before the rest is elided. */
const SHOWN = 8;

/** `[4,4,4]`, or `[4,4,4,4,4,4,4,4, … 62,914,560 entries]` past SHOWN entries. */
function listText(list) {
  const entry = (v) => (typeof v === 'number' ? String(v) : JSON.stringify(v) ?? String(v));
  if (list.length <= SHOWN) return `[${Array.prototype.map.call(list, entry).join(',')}]`;
  const head = Array.prototype.slice.call(list, 0, SHOWN).map(entry);
  return `[${head.join(',')}, … ${list.length.toLocaleString('en-US')} entries]`;
}

/** `message` cut to MAX_MESSAGE characters, saying how long it was. */
function bounded(message) {
  if (typeof message !== 'string' || message.length <= MAX_MESSAGE) return message;
  const tail = ` … (${message.length.toLocaleString('en-US')} characters)`;
  return message.slice(0, MAX_MESSAGE - tail.length) + tail;
}

module.exports = { listText, bounded, MAX_MESSAGE };
