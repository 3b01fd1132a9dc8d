'use strict';

// A checkout of another git ref of this repository, for measuring it side by side with this
// one. It lives outside this checkout (ZGC_BASELINE_DIR, default ~/.cache/zgc-runtime/baselines):
// inside it, cargo takes a checkout of a ref from before the workspace for a member of this
// workspace and refuses to build it.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.join(__dirname, '..');
const BASELINES = process.env.ZGC_BASELINE_DIR || path.join(os.homedir(), '.cache', 'zgc-runtime', 'baselines');

/**
 * `ref` checked out (a git worktree of this repository), sharing node_modules. With
 * `ownAddon`, its addon and host program are built from its own Rust by its own `npm run
 * build`; else this checkout's are copied in (for comparing JavaScript changes alone).
 */
function baselineCheckout(ref, ownAddon = false) {
  const sha = execFileSync('git', ['rev-parse', '--short', ref], { cwd: root, encoding: 'utf8' }).trim();
  const dir = path.join(BASELINES, `${sha}${ownAddon ? '-own' : ''}`);
  fs.mkdirSync(BASELINES, { recursive: true });
  if (!fs.existsSync(dir)) execFileSync('git', ['worktree', 'add', '--detach', dir, sha], { cwd: root, stdio: 'ignore' });
  if (!fs.existsSync(path.join(dir, 'node_modules'))) fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  if (ownAddon) {
    if (!fs.readdirSync(dir).some((n) => n.endsWith('.node'))) execFileSync('npm', ['run', 'build'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    return dir;
  }
  for (const f of fs.readdirSync(root).filter((n) => n.endsWith('.node') || n.startsWith('zgc-runtime-host.'))) fs.copyFileSync(path.join(root, f), path.join(dir, f));
  // Checkouts before the package's own loader (lib/native.js) loaded the addon through napi's generated ../native.js.
  const addon = fs.readdirSync(root).find((n) => n.endsWith('.node'));
  fs.writeFileSync(path.join(dir, 'native.js'), `module.exports = require('./${addon}');\n`);
  return dir;
}

module.exports = { baselineCheckout, BASELINES };
