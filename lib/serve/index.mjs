// ESM entry of zgc-runtime/serve, loading the CommonJS one (as index.mjs does).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const serve = require('./index.js');

export const { createServer, createHandler, ModelRepository, LoadError } = serve;
export default serve;
