// ESM entry of zgc-runtime/client, loading the CommonJS one (as index.mjs does).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const client = require('./index.js');

export const { connect, Client, RemoteModel, RemoteSequence, RemoteStream, ZgcError } = client;
export default client;
