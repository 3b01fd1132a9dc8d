import pto from './lib/pto.js';

export const { load, PtoLibrary, PtoRuntime, PtoError } = pto;
export default pto;
