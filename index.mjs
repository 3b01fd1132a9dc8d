import zgc from './index.js';

export const { load, Runtime, ZgcError, ABI_VERSION } = zgc;
export default zgc;
