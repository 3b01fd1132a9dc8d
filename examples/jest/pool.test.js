const path = require('node:path');
const { createPool } = require('zgc-runtime');

let pool;
beforeAll(() => {
  pool = createPool(path.join(__dirname, '..', 'build', 'add.so'), { size: 2 });
});
// Close pools (and runtimes) in afterAll: Jest then exits without --forceExit.
afterAll(() => pool?.close());

test('100 concurrent runs, each its own answer', async () => {
  const runs = Array.from({ length: 100 }, (_, i) => pool.run({ a: [i, i, i, i], b: [0, 1, 2, 3] }));
  const results = await Promise.all(runs);
  results.forEach(([sum], i) => expect(sum).toMatchTensor([i, i + 1, i + 2, i + 3]));
});

test('fake timers do not hold async runs back', async () => {
  jest.useFakeTimers();
  try {
    const [sum] = await pool.run({ a: [1, 1, 1, 1], b: [1, 1, 1, 1] });
    expect(sum).toMatchTensor([2, 2, 2, 2]);
    // Your own deadline, on the faked clock: it fires when the test says.
    const deadline = new Promise((resolve) => setTimeout(() => resolve('late'), 1000));
    jest.advanceTimersByTime(1000);
    await expect(deadline).resolves.toBe('late');
  } finally {
    jest.useRealTimers();
  }
});
