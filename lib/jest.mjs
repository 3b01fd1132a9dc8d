// The Jest matchers for ESM test files: import matchers from 'zgc-runtime/jest'.
// createRequire for the reason index.mjs gives.
import { createRequire } from 'node:module';

const matchers = createRequire(import.meta.url)('./jest.js');

export const { toMatchTensor } = matchers;
export default matchers;
