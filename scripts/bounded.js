'use strict';

// A step of the test suite that cannot hang it (issue 46): it runs under coreutils' timeout,
// which signals the step's whole process group (the step and whatever it started), and is
// killed outright 10 s after that. A stuck step then fails in minutes, named, instead of at
// CI's limit. Jest runs also get --forceExit (jestBounded): a handle left open after the
// last test ends the run instead of holding it, and __test__/leftovers.js names leaked hosts.
const { spawnSync } = require('node:child_process');

const hasTimeout = process.platform === 'linux' && spawnSync('timeout', ['--version'], { stdio: 'ignore' }).status === 0;

/**
 * spawnSync(cmd, args, opts), ended after `minutes`. The result has `timedOut` set when it was;
 * a line on stderr says which step it was.
 */
function runBounded(cmd, args, opts, minutes, what = `${cmd} ${args.join(' ')}`) {
  const seconds = Math.round(minutes * 60);
  const r = hasTimeout
    ? spawnSync('timeout', ['--kill-after=10', String(seconds), cmd, ...args], opts)
    : spawnSync(cmd, args, { ...opts, timeout: seconds * 1000, killSignal: 'SIGKILL' });
  // timeout(1) exits 124 when it had to signal the step (137 when it then killed it).
  r.timedOut = hasTimeout ? r.status === 124 || r.status === 137 : Boolean(r.error && r.error.code === 'ETIMEDOUT');
  if (r.timedOut) process.stderr.write(`\n${what}: did not finish within ${minutes} min; it was killed\n`);
  return r;
}

/** Jest's arguments for a bounded run: --forceExit before the caller's own. */
const jestBounded = (args) => ['--forceExit', ...args];

module.exports = { runBounded, jestBounded };
