'use strict';

// The real Triton Inference Server (2.51, CPU-only, from PyPI's nvidia-pytriton wheel, installed
// into .venv-triton by scripts/prepare-reference.js), started over a repository of
// python-backend models the way pytriton starts it: a backend directory with the stub of this
// Python, the wheel's libraries on LD_LIBRARY_PATH, and the venv's Python first on PATH.
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');

const VENV = path.join(__dirname, '..', '..', '.venv-triton');
const PYTHON = path.join(VENV, 'bin', 'python');

/** The wheel's site-packages, or null when .venv-triton has no Triton. */
function sitePackages() {
  if (!fs.existsSync(PYTHON)) return null;
  const lib = path.join(VENV, 'lib');
  for (const d of fs.readdirSync(lib)) {
    const site = path.join(lib, d, 'site-packages');
    if (fs.existsSync(path.join(site, 'pytriton', 'tritonserver', 'bin', 'tritonserver'))) return site;
  }
  return null;
}

const hasTriton = process.platform === 'linux' && process.arch === 'x64' && sitePackages() !== null;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** A backend directory: the wheel's backends, with the stub for this venv's Python in the python backend. */
function backends(site, dir) {
  const version = execFileSync(PYTHON, ['-c', 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'], { encoding: 'utf8' }).trim();
  fs.cpSync(path.join(site, 'pytriton', 'tritonserver', 'backends'), dir, { recursive: true });
  fs.copyFileSync(path.join(site, 'pytriton', 'tritonserver', 'python_backend_stubs', version, 'triton_python_backend_stub'), path.join(dir, 'python', 'triton_python_backend_stub'));
  fs.chmodSync(path.join(dir, 'python', 'triton_python_backend_stub'), 0o755);
  return dir;
}

/**
 * Starts Triton over `repo`; resolves once every model is ready: `{ http, grpc, metrics,
 * url, stop() }` (ports on 127.0.0.1), or rejects with its log.
 */
async function startTriton(repo, { readyMs = 60000 } = {}) {
  const site = sitePackages();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-triton-'));
  const [http, grpc, metrics] = [await freePort(), await freePort(), await freePort()];
  const args = [
    '--model-repository', repo,
    '--backend-directory', backends(site, path.join(work, 'backends')),
    '--cache-directory', path.join(site, 'pytriton', 'tritonserver', 'caches'),
    '--http-address', '127.0.0.1', '--http-port', String(http),
    '--grpc-address', '127.0.0.1', '--grpc-port', String(grpc),
    '--metrics-address', '127.0.0.1', '--metrics-port', String(metrics),
    '--allow-gpu-metrics', 'false',
    '--model-control-mode', 'explicit', '--load-model', '*',
    '--backend-config', 'python,shm-default-byte-size=4194304',
    '--backend-config', 'python,shm-growth-byte-size=1048576',
    '--backend-config', `python,shm-region-prefix-name=zgc${process.pid}_${http}_`,
    '--exit-timeout-secs', '10',
  ];
  const env = {
    ...process.env,
    LD_LIBRARY_PATH: path.join(site, 'nvidia_pytriton.libs'),
    PATH: `${path.join(VENV, 'bin')}:${process.env.PATH}`,
  };
  const child = spawn(path.join(site, 'pytriton', 'tritonserver', 'bin', 'tritonserver'), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = `http://127.0.0.1:${http}`;
  const stop = async () => {
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 15000);
    await exited;
    clearTimeout(killer);
    fs.rmSync(work, { recursive: true, force: true });
  };
  const until = Date.now() + readyMs;
  let gone = false;
  exited.then(() => (gone = true));
  while (!gone && Date.now() < until) {
    try {
      if ((await fetch(`${url}/v2/health/ready`)).status === 200) return { http, grpc, metrics, url, stop, log: () => log };
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await stop();
  throw new Error(`Triton did not become ready within ${readyMs} ms${gone ? ' (it exited)' : ''}:\n${log.slice(-3000)}`);
}

module.exports = { startTriton, hasTriton, PYTHON };
