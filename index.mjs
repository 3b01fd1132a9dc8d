import zgc from './index.js';

export const { load, createPool, Runtime, Pool, ZgcError, ABI_VERSION, pto } = zgc;
export default zgc;
