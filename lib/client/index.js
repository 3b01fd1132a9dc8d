'use strict';

// zgc-runtime/client: one API for a model in this process or on any Open Inference Protocol
// server (zgc-runtime serve, Triton, KServe, MLServer), over REST or gRPC, on one server or
// spread over several.

const { ZgcError } = require('../errors');
const { refuseUnknownKeys } = require('../options');
const { RemoteModel, RemoteSequence } = require('./model');
const { Servers } = require('./servers');
const { RemoteStream } = require('./stream');
const { Regions, placeInRegion, regionBytes, readPlace } = require('./shm');
const { DATATYPES, PROTOCOL } = require('../protocol/datatypes');

const CONNECT_OPTIONS = ['binary', 'headers', 'f16', 'maxSockets', 'retryAfterMs', 'grpcOptions', 'sharedMemory'];
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** The transport of `url`: REST for http(s)://, gRPC for grpc:// (grpcs:// with TLS). */
function transportOf(url, options) {
  if (url.protocol === 'http:' || url.protocol === 'https:') {
    const { RestTransport } = require('./rest');
    return new RestTransport(url, options);
  }
  if (url.protocol === 'grpc:' || url.protocol === 'grpcs:') {
    const { GrpcTransport } = require('./grpc');
    return new GrpcTransport(url, options);
  }
  throw new TypeError(`connect() takes http://, https://, grpc:// or grpcs:// addresses, got ${url.href}`);
}

function parseUrl(u) {
  if (typeof u !== 'string' && !(u instanceof URL)) throw new TypeError(`connect() takes an address or an array of addresses, got ${typeof u}`);
  try {
    return new URL(u);
  } catch {
    throw new TypeError(`connect(): ${JSON.stringify(String(u))} is no URL (give one like http://127.0.0.1:8000 or grpc://127.0.0.1:8001)`);
  }
}

class Client {
  #servers;
  #f16;
  /** Streams not yet over: close() cancels them (a closed gRPC channel waits for its calls). */
  #streams = new Set();

  /** Shared memory regions with the one server, when `sharedMemory: 'auto'` found it can. */
  #regions = null;

  constructor(servers, f16, binary, regions) {
    this.#servers = servers;
    this.#f16 = f16;
    this.binary = binary;
    this.#regions = regions;
  }

  /** Whether tensors go through shared memory (`sharedMemory: 'auto'`, and the server is here and takes it). */
  get sharedMemory() {
    return this.#regions !== null;
  }

  /** The servers' addresses. */
  get urls() {
    return this.#servers.list.map((s) => s.url);
  }

  /** A model on the server(s), described from its metadata. `{ version }` pins a version. */
  async model(name, options = {}) {
    if (typeof name !== 'string' || name === '') throw new TypeError('model() takes a model name');
    if (options === null || typeof options !== 'object') throw new TypeError('model() options must be an object');
    refuseUnknownKeys('model()', options, ['version', 'f16']);
    const version = options.version === undefined ? undefined : String(options.version);
    const f16 = checkF16(options.f16 ?? this.#f16);
    const { response } = await this.#servers.call((t) => t.modelMetadata(name, version), { idempotent: true });
    return new RemoteModel(this, response, version, f16);
  }

  /**
   * @internal A model's infer on the server picked (or `pin`): resolves `{ server, response }`.
   * `wanted`: the outputs asked for, which a shared memory region makes room for.
   */
  infer(name, version, request, { signal, timeoutMs, idempotent, pin, wanted }) {
    const region = this.#region(request, wanted);
    if (region !== null) return this.#inferShared(name, version, request, region, { signal, timeoutMs, idempotent, pin });
    const prepared = this.#servers.prepare(name, version, request);
    return this.#servers.call((t) => t.infer(name, version, prepared, { signal, timeoutMs, idempotent }), { idempotent, pin, signal });
  }

  /** A region for this request, its inputs written into it now; null when it goes over the wire. */
  #region(request, wanted) {
    if (this.#regions === null || request.outputs !== undefined && request.outputs.some((o) => o.classCount)) return null;
    if (!request.inputs.every((t) => t.bytes !== undefined && t.dtype !== 'bytes')) return null;
    const outputBytes = [];
    for (const w of wanted) {
      const type = DATATYPES[PROTOCOL[w.dtype]];
      if (type === undefined || type.size === 0 || !w.shape.every((d) => d >= 0)) return null;
      outputBytes.push({ name: w.name, bytes: w.shape.reduce((a, b) => a * b, 1) * type.size });
    }
    if (outputBytes.length === 0) return null;
    const region = this.#regions.take(regionBytes(request, outputBytes));
    if (region === null) return null;
    return { region, places: placeInRegion(request, region, outputBytes) };
  }

  async #inferShared(name, version, request, { region, places }, options) {
    let sent;
    try {
      await region.registered;
      const prepared = this.#servers.prepare(name, version, request);
      sent = await this.#servers.call((t) => t.infer(name, version, prepared, options), { idempotent: options.idempotent, pin: options.pin, signal: options.signal });
      // The outputs placed in the region are read from it, whatever the response says of them.
      for (const o of sent.response.outputs) if (places.has(o.name)) o.bytes = readPlace(region, places.get(o.name));
      this.#regions.give(region);
      return sent;
    } catch (err) {
      // Refused before it ran, the region is free again. A run given up (a timeout, an abort,
      // a lost connection) may still write it: it is dropped, never handed to another run.
      if (refusedBeforeRunning(err)) this.#regions.give(region);
      else this.#regions.drop(region);
      throw err;
    }
  }

  /**
   * A stream of requests to one server (gRPC's ModelStreamInfer), and their responses as an
   * async iterable: `send(model, inputs, options)`, `end()`, `cancel()`.
   */
  stream() {
    const stream = new RemoteStream(this.#servers.pick(new Set()), this.binary, () => this.#streams.delete(stream));
    this.#streams.add(stream);
    return stream;
  }

  /** @internal The server a new sequence's runs all go to: the least busy now. */
  pick() {
    return this.#servers.pick(new Set());
  }

  #one(f) {
    return this.#servers.call(f, { idempotent: true }).then((r) => r.response);
  }

  /** Whether the server is live (`/v2/health/live`). */
  live() {
    return this.#one((t) => t.live());
  }
  /** Whether the server is ready for requests (`/v2/health/ready`). */
  ready() {
    return this.#one((t) => t.ready());
  }
  /** Whether a model (version) is ready. */
  modelReady(name, version) {
    return this.#one((t) => t.modelReady(name, version === undefined ? undefined : String(version)));
  }
  /** The server's name, version and extensions. */
  metadata() {
    return this.#one((t) => t.serverMetadata());
  }
  /** A model's metadata, as the server gives it. */
  modelMetadata(name, version) {
    return this.#one((t) => t.modelMetadata(name, version === undefined ? undefined : String(version)));
  }
  /** A model's configuration (Triton's model_config). */
  modelConfig(name, version) {
    return this.#one((t) => t.modelConfig(name, version === undefined ? undefined : String(version)));
  }
  /** Inference statistics of every model, or of one. */
  statistics(name, version) {
    return this.#one((t) => t.statistics(name, version === undefined ? undefined : String(version)));
  }
  /** The model repository's index: `{ name, version, state, reason }[]`. */
  repositoryIndex(options) {
    return this.#one((t) => t.repositoryIndex(options));
  }
  /** Loads (or reloads) a model, with Triton's load parameters (`config`, files) when given. */
  loadModel(name, options) {
    return this.#servers.call((t) => t.load(name, options), { idempotent: true, all: true }).then(() => undefined);
  }
  /** Unloads a model. */
  unloadModel(name, options) {
    return this.#servers.call((t) => t.unload(name, options), { idempotent: true, all: true }).then(() => undefined);
  }
  /** System shared memory regions the server holds (all, or one). */
  sharedMemoryStatus(region) {
    return this.#one((t) => t.sharedMemoryStatus(region));
  }
  /** The log settings; with `settings`, changes them and answers the new ones. */
  logSettings(settings) {
    return this.#one((t) => t.logSettings(settings));
  }
  /** The trace settings (of the server, or of `model`); with `settings`, changes them. */
  traceSettings(model, settings) {
    return this.#one((t) => t.traceSettings(model, settings));
  }

  /** Per-server figures: requests, outstanding, failures, failovers, whether it is taken. */
  stats() {
    return this.#servers.stats();
  }

  /**
   * Closes the connections; requests in flight fail, and open streams are cancelled. Resolves
   * once shared memory regions are unregistered and removed.
   */
  async close() {
    for (const stream of this.#streams) stream.cancel();
    if (this.#regions !== null) await this.#regions.close();
    this.#servers.close();
  }
}

/** Whether `err` is the server's refusal of a request it did not run (a 4xx, NOT_FOUND, INVALID_ARGUMENT). */
function refusedBeforeRunning(err) {
  return err instanceof ZgcError && (err.code === 'ERR_ZGC_REMOTE_INVALID' || err.code === 'ERR_ZGC_REMOTE_NOT_FOUND');
}

function checkF16(f16) {
  if (f16 === undefined) return 'float32';
  if (f16 !== 'float32' && f16 !== 'bits' && f16 !== 'float16') throw new TypeError(`option f16 must be 'float32', 'bits' or 'float16', got ${String(f16)}`);
  if (f16 === 'float16' && typeof globalThis.Float16Array !== 'function') throw new TypeError(`option f16 'float16' needs a host with Float16Array; this one (${process.release.name} ${process.version}) has none`);
  return f16;
}

/**
 * Connects to one server or several (`urls`): resolves a Client once one of them answers.
 * Several spread requests by fewest outstanding and fail over (`docs/client.md`).
 */
async function connect(target, options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('connect() options must be an object');
  refuseUnknownKeys('connect()', options, CONNECT_OPTIONS);
  const urls = (Array.isArray(target) ? target : [target]).map(parseUrl);
  if (urls.length === 0) throw new TypeError('connect() needs at least one address');
  const kinds = new Set(urls.map((u) => (u.protocol.startsWith('grpc') ? 'grpc' : 'rest')));
  if (kinds.size > 1) throw new TypeError('connect(): the addresses mix REST and gRPC; give one kind');
  const f16 = checkF16(options.f16);
  const sharedMemory = options.sharedMemory ?? 'off';
  if (sharedMemory !== 'off' && sharedMemory !== 'auto') throw new TypeError(`connect() option sharedMemory must be 'auto' or 'off', got ${String(sharedMemory)}`);
  if (options.binary !== undefined && typeof options.binary !== 'boolean') throw new TypeError(`connect() option binary must be a boolean, got ${String(options.binary)}`);
  const servers = new Servers(urls.map((u) => ({ url: u.href.replace(/\/$/, ''), transport: transportOf(u, options) })), options);
  const grpc = [...kinds][0] === 'grpc';
  let binary = grpc || options.binary !== false;
  let regions = null;
  try {
    const { response: meta } = await servers.call((t) => t.serverMetadata(), { idempotent: true });
    const extensions = Array.isArray(meta.extensions) ? meta.extensions : [];
    // Binary tensors unless asked otherwise, where the server lists the extension (MLServer
    // does not take it, and answers a binary body 500).
    if (!grpc && options.binary === undefined && !extensions.includes('binary_tensor_data')) {
      binary = false;
      for (const s of servers.list) s.transport.binary = false;
    }
    // One server on this host that lists the extension: regions with it (Linux's /dev/shm).
    if (sharedMemory === 'auto' && binary && urls.length === 1 && process.platform === 'linux' && LOOPBACK.has(urls[0].hostname) && extensions.includes('system_shared_memory')) {
      regions = new Regions(servers.list[0].transport);
    }
  } catch (err) {
    servers.close();
    throw err;
  }
  return new Client(servers, f16, binary, regions);
}

module.exports = { connect, Client, RemoteModel, RemoteSequence, RemoteStream, ZgcError };
