'use strict';

// gRPC's standard health service (grpc.health.v1.Health), which Kubernetes' gRPC probes,
// grpc-health-probe and load balancers ask: Check and Watch, for the server ("" or the
// inference service's name: ready as ServerReady says) and for each model by its name (ready
// as ModelReady says). An unknown service is NOT_FOUND for Check and SERVICE_UNKNOWN for Watch,
// as the service's specification says.

const { decode, schema, Writer } = require('../protocol/pb');
const { STATUS, grpcError } = require('./grpc-status');
const { notServing } = require('./context');

const SERVICE = 'grpc.health.v1.Health';
/** Its request: the service whose health is asked ("" the server's). */
const HealthCheckRequest = schema([[1, 'service', 'string']]);

/** Its response: the status (0 UNKNOWN, 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN). */
function healthResponse(msg) {
  const w = new Writer();
  w.uint(1, msg.status);
  return w.finish();
}
/** HealthCheckResponse.ServingStatus. */
const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;
/** How often a Watch looks again for a change of status. */
const WATCH_MS = 1000;

/** The status of `service` now, or SERVICE_UNKNOWN. */
function statusOf(ctx, service) {
  if (service === '' || service === 'inference.GRPCInferenceService') {
    return !ctx.state.draining && notServing(ctx).length === 0 ? SERVING : NOT_SERVING;
  }
  const model = ctx.repository.models.get(service);
  if (model === undefined) return SERVICE_UNKNOWN;
  if (ctx.state.draining) return NOT_SERVING;
  // Serving while a version of it is: loaded, and (isolated) with a live instance.
  for (const v of ctx.repository.served()) {
    if (v.model.name === service && !(v.pool.isolate === 'process' && v.pool.stats().alive === 0)) return SERVING;
  }
  return NOT_SERVING;
}

/** `refused(call)`: the call's PERMISSION_DENIED when the health category is restricted and it lacks the metadata, else null. */
function healthImplementation(ctx, refused) {
  return {
    Check(call, callback) {
      const no = refused(call);
      if (no !== null) return callback(no);
      const status = statusOf(ctx, call.request.service ?? '');
      if (status === SERVICE_UNKNOWN) return callback(grpcError(STATUS.NOT_FOUND, `unknown service "${call.request.service}": ask "" for the server, or a model's name`));
      callback(null, { status });
    },
    /** The status now, then each change, until the client ends the call or the server shuts down. */
    Watch(call) {
      const no = refused(call);
      if (no !== null) return void call.emit('error', no);
      const service = call.request.service ?? '';
      let last = null;
      const look = () => {
        // A server shutting down is NOT_SERVING, and ends its watches: it waits for every call to end.
        const status = ctx.state.draining ? NOT_SERVING : statusOf(ctx, service);
        if (status !== last) {
          last = status;
          call.write({ status });
        }
        if (ctx.state.draining) end();
      };
      const timer = setInterval(look, WATCH_MS);
      timer.unref();
      const end = () => {
        clearInterval(timer);
        call.end();
      };
      call.on('cancelled', () => clearInterval(timer));
      call.on('close', () => clearInterval(timer));
      look();
    },
  };
}

const HEALTH_DEFINITION = {
  Check: {
    path: `/${SERVICE}/Check`,
    requestStream: false,
    responseStream: false,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: (buf) => decode(HealthCheckRequest, buf),
    responseSerialize: healthResponse,
    responseDeserialize: (buf) => buf,
  },
  Watch: {
    path: `/${SERVICE}/Watch`,
    requestStream: false,
    responseStream: true,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: (buf) => decode(HealthCheckRequest, buf),
    responseSerialize: healthResponse,
    responseDeserialize: (buf) => buf,
  },
};

module.exports = { HEALTH_DEFINITION, healthImplementation, SERVING, NOT_SERVING, SERVICE_UNKNOWN };
