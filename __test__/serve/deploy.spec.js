'use strict';

// deploy/: the Kubernetes and KServe manifests pass schema checkers from the registries, the
// checkers refuse a wrong field (so a pass means something), and the probes and ports agree
// with what `zgc-runtime serve` answers.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');

const root = path.join(testDir, '..');
const { PYTHON } = require('../helpers');
const validate = (dir) => spawnSync(PYTHON, [path.join(root, 'scripts', 'validate-deploy.py'), dir], { encoding: 'utf8' });

test('every manifest in deploy/ is valid', () => {
  const r = validate(path.join(root, 'deploy'));
  expect(r.stderr).toBe('');
  expect(r.stdout.trim().split('\n').map((l) => l.replace(/^.*deploy\//, ''))).toEqual([
    'kserve/inferenceservice.yaml: InferenceService mlp: ok (kserve 0.21 SDK models)',
    'kserve/servingruntime.yaml: ServingRuntime zgc-runtime: ok (kserve 0.21 SDK models)',
    'kubernetes/deployment.yaml: Deployment zgc-serve: ok (Kubernetes 1.37 schema, strict)',
    'kubernetes/service.yaml: Service zgc-serve: ok (Kubernetes 1.37 schema, strict)',
  ]);
  expect(r.status).toBe(0);
});

test.each([
  ['kserve/servingruntime.yaml', '  protocolVersions:', '  protocolVersion:', /unknown field 'protocolVersion' for V1alpha1ServingRuntimeSpec/],
  ['kserve/inferenceservice.yaml', '      storageUri:', '      storageURI:', /unknown field 'storageURI' for V1beta1ModelSpec/],
  ['kubernetes/deployment.yaml', '      terminationGracePeriodSeconds: 35', '      terminationGracePeriodSeconds: "35"', /'35' is not of type 'integer'/],
  ['kubernetes/deployment.yaml', '          readinessProbe:', '          readynessProbe:', /readynessProbe/],
])('the checker refuses a mistake in %s', (file, from, to, message) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-deploy-'));
  const target = path.join(dir, path.basename(file));
  const text = fs.readFileSync(path.join(root, 'deploy', file), 'utf8');
  expect(text).toContain(from);
  fs.writeFileSync(target, text.replace(from, to));
  const r = validate(dir);
  expect(r.status).toBe(1);
  expect(r.stdout).toMatch(/INVALID/);
  expect(r.stdout).toMatch(message);
  fs.rmSync(dir, { recursive: true });
});

test('probes hit the health endpoints on the port the server is told to listen on', () => {
  const deployment = fs.readFileSync(path.join(root, 'deploy', 'kubernetes', 'deployment.yaml'), 'utf8');
  expect(deployment).toMatch(/readinessProbe:\s+httpGet:\s+path: \/v2\/health\/ready/);
  expect(deployment).toMatch(/livenessProbe:\s+httpGet:\s+path: \/v2\/health\/live/);
  expect(deployment).toMatch(/"--port", "8080"/);
  expect(deployment).toMatch(/containerPort: 8080/);
  // The grace period outlasts the drain deadline plus the preStop pause.
  const grace = Number(/terminationGracePeriodSeconds: (\d+)/.exec(deployment)[1]);
  const drain = Number(/"--shutdown-timeout-ms", "(\d+)"/.exec(deployment)[1]) / 1000;
  const pause = Number(/sleep:\s+seconds: (\d+)/.exec(deployment)[1]);
  expect(grace).toBeGreaterThan(drain + pause);
  const dockerfile = fs.readFileSync(path.join(root, 'deploy', 'Dockerfile'), 'utf8');
  expect(dockerfile).toMatch(/"--host", "0.0.0.0", "--port", "8080"/);
});
