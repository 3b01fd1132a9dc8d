'use strict';

// The ZGC ABI bound by hand with koffi: what a Node user would write without this package.
const koffi = require('koffi');

function bindArtifact(path) {
  const lib = koffi.load(path);
  const api = {
    size: lib.func('size_t zgc_runtime_size(void)'),
    alignment: lib.func('size_t zgc_runtime_alignment(void)'),
    init: lib.func('int zgc_runtime_init(void *rt, size_t size)'),
    run: lib.func('int zgc_runtime_run(void *rt)'),
    copySource: lib.func('int zgc_runtime_copy_source(void *rt, uint32_t key, const void *data, size_t size)'),
    bindSource: lib.func('int zgc_runtime_bind_source(void *rt, uint32_t key, void *data, size_t size)'),
    copyOutput: lib.func('int zgc_runtime_copy_output(void *rt, size_t index, void *data, size_t size)'),
  };
  const size = Number(api.size());
  const align = Number(api.alignment());
  // Storage aligned as the artifact asks, kept alive by `storage`.
  const storage = new ArrayBuffer(size + align);
  const base = koffi.address(storage);
  const rt = new Uint8Array(storage, Number((BigInt(align) - (base % BigInt(align))) % BigInt(align)), size);
  const check = (status, what) => {
    if (status !== 0) throw new Error(`${what} returned ${status}`);
  };
  check(api.init(rt, size), 'zgc_runtime_init');
  return { api, rt, check, keepAlive: storage };
}

module.exports = { bindArtifact };
