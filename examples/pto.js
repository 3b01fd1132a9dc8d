'use strict';

// The PTO host library end to end: load, select the device, register the three kernels of
// the task graph, run it once and let FinalizeRuntime validate the results.
//   node examples/pto.js [libpto_runtime.so]   (default: the CPU host library of examples/build, built if missing)
const fs = require('node:fs');
const path = require('node:path');
const { pto } = require('..');

async function main(libraryPath) {
  const library = pto.load(libraryPath); // the same path again gives this same library
  await library.setDevice(0); // the first id wins for the whole process
  const kernels = ['add', 'add_scalar', 'mul']; // on the CPU fixture a kernel's bytes name it
  for (const [funcId, name] of kernels.entries()) await library.registerKernel(funcId, new TextEncoder().encode(name));

  const runtime = library.createRuntime();
  await runtime.initialize(); // 64-byte aligned storage, kept until finalize returns
  await runtime.launch({
    aicpuThreadNum: 1,
    blockDim: 1,
    aicpuBinary: new TextEncoder().encode('aicpu scheduler'),
    aicoreBinary: new TextEncoder().encode('aicore kernels'),
  });
  try {
    await runtime.finalize(); // validation: rejects ERR_PTO_VALIDATION if tasks were skipped
    console.log(`task graph ran on device ${library.device} (thread ${library.threadId}) and validated`);
  } catch (err) {
    console.error(`${err.code} from ${err.operation} (rc ${err.rc}): ${err.message}`);
    process.exitCode = 1;
  }
}

let target = process.argv[2];
if (!target) {
  // The CPU host library `npm run demo` builds (examples/build.js).
  target = path.join(__dirname, 'build', 'pto-host.so');
  if (!fs.existsSync(target)) require('./build').buildExamples();
}
main(target);
