// createRequire rather than `import zgc from './index.js'`: Deno reads a .js file outside
// node_modules as ESM, and would find no default export in it.
import { createRequire } from 'node:module';

const zgc = createRequire(import.meta.url)('./index.js');

export const { load, createPool, createBatcher, Runtime, Pool, Batcher, Sequence, ZgcError, ABI_VERSION, pto } = zgc;
export default zgc;
