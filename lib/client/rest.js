'use strict';

// The protocol over HTTP/1.1: JSON for everything, and for infer the binary tensor data
// extension (a JSON header, then each tensor's raw bytes) unless JSON is asked for.
// Connections are kept alive and reused.

const http = require('node:http');
const https = require('node:https');
const { httpError, connectionError, timeoutError, responseError } = require('./errors');

// The marker JSON.stringify writes for a NUL: bigints and non-finite numbers are marked strings
// first, then written bare.
const MARK = '\u0000\u0001zgc';
const MARKED = /"\\u0000\\u0001zgc(NaN|-?Infinity|-?\d+|-0\.0)\\u0000\\u0001zgc"/g;

/** A request body as JSON, with bigints as their digits, and NaN, ±Infinity and -0 as Python writes them. */
function jsonText(value) {
  const text = JSON.stringify(value, (_, v) => (typeof v === 'bigint' || (typeof v === 'number' && !Number.isFinite(v)) ? `${MARK}${v}${MARK}` : Object.is(v, -0) ? `${MARK}-0.0${MARK}` : v));
  return text.replace(MARKED, '$1');
}

/**
 * A response's JSON: bare NaN and ±Infinity (as Python's json and Triton write them) read as
 * those numbers, and integers past 2^53 (INT64, UINT64 data) kept exact, as bigints.
 */
function parseJson(text) {
  if (!/NaN|Infinity|\d{16}/.test(text)) return JSON.parse(text);
  // Outside strings, each such token becomes a marked string, then its value.
  const marked = text.replace(/"(?:[^"\\]|\\.)*"|(-?Infinity|NaN|(?<![\d.eE+-])-?\d{16,}(?![\d.eE]))/g, (m, token) => (token ? `"\\u0000zgc:${token}"` : m));
  return JSON.parse(marked, (_, v) => (typeof v === 'string' && v.startsWith('\u0000zgc:') ? revive(v.slice(5)) : v));
}

function revive(token) {
  const n = Number(token);
  return Number.isNaN(n) || !Number.isFinite(n) || Number.isSafeInteger(n) ? n : BigInt(token);
}

class RestTransport {
  constructor(url, options) {
    this.url = url;
    this.server = url.origin;
    this.base = url.pathname.replace(/\/$/, '');
    this.binary = options.binary !== false;
    this.headers = options.headers || {};
    const lib = url.protocol === 'https:' ? https : http;
    this.lib = lib;
    this.agent = new lib.Agent({ keepAlive: true, maxSockets: options.maxSockets ?? Infinity, ...(options.agentOptions || {}) });
  }

  /**
   * One request: resolves `{ status, headers, body }` (a Buffer of its own memory) for any
   * status. Rejects on a connection that fails, `timeoutMs` passing, or `signal`.
   */
  request(method, path, options = {}) {
    return this.send(method, path, options).catch((err) => {
      // A kept-alive connection the server closed as this request went out: sent again once,
      // on a new connection, when it may run twice (Node's reusedSocket advice). If that fails
      // too, the first failure is the one to tell: the request may have reached the server.
      if (err.reused && options.idempotent !== false) return this.send(method, path, options).catch((again) => Promise.reject(again.code === 'ERR_ZGC_CONNECTION' && !again.sent ? err : again));
      throw err;
    });
  }

  send(method, path, { body, headers, signal, timeoutMs } = {}) {
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) return reject(signal.reason);
      let sent = false;
      let answered = false;
      let timer;
      const req = this.lib.request(
        { method, host: this.url.hostname, port: this.url.port, path: this.base + path, agent: this.agent, headers: { ...this.headers, ...headers, ...(body ? { 'Content-Length': body.byteLength } : {}) } },
        (res) => {
          answered = true;
          const length = Number(res.headers['content-length']);
          const chunks = [];
          let got = 0;
          res.on('data', (c) => {
            chunks.push(c);
            got += c.length;
          });
          res.on('end', () => {
            // Its own memory: a view of it is handed to the caller as tensor data.
            const buf = Buffer.allocUnsafeSlow(Number.isFinite(length) ? Math.max(length, got) : got);
            let pos = 0;
            for (const c of chunks) {
              c.copy(buf, pos);
              pos += c.length;
            }
            done(null, { status: res.statusCode, headers: res.headers, body: buf.subarray(0, got) });
          });
          res.on('error', (err) => done(connectionError(this.server, err, true)));
        },
      );
      const onAbort = () => {
        req.destroy();
        done(signal.reason);
      };
      const done = (err, value) => {
        clearTimeout(timer);
        if (signal) signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(value);
      };
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          req.destroy();
          done(timeoutError(this.server, timeoutMs));
        }, timeoutMs);
      }
      req.on('socket', (socket) => {
        // A reused socket is connected: the request's bytes may reach the server from now.
        if (!socket.connecting) sent = true;
        else socket.once('connect', () => (sent = true));
      });
      req.on('error', (err) => {
        const lost = connectionError(this.server, err, sent);
        if (req.reusedSocket && !answered && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) lost.reused = true;
        done(lost);
      });
      if (body) req.end(body);
      else req.end();
    });
  }

  /** A JSON request; resolves its parsed answer, rejects a refusal as a ZgcError. */
  async json(method, path, value, options = {}) {
    const body = value === undefined ? undefined : Buffer.from(jsonText(value));
    const res = await this.request(method, path, { ...options, body, headers: body ? { 'Content-Type': 'application/json' } : {} });
    if (res.status >= 400) throw this.refusal(res);
    if (res.body.length === 0) return {};
    try {
      return parseJson(res.body.toString('utf8'));
    } catch (err) {
      throw responseError(this.server, `to ${method} ${path} is not JSON (${err.message})`);
    }
  }

  refusal(res) {
    const text = res.body.toString('utf8');
    let message;
    try {
      // The protocol's { error }; FastAPI's servers (KServe, MLServer) answer { detail }.
      const body = JSON.parse(text);
      const said = body.error ?? body.detail;
      message = said === undefined ? text : typeof said === 'string' ? said : JSON.stringify(said);
    } catch {
      message = text;
    }
    if (message.length > 1024) message = `${message.slice(0, 1024)}…`;
    const retry = Number(res.headers['retry-after']);
    return httpError(this.server, res.status, message, Number.isFinite(retry) ? retry * 1000 : undefined);
  }

  async live() {
    const res = await this.request('GET', '/v2/health/live');
    return res.status === 200;
  }

  async ready() {
    const res = await this.request('GET', '/v2/health/ready');
    return res.status === 200;
  }

  async modelReady(name, version) {
    const res = await this.request('GET', `${modelPath(name, version)}/ready`);
    return res.status === 200;
  }

  serverMetadata() {
    return this.json('GET', '/v2');
  }

  modelMetadata(name, version) {
    return this.json('GET', modelPath(name, version));
  }

  modelConfig(name, version) {
    return this.json('GET', `${modelPath(name, version)}/config`);
  }

  statistics(name, version) {
    return this.json('GET', name === undefined ? '/v2/models/stats' : `${modelPath(name, version)}/stats`);
  }

  repositoryIndex(options = {}) {
    return this.json('POST', '/v2/repository/index', options.ready === undefined ? {} : { ready: options.ready });
  }

  async load(name, options = {}) {
    await this.json('POST', `/v2/repository/models/${encodeURIComponent(name)}/load`, options.parameters ? { parameters: options.parameters } : {});
  }

  async unload(name, options = {}) {
    await this.json('POST', `/v2/repository/models/${encodeURIComponent(name)}/unload`, options.parameters ? { parameters: options.parameters } : {});
  }

  sharedMemoryStatus(region) {
    return this.json('GET', region === undefined ? '/v2/systemsharedmemory/status' : `/v2/systemsharedmemory/region/${encodeURIComponent(region)}/status`);
  }

  async registerRegion(name, key, size) {
    await this.json('POST', `/v2/systemsharedmemory/region/${encodeURIComponent(name)}/register`, { key, offset: 0, byte_size: size });
  }

  async unregisterRegion(name) {
    await this.json('POST', `/v2/systemsharedmemory/region/${encodeURIComponent(name)}/unregister`);
  }

  logSettings(settings) {
    return settings === undefined ? this.json('GET', '/v2/logging') : this.json('POST', '/v2/logging', settings);
  }

  traceSettings(model, settings) {
    const path = model === undefined ? '/v2/trace/setting' : `/v2/models/${encodeURIComponent(model)}/trace/setting`;
    return settings === undefined ? this.json('GET', path) : this.json('POST', path, settings);
  }

  /**
   * An infer request (lib/client/request.js's form) written as the binary extension or JSON:
   * its body, copied from the inputs now, sent by `infer` to any server.
   */
  prepare(_name, _version, request) {
    const header = { ...(request.id !== undefined ? { id: request.id } : {}), ...(Object.keys(request.parameters).length ? { parameters: { ...request.parameters } } : {}) };
    const pieces = [];
    header.inputs = request.inputs.map((t) => {
      const input = { name: t.name, shape: t.shape, datatype: t.datatype };
      if (t.shm) input.parameters = shmParameters(t.shm);
      else if (this.binary) {
        pieces.push(t.bytes);
        input.parameters = { binary_data_size: t.bytes.byteLength };
      } else input.data = t.json;
      return input;
    });
    if (request.outputs !== undefined) {
      header.outputs = request.outputs.map((o) => {
        if (o.shm) return { name: o.name, parameters: shmParameters(o.shm) };
        const p = { ...(this.binary ? { binary_data: true } : {}), ...(o.classCount ? { classification: o.classCount } : {}) };
        return Object.keys(p).length ? { name: o.name, parameters: p } : { name: o.name };
      });
    } else if (this.binary) {
      header.parameters = { ...header.parameters, binary_data_output: true };
    }
    const headText = Buffer.from(jsonText(header));
    const body = pieces.length ? Buffer.concat([headText, ...pieces]) : headText;
    const headers = this.binary ? { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': headText.length } : { 'Content-Type': 'application/json' };
    return { body, headers };
  }

  /**
   * Sends a prepared infer. Resolves `{ id, modelName, modelVersion, parameters, outputs }`,
   * each output with `bytes` (binary) or `data` (JSON).
   */
  async infer(name, version, { body, headers }, { signal, timeoutMs, idempotent }) {
    const res = await this.request('POST', `${modelPath(name, version)}/infer`, { body, headers, signal, timeoutMs, idempotent });
    if (res.status >= 400) throw this.refusal(res);
    return this.inferResponse(res);
  }

  inferResponse(res) {
    const given = res.headers['inference-header-content-length'];
    const headLength = given === undefined ? res.body.length : Number(given);
    if (!Number.isSafeInteger(headLength) || headLength < 0 || headLength > res.body.length) throw responseError(this.server, `says its JSON header is ${given} bytes; the body has ${res.body.length}`);
    let head;
    try {
      head = parseJson(res.body.toString('utf8', 0, headLength));
    } catch (err) {
      throw responseError(this.server, `header is not JSON (${err.message})`);
    }
    let pos = headLength;
    const outputs = (head.outputs || []).map((o) => {
      const size = o.parameters && o.parameters.binary_data_size;
      if (o.parameters && o.parameters.shared_memory_region !== undefined) return { name: o.name, datatype: o.datatype, shape: o.shape, parameters: o.parameters, shm: true };
      // KServe writes absent parameters as null.
      if (size === undefined || size === null) return { name: o.name, datatype: o.datatype, shape: o.shape, parameters: o.parameters || {}, data: o.data };
      if (pos + size > res.body.length) throw responseError(this.server, `output ${JSON.stringify(o.name)} says ${size} bytes; ${res.body.length - pos} are left`);
      const bytes = res.body.subarray(pos, pos + size);
      pos += size;
      return { name: o.name, datatype: o.datatype, shape: o.shape, parameters: o.parameters, bytes };
    });
    return { id: head.id, modelName: head.model_name, modelVersion: head.model_version, parameters: head.parameters || {}, outputs };
  }

  close() {
    this.agent.destroy();
  }
}

/** Where a tensor is in a shared memory region, as the protocol's parameters say it. */
const shmParameters = (place) => ({ shared_memory_region: place.region, shared_memory_byte_size: place.size, shared_memory_offset: place.offset });

function modelPath(name, version) {
  const m = `/v2/models/${encodeURIComponent(name)}`;
  return version === undefined || version === '' ? m : `${m}/versions/${encodeURIComponent(version)}`;
}

module.exports = { RestTransport, jsonText, parseJson };
