'use strict';

// The protocol's gRPC service (inference.GRPCInferenceService, lib/serve/inference.proto) on
// @grpc/grpc-js, over the same models, pools, metrics and drain as the REST handler. Errors
// carry gRPC status codes and the same messages REST gives; outputs go back as raw bytes.

const { decode, encoders, messages, DecodeError } = require('./pb');
const { RequestError } = require('./protocol');
const { overBudget } = require('./body');
const { refusal } = require('./restricted');
const { outcomeOf } = require('./outcomes');
const { resolveVersion: resolveVersionIn, metadata, notServing, controlOff } = require('./context');
const { runNow } = require('../pool');

const SERVICE = 'inference.GRPCInferenceService';
const STATUS = { OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9, INTERNAL: 13, UNAVAILABLE: 14 };
const ARRAY = { FP32: Float32Array, FP16: Uint16Array, INT8: Int8Array, BOOL: Uint8Array };
/** The typed-contents field of each datatype (FP16 has none: raw bytes only). */
const CONTENTS = { FP32: 'fp32Contents', INT8: 'intContents', BOOL: 'boolContents' };

function loadGrpc() {
  try {
    return require('@grpc/grpc-js');
  } catch {
    throw new Error('serving gRPC needs @grpc/grpc-js, an optional peer dependency: npm install @grpc/grpc-js');
  }
}

// Every message sent back is bounded (lib/serve/elide.js), whatever the request held.
const grpcError = (code, message) => {
  const text = bounded(message);
  return Object.assign(new Error(text), { code, details: text });
};
const notValid = (err) => `the request is not a valid ModelInferRequest: ${err.message}`;
const bad = (message) => new RequestError(400, message);
const { listText: shapeText, bounded } = require('./elide');
const { OFF_THREAD_BYTES } = require('./parsers');

/** A request error or a run's error as a gRPC status, with the message REST gives (lib/serve/outcomes.js). */
function statusOf(err, name, v) {
  if (err instanceof DecodeError) return { outcome: 'bad_request', error: grpcError(STATUS.INVALID_ARGUMENT, notValid(err)) };
  const o = outcomeOf(err, name, v);
  return { outcome: o.outcome, error: grpcError(STATUS[o.grpc], o.message) };
}

/** One input's values from its typed contents, checked as REST checks JSON data. */
function fromContents(input, contents) {
  const field = CONTENTS[input.datatype];
  if (field === undefined) throw bad(`input "${input.name}": ${input.datatype} has no typed contents field; send it in raw_input_contents`);
  const values = contents[field];
  const others = Object.entries(contents).filter(([k, v]) => k !== field && v.length > 0);
  if (others.length > 0) throw bad(`input "${input.name}": ${input.datatype} data goes in ${snake(field)}, got ${others.map(([k]) => snake(k)).join(', ')}`);
  if (values.length !== input.count) throw bad(`input "${input.name}": ${snake(field)} has ${values.length} elements, shape ${shapeText(input.shape)} takes ${input.count}`);
  if (input.datatype === 'INT8') {
    const bad8 = values.findIndex((x) => x < -128 || x > 127);
    if (bad8 >= 0) throw bad(`input "${input.name}": element ${bad8} is ${values[bad8]}, outside INT8's -128..127`);
  }
  return ARRAY[input.datatype].from(values, input.datatype === 'BOOL' ? Number : undefined);
}

const snake = (camel) => camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`).replace(/fp_32/, 'fp32').replace(/int_64/, 'int64');

/** Misaligned raw inputs of up to this many elements are copied element by element. */
const SMALL_COPY = 64;

/** One input's values from its raw bytes (little-endian, row-major), read in place when aligned. */
function fromRaw(input, bytes) {
  const Array_ = ARRAY[input.datatype];
  const need = input.count * Array_.BYTES_PER_ELEMENT;
  if (bytes.byteLength !== need) throw bad(`input "${input.name}": raw_input_contents has ${bytes.byteLength} bytes, ${input.datatype} of shape ${shapeText(input.shape)} takes ${need}`);
  if (bytes.byteOffset % Array_.BYTES_PER_ELEMENT === 0) return new Array_(bytes.buffer, bytes.byteOffset, input.count);
  // Misaligned and small: read as integers (bits kept, NaN payloads too), quicker than a buffer slice.
  if (input.count <= SMALL_COPY && Buffer.isBuffer(bytes)) {
    if (Array_ === Uint16Array) {
      const out = new Uint16Array(input.count);
      for (let k = 0; k < out.length; k++) out[k] = bytes.readUInt16LE(2 * k);
      return out;
    }
    const bits = new Uint32Array(input.count);
    for (let k = 0; k < bits.length; k++) bits[k] = bytes.readUInt32LE(4 * k);
    return new Float32Array(bits.buffer);
  }
  return new Array_(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + need));
}

/** Checks a ModelInferRequest against `sig`: the run's inputs and the outputs to send. */
function parseGrpcInfer(sig, msg) {
  const raw = msg.rawInputContents;
  if (raw.length > 0 && raw.length !== msg.inputs.length) throw bad(`raw_input_contents has ${raw.length} entries for ${msg.inputs.length} inputs: give one per input, in order`);
  const inputs = {};
  msg.inputs.forEach((t, i) => {
    const input = sig.byName.get(t.name);
    if (input === undefined) throw bad(`input "${t.name}": the model has no such input (its inputs: ${sig.inputList})`);
    if (Object.hasOwn(inputs, input.name)) throw bad(`input "${input.name}" is given twice`);
    if (t.datatype !== input.datatype) throw bad(`input "${input.name}": datatype "${t.datatype}" given, the model takes ${input.datatype}`);
    const same = t.shape.length === input.shape.length && t.shape.every((d, k) => d === input.shape[k]);
    if (!same) throw bad(`input "${input.name}": shape ${shapeText(t.shape)} given, the model takes ${shapeText(input.shape)}`);
    if (raw.length > 0) {
      if (t.contents !== undefined && Object.values(t.contents).some((v) => v.length > 0)) throw bad(`input "${input.name}": has both contents and raw_input_contents`);
      inputs[input.name] = fromRaw(input, raw[i]);
    } else {
      if (t.contents === undefined) throw bad(`input "${input.name}": has neither contents nor raw_input_contents`);
      inputs[input.name] = fromContents(input, t.contents);
    }
  });
  if (msg.inputs.length !== sig.inputs.length) {
    const missing = sig.inputs.filter((x) => !Object.hasOwn(inputs, x.name)).map((x) => `"${x.name}"`);
    throw bad(`input ${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} missing (the model takes ${sig.inputList})`);
  }
  let outputs = sig.outputs;
  if (msg.outputs.length > 0) {
    const seen = new Set();
    outputs = msg.outputs.map((r) => {
      const o = sig.outputByName.get(r.name);
      if (o === undefined) throw bad(`output "${r.name}": the model has no such output (its outputs: ${sig.outputs.map((x) => x.name).join(', ')})`);
      if (seen.has(o.name)) throw bad(`output "${o.name}" is requested twice`);
      seen.add(o.name);
      return o;
    });
  }
  return { id: msg.id, inputs, outputs };
}

/** The service's handlers over the REST handler's context (`handler.context`). */
function implementation(ctx, extensions, version) {
  const { repository, metrics, state, log, budget, parsers, restricted } = ctx;
  const resolveVersion = (name, version) => resolveVersionIn(ctx, name, version);
  /** PERMISSION_DENIED when `category` is restricted (--restricted-api) and the call lacks its metadata. */
  const deniedCall = (call, category) => {
    if (restricted.size === 0) return null;
    const why = refusal(restricted, category, (key) => {
      const v = call.metadata.get(key)[0];
      return typeof v === 'string' ? v : undefined;
    });
    return why === null ? null : grpcError(STATUS.PERMISSION_DENIED, why);
  };
  const guarded = (category, handler) => (call, callback) => {
    const err = deniedCall(call, category);
    if (err !== null) return callback(err);
    return handler(call, callback);
  };
  const unary = (fn, category) => guarded(category, (call, callback) => {
    try {
      callback(null, fn(call.request));
    } catch (err) {
      callback(statusOf(err, call.request && call.request.name).error);
    }
  });
  const ready = () => !state.draining && notServing(ctx).length === 0;

  /**
   * The run's inputs and outputs from a ModelInferRequest's bytes (grpc-js hands them over
   * undecoded): small ones decoded here, large ones on a parser thread. Contents are capped at
   * the model's largest input before a value is read.
   */
  function readRequest(v, buf) {
    if (buf.length >= OFF_THREAD_BYTES) return parsers.parse(v.signature, buf, buf.length, 'grpc');
    return parseGrpcInfer(v.signature, decode(messages.ModelInferRequest, buf, 0, buf.length, v.signature.limits));
  }

  // Synchronous while the run is done inline (tiny models): no promise or microtask per call.
  function modelInfer(call, callback) {
    const started = performance.now();
    state.active++;
    const buf = call.request;
    let claimed = 0;
    const done = (name, v, outcome) => {
      budget.release(claimed);
      const label = v !== undefined || repository.models.has(name) ? name : '_unknown';
      metrics.count(label, v === undefined ? '' : v.version, outcome, (performance.now() - started) / 1000, 'grpc');
      state.active--;
      if (state.active === 0 && state.idle) state.idle();
    };
    const fail = (err, name, v) => {
      const s = statusOf(err, name, v);
      callback(s.error);
      done(name, v, s.outcome);
    };
    let v;
    let name = '';
    let request;
    try {
      if (state.closed) throw new RequestError(503, 'the server is shut down');
      // The message is in memory already: it counts against the budget while it is answered.
      if (!budget.claim(buf.length)) throw overBudget(budget);
      claimed = buf.length;
      const head = decode(messages.ModelInferHead, buf);
      name = head.modelName;
      if (name === undefined || name === '') throw bad('model_name is required: a ModelInferRequest names the model to run');
      v = resolveVersion(name, head.modelVersion === undefined || head.modelVersion === '' ? undefined : head.modelVersion);
      request = readRequest(v, buf);
      if (!(request instanceof Promise)) {
        const tensors = runNow(v.pool, request.inputs);
        if (tensors !== undefined) {
          answer(callback, v, request, tensors);
          done(name, v, 'success');
          return;
        }
      }
    } catch (err) {
      fail(err, name, v);
      return;
    }
    Promise.resolve(request)
      .then((r) => {
        request = r;
        // Parsed on a thread: its outputs are named, and taken from this thread's signature.
        if (r.outputNames !== undefined) request.outputs = r.outputNames.map((n) => v.signature.outputByName.get(n));
        return offloaded(call, v, name, request);
      })
      .then(
        (tensors) => {
          try {
            answer(callback, v, request, tensors);
          } catch (err) {
            fail(err, name, v);
            return;
          }
          done(name, v, 'success');
        },
        (err) => fail(err, name, v),
      );
  }

  function answer(callback, v, request, tensors) {
    const outputs = request.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, data: tensors[o.index].data }));
    callback(null, { modelName: v.model.name, modelVersion: v.version, id: request.id, outputs });
  }

  /** A run on the pool's instances, cancelled with the call and limited by the model's timeoutMs. */
  async function offloaded(call, v, name, request) {
    const controller = new AbortController();
    const onCancel = () => controller.abort(Object.assign(new Error('the call was cancelled'), { name: 'AbortError' }));
    call.once('cancelled', onCancel);
    const timeoutMs = v.config.timeoutMs;
    let timer = null;
    const run = v.pool.run(request.inputs, { signal: controller.signal });
    const limited = timeoutMs > 0
      ? Promise.race([run, new Promise((_, reject) => {
          timer = setTimeout(() => {
            const err = new RequestError(504, `model "${name}" did not answer within ${timeoutMs} ms`);
            controller.abort(err);
            reject(err);
          }, timeoutMs);
        })])
      : run;
    try {
      return await limited;
    } finally {
      if (timer !== null) clearTimeout(timer);
      call.off('cancelled', onCancel);
    }
  }

  function repositoryCall(action) {
    return (call, callback) => {
      const name = call.request.modelName;
      try {
        const off = controlOff(ctx);
        if (off !== null) throw off;
        if (!repository.models.has(name)) repository.scan();
        if (!repository.models.has(name)) throw new RequestError(404, `unknown model "${name}"`);
        const done = action === 'load' ? repository.load(name) : repository.unload(name);
        log(`model "${name}" ${action === 'load' ? 'loaded' : 'unloaded'} by request (gRPC)`);
        Promise.resolve(done).then(
          () => callback(null, {}),
          (err) => callback(grpcError(STATUS.INTERNAL, `failed to ${action} model "${name}": ${err.message}`)),
        );
      } catch (err) {
        if (err instanceof RequestError) callback(statusOf(err, name).error);
        else callback(grpcError(STATUS.INVALID_ARGUMENT, `failed to load model "${name}": ${err.message}`));
      }
    };
  }

  return {
    ServerLive: unary(() => ({ live: true }), 'health'),
    ServerReady: unary(() => ({ ready: ready() }), 'health'),
    ModelReady: unary((req) => {
      let v;
      try {
        v = resolveVersion(req.name, req.version || undefined);
      } catch (err) {
        if (err instanceof RequestError && err.status === 404) throw err;
        return { ready: false };
      }
      return { ready: !(v.pool.isolate === 'process' && v.pool.stats().alive === 0) };
    }, 'health'),
    ServerMetadata: unary(() => ({ name: 'zgc-runtime', version, extensions }), 'metadata'),
    ModelMetadata: unary((req) => metadata(resolveVersion(req.name, req.version || undefined)), 'metadata'),
    // Not wrapped when nothing is restricted: a tiny infer pays for no closure.
    ModelInfer: restricted.size === 0 ? modelInfer : guarded('inference', modelInfer),
    RepositoryIndex: unary((req) => ({ models: repository.index(req.ready === true) }), 'model-repository'),
    RepositoryModelLoad: guarded('model-repository', repositoryCall('load')),
    RepositoryModelUnload: guarded('model-repository', repositoryCall('unload')),
  };
}

/** `request` null: the handler gets the message's bytes and decodes them itself (ModelInfer). */
function method(name, request, encode) {
  return {
    path: `/${SERVICE}/${name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: request === null ? (buf) => buf : (buf) => decode(request, buf),
    responseSerialize: encode,
    responseDeserialize: (buf) => buf,
  };
}

const DEFINITION = {
  ServerLive: method('ServerLive', messages.Empty, encoders.live),
  ServerReady: method('ServerReady', messages.Empty, encoders.ready),
  ModelReady: method('ModelReady', messages.NameVersion, encoders.ready),
  ServerMetadata: method('ServerMetadata', messages.Empty, encoders.serverMetadata),
  ModelMetadata: method('ModelMetadata', messages.NameVersion, encoders.modelMetadata),
  ModelInfer: method('ModelInfer', null, encoders.inferResponse),
  RepositoryIndex: method('RepositoryIndex', messages.RepositoryIndexRequest, encoders.repositoryIndex),
  RepositoryModelLoad: method('RepositoryModelLoad', messages.RepositoryModelRequest, encoders.empty),
  RepositoryModelUnload: method('RepositoryModelUnload', messages.RepositoryModelRequest, encoders.empty),
};

/**
 * Starts the gRPC service of `handler` on `host:port` (0 picks a free port). Resolves
 * `{ server, port }`; `server.tryShutdown` waits for calls in flight.
 */
function listenGrpc(handler, port, host, { extensions, version, connections }) {
  const grpc = loadGrpc();
  const { config } = handler.context;
  const server = new grpc.Server({
    'grpc.max_receive_message_length': config.maxBody,
    'grpc.max_send_message_length': -1,
    'grpc.max_concurrent_streams': config.grpcMaxConcurrentStreams,
    ...(config.grpcIdleTimeoutMs > 0 ? { 'grpc.max_connection_idle_ms': config.grpcIdleTimeoutMs } : {}),
    // No channelz: this server offers no channelz service, so its per-call tracking would be work for nothing.
    'grpc.enable_channelz': 0,
  });
  server.addService(DEFINITION, implementation(handler.context, extensions, version));
  return new Promise((resolve, reject) => {
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => {
      if (err) return reject(err);
      // grpc-js keeps its node:http2 servers in a field of its own; without it, no handshake timeout.
      for (const h2 of server.http2Servers instanceof Map ? server.http2Servers.keys() : []) guard(h2, config, connections);
      resolve({ server, port: bound });
    });
  });
}

/**
 * A connection that has not sent HTTP/2's preface and SETTINGS within the handshake timeout is
 * closed; past maxConnections (HTTP and gRPC together) a new one is closed at once.
 */
function guard(h2, config, connections) {
  // node:http2 makes a connection's session right after 'connection' (session.socket is a proxy of it).
  let socketOf = null;
  h2.prependListener('connection', (socket) => {
    socketOf = socket;
    if (connections !== undefined && !connections.admit(socket)) socket.destroy();
  });
  h2.on('session', (session) => {
    const socket = socketOf;
    const timer = setTimeout(() => session.destroy(), config.grpcHandshakeTimeoutMs);
    timer.unref();
    session.once('remoteSettings', () => {
      clearTimeout(timer);
      // Handshaken: no longer a silent connection that a new one may replace.
      if (connections !== undefined && socket !== null) connections.handshaken(socket);
    });
    session.once('close', () => clearTimeout(timer));
  });
}

module.exports = { listenGrpc, parseGrpcInfer, notValid, STATUS, DEFINITION };
