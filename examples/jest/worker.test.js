const { Worker } = require('node:worker_threads');

// Each worker thread loads the artifact itself; results come back as structured clones.
test('runs in worker threads', async () => {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { load } = require(workerData.entry);
    const rt = load(workerData.artifact);
    parentPort.postMessage(rt.run({ a: [workerData.id, 0, 0, 0], b: [1, 1, 1, 1] })[0].data);
    rt.close();`;
  const entry = require.resolve('zgc-runtime');
  const artifact = require('node:path').join(__dirname, '..', 'build', 'add.so');
  const results = await Promise.all(
    [1, 2, 3].map((id) => {
      const worker = new Worker(code, { eval: true, workerData: { id, entry, artifact } });
      return new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject));
    }),
  );
  // A message is deserialised in Node's main realm, not the test's: toMatchTensor compares
  // any TypedArray, where toBeInstanceOf(Float32Array) would not hold for it.
  results.forEach((data, i) => expect(data).toMatchTensor([i + 2, 1, 1, 1]));
  expect(results.map((data) => data instanceof Float32Array)).toEqual([false, false, false]);
});
