'use strict';

/**
 * napi-rs's name for this platform (`linux-x64-gnu`, `darwin-arm64`, ...): the suffix of the
 * addon file `zgc-runtime.<name>.node` and of the platform package `zgc-runtime-<name>`.
 */
function platformName() {
  const { platform, arch } = process;
  // The Windows build is MinGW's (napi-rs's `-gnu`); Node-API is a C ABI, so every Windows
  // Node (Microsoft's compiler builds the official ones) loads it.
  if (platform === 'win32') return `win32-${arch}-gnu`;
  if (platform !== 'linux') return `${platform}-${arch}`;
  const report = process.report && typeof process.report.getReport === 'function' ? process.report.getReport() : null;
  const glibc = report && report.header && report.header.glibcVersionRuntime;
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
}

/** napi's platform names of the Rust targets the package is built for. */
const TARGET_PLATFORMS = {
  'x86_64-unknown-linux-gnu': 'linux-x64-gnu',
  'aarch64-unknown-linux-gnu': 'linux-arm64-gnu',
  'x86_64-unknown-linux-musl': 'linux-x64-musl',
  'aarch64-unknown-linux-musl': 'linux-arm64-musl',
  'x86_64-pc-windows-gnu': 'win32-x64-gnu',
  // Built and tested on macOS runners by .github/workflows/release.yml: no Mac here.
  'x86_64-apple-darwin': 'darwin-x64',
  'aarch64-apple-darwin': 'darwin-arm64',
};

/** The JavaScript host and its version, for messages: `Node v24.1.0`, `Bun 1.2.0`, `Deno 2.1.0`. */
function hostName() {
  if (process.versions.bun) return `Bun ${process.versions.bun}`;
  if (globalThis.Deno && globalThis.Deno.version) return `Deno ${globalThis.Deno.version.deno}`;
  return `Node ${process.version}`;
}

/** Whether `platform` (a napi name) has isolated instances: they are built on Linux's memfd, pidfd and parent-death signal. */
const isolates = (platform) => platform.startsWith('linux-');

module.exports = { platformName, hostName, TARGET_PLATFORMS, isolates };
