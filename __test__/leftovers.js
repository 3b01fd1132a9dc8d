'use strict';

// After each spec file: no host process of an isolated instance is left. A spec closes what it
// opens, so one still running is a leak (or a close() that resolved too soon), and it is named
// here, then killed, so that it can neither hang the run nor reach the next file (issue 46).

const fs = require('node:fs');

/** This process's children that run the host program, alive (not zombies): `{ pid, cmdline }`. */
function hostChildren() {
  if (process.platform !== 'linux') return [];
  const found = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) !== process.pid || state === 'Z') continue;
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
      if (cmdline.includes('zgc-runtime-host')) found.push({ pid: Number(entry), cmdline });
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

afterAll(() => {
  const left = hostChildren();
  if (left.length === 0) return;
  for (const { pid } of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
  throw new Error(`host processes left running after this spec file (killed now):\n${left.map((p) => `  pid ${p.pid}: ${p.cmdline}`).join('\n')}`);
});

module.exports = { hostChildren };
