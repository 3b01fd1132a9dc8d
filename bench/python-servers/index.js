'use strict';

// The Python servers for bench/serving.js (opt-in: --python-servers): MLServer 1.7.1 and
// the KServe 0.21 model server, each wrapping the Python reference runtime (zgc-runtime
// 0.1.0) on the same artifacts. Each gets a venv of its own in the cache (the two pin
// starlette apart); MLServer's parallel workers need uvloop 0.21.
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const CACHE = path.join(os.homedir(), '.cache', 'zgc-runtime', 'bench-venvs');
const HERE = __dirname;
const VENVS = {
  mlserver: ['mlserver==1.7.1', 'uvloop==0.21.0', 'zgc-runtime==0.1.0'],
  kserve: ['kserve==0.21.0', 'zgc-runtime==0.1.0'],
};

function venv(name) {
  const dir = path.join(CACHE, name);
  const python = path.join(dir, 'bin', 'python');
  try {
    execFileSync(python, ['-c', `import ${name}, zgc`], { stdio: 'ignore' });
  } catch {
    fs.mkdirSync(CACHE, { recursive: true });
    if (!fs.existsSync(python)) execFileSync(process.env.PYTHON || 'python3', ['-m', 'venv', dir], { stdio: 'inherit' });
    execFileSync(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', ...VENVS[name]], { stdio: 'inherit' });
  }
  return dir;
}

async function waitReady(url, child, what) {
  const until = Date.now() + 120000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`${what} exited ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/v2/health/ready`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} not ready after 120 s`);
}

/** Starts MLServer on `models` ({ name: artifact }); resolves { url, grpc, stop }. */
async function startMlserver(models, ports, workers = 2) {
  const dir = venv('mlserver');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-mlserver-'));
  fs.writeFileSync(path.join(root, 'settings.json'), JSON.stringify({ http_port: ports[0], grpc_port: ports[1], metrics_port: ports[2], parallel_workers: workers }));
  for (const [name, uri] of Object.entries(models)) {
    fs.mkdirSync(path.join(root, name));
    fs.writeFileSync(path.join(root, name, 'model-settings.json'), JSON.stringify({ name, implementation: 'mlserver_zgc.ZgcModel', parameters: { uri } }));
  }
  const child = spawn(path.join(dir, 'bin', 'mlserver'), ['start', root], { cwd: root, env: { ...process.env, PYTHONPATH: HERE }, stdio: 'ignore' });
  const url = `http://127.0.0.1:${ports[0]}`;
  await waitReady(url, child, 'MLServer');
  return { url, grpc: `127.0.0.1:${ports[1]}`, stop: () => stop(child, root) };
}

/** Starts the KServe model server on `models`; resolves { url, grpc, stop }. */
async function startKserve(models, ports) {
  const dir = venv('kserve');
  const child = spawn(path.join(dir, 'bin', 'python'), [path.join(HERE, 'kserve_zgc.py'), String(ports[0]), String(ports[1]), ...Object.entries(models).map(([n, p]) => `${n}=${p}`)], { cwd: os.tmpdir(), stdio: 'ignore' });
  const url = `http://127.0.0.1:${ports[0]}`;
  await waitReady(url, child, 'KServe');
  return { url, grpc: `127.0.0.1:${ports[1]}`, stop: () => stop(child) };
}

function stop(child, root) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => {
      if (root) fs.rmSync(root, { recursive: true, force: true });
      resolve();
    });
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10000).unref();
  });
}

/**
 * Starts the real Triton 2.51 (its python backend: the model Triton users without a C++
 * backend run, and the one its PyPI wheel holds) with `a + b` models of `shapes` ({ name:
 * elements }), as __test__/triton starts it; resolves { url, grpc, stop }, or null when
 * .venv-triton has no Triton (prepare-reference installs it on x86-64 Linux).
 */
async function startTriton(shapes) {
  const { startTriton: start, hasTriton } = require('../../__test__/triton/triton');
  if (!hasTriton) return null;
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-bench-triton-'));
  const model = path.join(__dirname, '..', '..', '__test__', 'triton', 'models', 'add', '1', 'model.py');
  for (const [name, n] of Object.entries(shapes)) {
    fs.mkdirSync(path.join(repo, name, '1'), { recursive: true });
    fs.copyFileSync(model, path.join(repo, name, '1', 'model.py'));
    const tensor = (t) => `{ name: "${t}" data_type: TYPE_FP32 dims: [ ${n} ] }`;
    fs.writeFileSync(path.join(repo, name, 'config.pbtxt'), `name: "${name}"\nbackend: "python"\ninput [ ${tensor('a')}, ${tensor('b')} ]\noutput [ ${tensor('output_0')} ]\ninstance_group [ { count: 2 kind: KIND_CPU } ]\n`);
  }
  const t = await start(repo);
  return { url: t.url, grpc: `127.0.0.1:${t.grpc}`, stop: async () => (await t.stop(), fs.rmSync(repo, { recursive: true, force: true })) };
}

module.exports = { startMlserver, startKserve, startTriton, venv };
