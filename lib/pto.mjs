// createRequire for the reason index.mjs gives.
import { createRequire } from 'node:module';

const pto = createRequire(import.meta.url)('./pto.js');

export const { load, PtoLibrary, PtoRuntime, PtoError } = pto;
export default pto;
