'use strict';

// The protocol over gRPC (inference.GRPCInferenceService) on @grpc/grpc-js, an optional
// dependency, with the messages written and read by lib/serve/pb.js: tensor bytes go as
// raw_input_contents and come back as views of the response's buffer.

const { Writer, schema, decode, messages } = require('../protocol/pb');
const { decodeLogSettings, decodeTraceSetting, encodeLogSettings, encodeTraceSetting } = require('../protocol/settings-pb');
const { decodeModelConfigResponse } = require('../protocol/model-config-pb');
const { ZgcError } = require('../errors');
const { grpcError, connectionError, timeoutError, GRPC } = require('./errors');

const SERVICE = '/inference.GRPCInferenceService/';
const { ParameterEntry } = messages;
/** An output's typed contents (servers that send no raw bytes, such as MLServer): 64-bit integers exact. */
const InferTensorContents = schema([
  [1, 'boolContents', 'bool', { repeated: true }],
  [2, 'intContents', 'int32', { repeated: true }],
  [3, 'int64Contents', 'int64n', { repeated: true }],
  [4, 'uintContents', 'uint32', { repeated: true }],
  [5, 'uint64Contents', 'uint64n', { repeated: true }],
  [6, 'fp32Contents', 'float', { repeated: true }],
  [7, 'fp64Contents', 'double', { repeated: true }],
  [8, 'bytesContents', 'bytes', { repeated: true }],
]);

const TensorMetadata = schema([
  [1, 'name', 'string'],
  [2, 'datatype', 'string'],
  [3, 'shape', 'int64', { repeated: true }],
]);
const RESPONSES = {
  ServerLive: schema([[1, 'live', 'bool']]),
  ServerReady: schema([[1, 'ready', 'bool']]),
  ModelReady: schema([[1, 'ready', 'bool']]),
  ServerMetadata: schema([
    [1, 'name', 'string'],
    [2, 'version', 'string'],
    [3, 'extensions', 'string', { repeated: true }],
  ]),
  ModelMetadata: schema([
    [1, 'name', 'string'],
    [2, 'versions', 'string', { repeated: true }],
    [3, 'platform', 'string'],
    [4, 'inputs', 'message', { repeated: true, schema: TensorMetadata }],
    [5, 'outputs', 'message', { repeated: true, schema: TensorMetadata }],
  ]),
  ModelInfer: schema([
    [1, 'modelName', 'string'],
    [2, 'modelVersion', 'string'],
    [3, 'id', 'string'],
    [4, 'parameters', 'map', { schema: ParameterEntry }],
    [
      5,
      'outputs',
      'message',
      {
        repeated: true,
        schema: schema([
          [1, 'name', 'string'],
          [2, 'datatype', 'string'],
          [3, 'shape', 'int64', { repeated: true }],
          [4, 'parameters', 'map', { schema: ParameterEntry }],
          [5, 'contents', 'message', { schema: InferTensorContents }],
        ]),
      },
    ],
    [6, 'rawOutputContents', 'bytes', { repeated: true }],
  ]),
  RepositoryIndex: schema([
    [
      1,
      'models',
      'message',
      {
        repeated: true,
        schema: schema([
          [1, 'name', 'string'],
          [2, 'version', 'string'],
          [3, 'state', 'string'],
          [4, 'reason', 'string'],
        ]),
      },
    ],
  ]),
  SystemSharedMemoryStatus: schema([
    [
      1,
      'regions',
      'map',
      {
        schema: schema([
          [1, 'key', 'string'],
          [
            2,
            'value',
            'message',
            {
              schema: schema([
                [1, 'name', 'string'],
                [2, 'key', 'string'],
                [3, 'offset', 'uint64'],
                [4, 'byteSize', 'uint64'],
              ]),
            },
          ],
        ]),
      },
    ],
  ]),
  Empty: schema([]),
};

// ModelStatisticsResponse (grpc_service.proto), read into the JSON REST gives.
const Duration = schema([
  [1, 'count', 'uint64'],
  [2, 'ns', 'uint64'],
]);
const DURATIONS = ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss'];
const InferStatistics = schema(DURATIONS.map((name, i) => [i + 1, name, 'message', { schema: Duration }]));
const BatchStatistics = schema([
  [1, 'batch_size', 'uint64'],
  [2, 'compute_input', 'message', { schema: Duration }],
  [3, 'compute_infer', 'message', { schema: Duration }],
  [4, 'compute_output', 'message', { schema: Duration }],
]);
const MemoryUsage = schema([
  [1, 'type', 'string'],
  [2, 'id', 'int64'],
  [3, 'byte_size', 'uint64'],
]);
RESPONSES.ModelStatistics = schema([
  [
    1,
    'model_stats',
    'message',
    {
      repeated: true,
      schema: schema([
        [1, 'name', 'string'],
        [2, 'version', 'string'],
        [3, 'last_inference', 'uint64'],
        [4, 'inference_count', 'uint64'],
        [5, 'execution_count', 'uint64'],
        [6, 'inference_stats', 'message', { schema: InferStatistics }],
        [7, 'batch_stats', 'message', { repeated: true, schema: BatchStatistics }],
        [8, 'memory_usage', 'message', { repeated: true, schema: MemoryUsage }],
      ]),
    },
  ],
]);

/** A decoded Duration (absent fields are proto3's zeros) as REST's `{ count, ns }`. */
const duration = (d) => ({ count: (d && d.count) || 0, ns: (d && d.ns) || 0 });

/** A ModelStatisticsResponse as REST's JSON. */
function statisticsJson(r) {
  return {
    model_stats: r.model_stats.map((m) => ({
      name: m.name || '',
      version: m.version || '',
      last_inference: m.last_inference || 0,
      inference_count: m.inference_count || 0,
      execution_count: m.execution_count || 0,
      inference_stats: Object.fromEntries(DURATIONS.map((k) => [k, duration(m.inference_stats && m.inference_stats[k])])),
      batch_stats: m.batch_stats.map((b) => ({ batch_size: b.batch_size || 0, compute_input: duration(b.compute_input), compute_infer: duration(b.compute_infer), compute_output: duration(b.compute_output) })),
      memory_usage: m.memory_usage.map((u) => ({ type: u.type || '', id: u.id || 0, byte_size: u.byte_size || 0 })),
    })),
  };
}

function loadGrpc() {
  try {
    return require('@grpc/grpc-js');
  } catch {
    throw new TypeError('a grpc:// address needs @grpc/grpc-js, an optional peer dependency: npm install @grpc/grpc-js');
  }
}

/** A map<string, InferParameter> entry of `key`: bool, string, or an integer (uint64 when `unsigned`). */
function parameter(w, number, key, value) {
  const entry = new Writer();
  entry.string(1, key);
  const p = new Writer();
  if (typeof value === 'boolean') {
    p.tag(1, 0);
    p.varint(value ? 1 : 0);
  } else if (typeof value === 'string') p.string(3, value);
  else {
    const big = BigInt(value);
    // uint64_param for the priority and for ids past int64's range; int64_param for the rest.
    p.tag(key === 'priority' || big >= 2n ** 63n ? 5 : 2, 0);
    p.raw(varintOf(big));
  }
  entry.message(2, p);
  w.message(number, entry);
}

/** The varint bytes of `v` (a bigint, negative as its 64-bit two's complement), exact. */
function varintOf(v) {
  let u = BigInt.asUintN(64, v);
  const out = [];
  while (u >= 0x80n) {
    out.push(Number(u & 0x7fn) | 0x80);
    u >>= 7n;
  }
  out.push(Number(u));
  return Uint8Array.from(out);
}

/** Where a tensor is in a shared memory region, as the protocol's parameters say it. */
function shmParameters(w, number, place) {
  parameter(w, number, 'shared_memory_region', place.region);
  parameter(w, number, 'shared_memory_byte_size', place.size);
  parameter(w, number, 'shared_memory_offset', place.offset);
}

/** The protocol's parameters of a decoded message, as plain values. */
function plainParameters(list) {
  const out = {};
  for (const { key, value } of list) out[key] = value && (value.stringParam ?? value.int64Param ?? value.uint64Param ?? value.boolParam ?? value.doubleParam);
  return out;
}

/** Typed `contents` of an output as a flat array (the JSON path reads it). */
function contentsData(c) {
  for (const key of ['boolContents', 'intContents', 'int64Contents', 'uintContents', 'uint64Contents', 'fp32Contents', 'fp64Contents', 'bytesContents']) {
    if (c[key] && c[key].length) return c[key];
  }
  return [];
}

/** A decoded ModelInferResponse as the transports give it: outputs with `bytes` or `data`. */
function inferResponse(r) {
  const raw = r.rawOutputContents;
  // One raw entry an output (empty for one left in shared memory, as Triton and serve send
  // them), or, from a server that leaves those out, one for each of the others.
  const aligned = raw.length === r.outputs.length;
  let k = 0;
  const outputs = r.outputs.map((o, i) => {
    const base = { name: o.name, datatype: o.datatype, shape: o.shape, parameters: plainParameters(o.parameters) };
    const shm = base.parameters.shared_memory_region !== undefined;
    if (shm && !aligned) return { ...base, shm: true };
    if (raw.length === 0) return { ...base, data: contentsData(o.contents || {}) };
    return { ...base, bytes: aligned ? raw[i] : raw[k++], ...(shm ? { shm: true } : {}) };
  });
  return { id: r.id, modelName: r.modelName, modelVersion: r.modelVersion, parameters: plainParameters(r.parameters), outputs };
}

const StreamResponse = schema([
  [1, 'errorMessage', 'string'],
  [2, 'inferResponse', 'message', { schema: RESPONSES.ModelInfer }],
]);

function streamResponse(m) {
  if (m.errorMessage) return { error: m.errorMessage, id: m.inferResponse ? m.inferResponse.id : undefined };
  return { response: inferResponse(m.inferResponse || { outputs: [], rawOutputContents: [], parameters: [] }) };
}

class GrpcTransport {
  constructor(url, options) {
    const grpc = loadGrpc();
    this.grpc = grpc;
    this.server = url.href.replace(/\/$/, '');
    const credentials = url.protocol === 'grpcs:' ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
    this.client = new grpc.Client(url.host, credentials, { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1, ...(options.grpcOptions || {}) });
    this.metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(options.headers || {})) this.metadata.set(k, String(v));
  }

  /** One unary call of `method` with the request bytes `body`; resolves the decoded response. */
  call(method, body, { signal, timeoutMs, decodeWith } = {}) {
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) return reject(signal.reason);
      const options = timeoutMs === undefined ? {} : { deadline: Date.now() + timeoutMs };
      let aborted = false;
      const call = this.client.makeUnaryRequest(
        SERVICE + method,
        (b) => b,
        decodeWith || ((b) => decode(RESPONSES[method] || RESPONSES.Empty, b)),
        body,
        this.metadata,
        options,
        (err, value) => {
          if (signal) signal.removeEventListener('abort', onAbort);
          if (aborted) return reject(signal.reason);
          if (!err) return resolve(value);
          if (err.code === GRPC.DEADLINE_EXCEEDED && timeoutMs !== undefined) return reject(timeoutError(this.server, timeoutMs));
          return reject(this.callError(err));
        },
      );
      const onAbort = () => {
        aborted = true;
        call.cancel();
      };
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  nameVersion(name, version) {
    const w = new Writer();
    w.string(1, name);
    w.string(2, version);
    return w.finish();
  }

  async live() {
    return (await this.call('ServerLive', Buffer.alloc(0))).live === true;
  }

  async ready() {
    return (await this.call('ServerReady', Buffer.alloc(0))).ready === true;
  }

  /** False also for a model or version the server does not know (some say NOT_FOUND, Triton says not ready). */
  async modelReady(name, version) {
    try {
      return (await this.call('ModelReady', this.nameVersion(name, version))).ready === true;
    } catch (err) {
      if (err.code === 'ERR_ZGC_REMOTE_NOT_FOUND') return false;
      throw err;
    }
  }

  serverMetadata() {
    return this.call('ServerMetadata', Buffer.alloc(0));
  }

  modelMetadata(name, version) {
    return this.call('ModelMetadata', this.nameVersion(name, version));
  }

  async repositoryIndex(options = {}) {
    const w = new Writer();
    w.bool(2, options.ready);
    return (await this.call('RepositoryIndex', w.finish())).models;
  }

  async load(name) {
    const w = new Writer();
    w.string(2, name);
    await this.call('RepositoryModelLoad', w.finish());
  }

  async unload(name) {
    const w = new Writer();
    w.string(2, name);
    await this.call('RepositoryModelUnload', w.finish());
  }

  async registerRegion(name, key, size) {
    const w = new Writer();
    w.string(1, name);
    w.string(2, key);
    w.uint(4, size);
    await this.call('SystemSharedMemoryRegister', w.finish());
  }

  async unregisterRegion(name) {
    const w = new Writer();
    w.string(1, name);
    await this.call('SystemSharedMemoryUnregister', w.finish());
  }

  /** The model's configuration, under the proto's field names as REST gives it (the fields model_config.proto's table here holds). */
  async modelConfig(name, version) {
    return (await this.call('ModelConfig', this.nameVersion(name, version), { decodeWith: decodeModelConfigResponse })).config;
  }

  /** Inference statistics (of every model, or of one), as REST gives them. */
  async statistics(name, version) {
    return statisticsJson(await this.call('ModelStatistics', this.nameVersion(name, version)));
  }

  /** The regions, as REST lists them: `{ name, key, offset, byte_size }[]`. */
  async sharedMemoryStatus(region) {
    const w = new Writer();
    w.string(1, region);
    const { regions } = await this.call('SystemSharedMemoryStatus', w.finish());
    return regions.map(({ value: r }) => ({ name: r.name, key: r.key, offset: r.offset ?? 0, byte_size: r.byteSize ?? 0 }));
  }

  /** The log settings (each a boolean, number or string, as REST gives them); with `settings`, changes them. */
  async logSettings(settings) {
    const r = await this.call('LogSettings', settings === undefined ? Buffer.alloc(0) : encodeLogSettings(settings), { decodeWith: decodeLogSettings });
    return r.settings;
  }

  /**
   * The trace settings as REST gives them (trace_level a list, the others a string); with
   * `settings`, changes them (null clears one).
   */
  async traceSettings(model, settings) {
    const w = new Writer();
    // An empty list clears a setting (as tritonclient sends None).
    if (settings !== undefined) w.raw(encodeTraceSetting(Object.fromEntries(Object.entries(settings).map(([k, v]) => [k, v === null ? [] : Array.isArray(v) ? v.map(String) : [String(v)]]))));
    w.string(2, model);
    const r = await this.call('TraceSetting', w.finish(), { decodeWith: decodeTraceSetting });
    return Object.fromEntries(Object.entries(r.settings).map(([k, v]) => [k, k === 'trace_level' || v === null || v.length !== 1 ? v : v[0]]));
  }

  /** A ModelInferRequest, written now: inputs' bytes go as raw_input_contents. */
  prepare(name, version, request) {
    const w = new Writer();
    w.string(1, name);
    w.string(2, version);
    w.string(3, request.id);
    for (const [key, value] of Object.entries(request.parameters)) parameter(w, 4, key, value);
    for (const t of request.inputs) {
      const input = new Writer();
      input.string(1, t.name);
      input.string(2, t.datatype);
      input.packedInt64(3, t.shape);
      if (t.shm) shmParameters(input, 4, t.shm);
      w.message(5, input);
    }
    for (const o of request.outputs || []) {
      const out = new Writer();
      out.string(1, o.name);
      if (o.classCount) parameter(out, 2, 'classification', o.classCount);
      if (o.shm) shmParameters(out, 2, o.shm);
      w.message(6, out);
    }
    for (const t of request.inputs) {
      if (t.shm) continue;
      w.tag(7, 2);
      w.varint(t.bytes.byteLength);
      w.raw(t.bytes);
    }
    // One buffer of its own: the inputs may change once the call returns.
    return Buffer.concat(w.pieces(), w.length);
  }

  async infer(name, version, body, options) {
    return inferResponse(await this.call('ModelInfer', body, options));
  }

  /**
   * A ModelStreamInfer call: write prepared requests to it; it emits 'data' with
   * `{ error, id }` or `{ response }` (as `infer` resolves), and 'error' for the call's end.
   */
  stream() {
    return this.client.makeBidiStreamRequest(SERVICE + 'ModelStreamInfer', (b) => b, (b) => streamResponse(decode(StreamResponse, b)), this.metadata, {});
  }

  /** A gRPC error of a call (a stream's) as the client's error. */
  /**
   * A gRPC error as the client's. UNAVAILABLE is the server's own refusal (it did not run the
   * call: retried elsewhere) unless grpc-js raised it for the connection: never made (not
   * sent), or lost (the call may have run). A message over the size limit is no refusal.
   */
  callError(err) {
    const details = err.details || '';
    if (err.code === GRPC.UNAVAILABLE && /No connection established|ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/.test(details)) return connectionError(this.server, { code: 'UNAVAILABLE', message: details }, false);
    if (err.code === GRPC.UNAVAILABLE && /Connection dropped|ECONNRESET|EPIPE|RST_STREAM|GOAWAY|closed/i.test(details)) return connectionError(this.server, { code: 'UNAVAILABLE', message: details }, true);
    if (err.code === GRPC.RESOURCE_EXHAUSTED && /larger than max/i.test(details)) return new ZgcError('ERR_ZGC_REMOTE', `${this.server}: ${details}`, { status: err.code, server: this.server });
    return grpcError(this.server, err.code, details);
  }

  close() {
    this.client.close();
  }
}

module.exports = { GrpcTransport };
