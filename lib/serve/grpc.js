'use strict';

// The protocol's gRPC service (inference.GRPCInferenceService, lib/serve/inference.proto) on
// @grpc/grpc-js, over the same context as the REST handler (context.js): the same models,
// pools, metrics and drain. Errors carry gRPC status codes and the messages REST gives
// (grpc-status.js); ModelInfer is grpc-infer.js, its request checks grpc-request.js.

const { decode, encoders, messages } = require('../protocol/pb');
const { RequestError } = require('./reasons');
const { refusal } = require('./restricted');
const { STATUS, grpcError, statusOf } = require('./grpc-status');
const { modelInfer } = require('./grpc-infer');
const { modelStreamInfer, encodeStreamResponse } = require('./grpc-stream');
const { HEALTH_DEFINITION, healthImplementation } = require('./grpc-health');
const { tritonModelConfig } = require('./model-config');
const { modelConfigResponse } = require('../protocol/model-config-pb');
const { modelStatistics } = require('./statistics');
const { decodeLogSettings, decodeTraceSetting, encodeLogSettings, encodeTraceSetting } = require('../protocol/settings-pb');
const { LoadError } = require('./repository');
const { resolveVersion: resolveVersionIn, metadata, notServing, controlOff } = require('./context');

const SERVICE = 'inference.GRPCInferenceService';

function loadGrpc() {
  try {
    return require('@grpc/grpc-js');
  } catch {
    throw new Error('serving gRPC needs @grpc/grpc-js, an optional peer dependency: npm install @grpc/grpc-js');
  }
}

/** PERMISSION_DENIED when `category` is restricted (--restricted-api) and the call lacks its metadata; else null. */
function denied(restricted, call, category) {
  if (restricted.size === 0) return null;
  const why = refusal(restricted, category, (key) => {
    const v = call.metadata.get(key)[0];
    return typeof v === 'string' ? v : undefined;
  });
  return why === null ? null : grpcError(STATUS.PERMISSION_DENIED, why);
}

/** The service's handlers over the REST handler's context (`handler.context`). */
function implementation(ctx, extensions, version) {
  const { repository, state, log, restricted } = ctx;
  const resolveVersion = (name, version) => resolveVersionIn(ctx, name, version);
  const deniedCall = (call, category) => denied(restricted, call, category);
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
  const infer = (call, callback) => modelInfer(ctx, call, callback);

  function repositoryCall(action) {
    return (call, callback) => {
      const name = call.request.modelName;
      try {
        const off = controlOff(ctx);
        if (off !== null) throw off;
        if (!repository.models.has(name)) repository.scan();
        if (!repository.models.has(name)) throw new RequestError('not_found', `unknown model "${name}"`);
        const done = action === 'load' ? repository.load(name) : repository.unload(name);
        log(`model "${name}" ${action === 'load' ? 'loaded' : 'unloaded'} by request (gRPC)`);
        Promise.resolve(done).then(
          () => callback(null, {}),
          (err) => {
            log(`failed to ${action} model "${name}" by request (gRPC): ${err.message}`, 'error');
            callback(grpcError(err instanceof LoadError ? STATUS.INVALID_ARGUMENT : STATUS.INTERNAL, `failed to ${action} model "${name}": ${err.message}`));
          },
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
    ModelConfig: unary((req) => ({ config: tritonModelConfig(resolveVersion(req.name, req.version || undefined)) }), 'model-config'),
    // Not wrapped when nothing is restricted: a tiny infer pays for no closure.
    ModelInfer: restricted.size === 0 ? infer : guarded('inference', infer),
    ModelStreamInfer: (stream) => {
      const err = deniedCall(stream, 'inference');
      if (err !== null) return stream.emit('error', err);
      return modelStreamInfer(ctx, stream);
    },
    ModelStatistics: unary((req) => modelStatistics(ctx, req.name, req.version), 'statistics'),
    SystemSharedMemoryStatus: unary((req) => ctx.shm.status(req.name), 'shared-memory'),
    SystemSharedMemoryRegister: unary((req) => {
      ctx.shm.register(req.name, req.key, req.offset ?? 0, req.byteSize ?? 0);
      return {};
    }, 'shared-memory'),
    SystemSharedMemoryUnregister: unary((req) => {
      ctx.shm.unregister(req.name);
      return {};
    }, 'shared-memory'),
    RepositoryIndex: unary((req) => ({ models: repository.index(req.ready === true) }), 'model-repository'),
    // An empty request reads the settings; changes are applied all or none.
    LogSettings: unary((req) => (Object.keys(req.settings).length === 0 ? ctx.logging.get() : ctx.logging.update(req.settings)), 'logging'),
    TraceSetting: unary((req) => {
      if (req.model !== undefined && !repository.models.has(req.model)) throw new RequestError('not_found', `unknown model "${req.model}"`);
      return Object.keys(req.settings).length === 0 ? ctx.trace.get(req.model) : ctx.trace.update(req.settings, req.model);
    }, 'trace'),
    RepositoryModelLoad: guarded('model-repository', repositoryCall('load')),
    RepositoryModelUnload: guarded('model-repository', repositoryCall('unload')),
  };
}

/**
 * `request`: the message's schema, a function of its bytes, or null (the handler gets the
 * bytes and decodes them itself: ModelInfer).
 */
function method(name, request, encode, streams = false) {
  return {
    path: `/${SERVICE}/${name}`,
    requestStream: streams,
    responseStream: streams,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: request === null ? (buf) => buf : typeof request === 'function' ? request : (buf) => decode(request, buf),
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
  ModelConfig: method('ModelConfig', messages.NameVersion, modelConfigResponse),
  ModelInfer: method('ModelInfer', null, encoders.inferResponse),
  ModelStreamInfer: method('ModelStreamInfer', null, encodeStreamResponse, true),
  ModelStatistics: method('ModelStatistics', messages.NameVersion, encoders.modelStatistics),
  SystemSharedMemoryStatus: method('SystemSharedMemoryStatus', messages.RegionName, encoders.sharedMemoryStatus),
  SystemSharedMemoryRegister: method('SystemSharedMemoryRegister', messages.SharedMemoryRegister, encoders.empty),
  SystemSharedMemoryUnregister: method('SystemSharedMemoryUnregister', messages.RegionName, encoders.empty),
  RepositoryIndex: method('RepositoryIndex', messages.RepositoryIndexRequest, encoders.repositoryIndex),
  RepositoryModelLoad: method('RepositoryModelLoad', messages.RepositoryModelRequest, encoders.empty),
  RepositoryModelUnload: method('RepositoryModelUnload', messages.RepositoryModelRequest, encoders.empty),
  LogSettings: method('LogSettings', decodeLogSettings, encodeLogSettings),
  TraceSetting: method('TraceSetting', decodeTraceSetting, encodeTraceSetting),
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
  // The health category of --restricted-api covers grpc.health.v1 too, as it does ServerLive and ModelReady.
  server.addService(HEALTH_DEFINITION, healthImplementation(handler.context, (call) => denied(handler.context.restricted, call, 'health')));
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

module.exports = { listenGrpc, STATUS, DEFINITION };
