'use strict';

// What the isolation specs share: the faulty fixture's run log and hold file, and whether a
// process is alive. The fixture fails on request (mode: 1 segfault, 2 abort, 3 _exit(3), 4
// loop forever, 5 unbounded memory, 6 a 200 ms run, 7 held until a file exists) and logs every
// run it executes, so "never twice" is counted, not assumed.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ISO = { isolate: 'process' };
const x = new Float32Array([1, 2, 3, 4]);
const expected = (v) => Array.from(v, (e) => Math.fround(Math.fround(e * 2) + 1));

function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie still answers kill(0); its state says it is gone.
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return !/\) Z /.test(stat);
}

const fdCount = () => fs.readdirSync('/proc/self/fd').length;

function tempLog() {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-iso-')), 'runs.log');
  process.env.ZGC_FAULTY_LOG = file;
  return file;
}

/** Run ids the fixture logged, with how often each executed. */
function executions(file) {
  const counts = new Map();
  if (!fs.existsSync(file)) return counts;
  for (const line of fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const id = Number(line.split(' ')[1]);
    counts.set(id, (counts.get(id) || 0) + 1);
  }
  return counts;
}

/** Clears what the helpers below set in the environment, after each test. */
function clearFaultyEnv() {
  afterEach(() => {
    delete process.env.ZGC_FAULTY_LOG;
    delete process.env.ZGC_FAULTY_ABORT_AT_LOAD;
    delete process.env.ZGC_FAULTY_LOAD_MS;
    delete process.env.ZGC_FAULTY_HOLD;
  });
}

/** A run of the faulty fixture (mode 7) held until `release()`. */
function holdFile() {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-hold-')), 'release');
  process.env.ZGC_FAULTY_HOLD = file;
  return { release: () => fs.writeFileSync(file, '') };
}

module.exports = { ISO, x, expected, alive, fdCount, tempLog, executions, holdFile, clearFaultyEnv };
