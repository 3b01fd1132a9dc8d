'use strict';

// onnxruntime-node as a contender: installed on demand into bench/.ort (never a dependency of
// the package, so `npm ci` does not need it), with its documented switch that skips the GPU
// provider download (which fails offline); and the ONNX models of bench/onnx_models.py, made
// with the onnx package in the reference venv.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const VERSION = '1.30.0';
const DIR = path.join(__dirname, '.ort');
const MODELS = path.join(__dirname, 'build', 'onnx');

function installOrt() {
  const pkg = path.join(DIR, 'node_modules', 'onnxruntime-node', 'package.json');
  if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, 'utf8')).version === VERSION) return;
  fs.mkdirSync(DIR, { recursive: true });
  fs.writeFileSync(path.join(DIR, 'package.json'), `${JSON.stringify({ name: 'zgc-bench-ort', private: true }, null, 2)}\n`);
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', `onnxruntime-node@${VERSION}`, '--onnxruntime-node-install=skip'], { cwd: DIR, stdio: ['ignore', 'ignore', 'inherit'] });
}

function makeModels(python) {
  fs.mkdirSync(MODELS, { recursive: true });
  execFileSync(path.dirname(python) + '/pip', ['install', '--quiet', '--disable-pip-version-check', 'onnx==1.23.2'], { stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync(python, [path.join(__dirname, 'onnx_models.py'), MODELS], { stdio: ['ignore', 'ignore', 'inherit'] });
}

/** `{ ort, model(name) }`, or throws with the reason it cannot be had. */
function setupOrt(python) {
  if (!python) throw new Error('no Python venv for the onnx package');
  installOrt();
  makeModels(python);
  const ort = require(path.join(DIR, 'node_modules', 'onnxruntime-node'));
  return { ort, version: VERSION, model: (name) => path.join(MODELS, `${name}.onnx`) };
}

module.exports = { setupOrt };
