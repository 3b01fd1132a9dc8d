import type { IncomingMessage, Server, ServerResponse } from 'node:http'

/** Options of `createServer` / `createHandler`; the CLI's flags map onto them. */
export interface ServeOptions {
  /** Repository directories (`<repo>/<name>/<version>/model.so`), `name=artifact.so`, `name=modelDir` or `artifact.so`. */
  models: string | readonly string[]
  /** Instances per model version, unless the model's config.json sets `instances` (default: one per CPU). */
  poolSize?: number
  /** Requests waiting per version before a 503 (default 1024). */
  maxQueue?: number
  /** A request not answered by then is a 504; 0: no limit (default 30000). */
  timeoutMs?: number
  /** Larger request bodies are a 413 (default 64 MiB): bytes, or a size such as '64m', '512k', '1.5g'. */
  maxBody?: number | string
  /** With modelControl 'poll': how often changed model files are looked for and reloaded; 0: never (default 2000). */
  pollMs?: number
  /**
   * Who loads and unloads models after start, as Triton's --model-control-mode: nobody
   * ('none', the default: load and unload answer 403), polling of the model files ('poll'),
   * or clients through the repository API ('explicit').
   */
  modelControl?: 'none' | 'poll' | 'explicit'
  /**
   * Restricted API categories in Triton's form, `'model-repository,inference:admin-key=s3cret'`:
   * requests of those categories (health, metadata, inference, model-config,
   * model-repository, metrics, statistics, shared-memory, logging, trace) need that header (gRPC: metadata), else 403 / PERMISSION_DENIED.
   */
  restrictedApi?: string | readonly string[]
  /**
   * Client system shared memory (Triton's extension, `--allow-client-shm`): local clients may
   * register POSIX shared memory objects and name them for tensors in and out. Linux only;
   * off by default.
   */
  allowClientShm?: boolean
  /** A JSON file of these options (but log); options given here win. */
  config?: string
  /** Bytes of request bodies all requests being answered may hold; past it a 503 with Retry-After (default: an eighth of memory, 256 MiB to 2 GiB). */
  maxInflightBytes?: number | string
  /** A client that has not sent a request's headers by then gets a 408 (default 10000). */
  headersTimeoutMs?: number
  /** The time to receive a whole request; 0: none (default 60000). */
  requestTimeoutMs?: number
  /** An idle keep-alive connection is closed after this (default 5000). */
  keepAliveTimeoutMs?: number
  /** Connections open at once, HTTP and gRPC together (default: 3/4 of the open-file limit, at most 4096). */
  maxConnections?: number
  /** A large JSON request still parsing by then is a 400 and its parser thread replaced (default 5000). */
  parseTimeoutMs?: number
  /** gRPC calls at once on one HTTP/2 connection (default 100). */
  grpcMaxConcurrentStreams?: number
  /** A gRPC connection without HTTP/2's preface and settings by then is closed (default 10000). */
  grpcHandshakeTimeoutMs?: number
  /** A gRPC connection without calls this long is closed; 0: never (default 300000). */
  grpcIdleTimeoutMs?: number
  /** Default offload policy of the pools (see LoadOptions.offload). */
  offload?: 'auto' | 'always' | 'never'
  /** Default isolation of every model's instances (a model's config.json "isolate" wins; docs/isolation.md). */
  isolate?: 'none' | 'process'
  /** Default deadline of `server.shutdown()` (default 30000). */
  shutdownTimeoutMs?: number
  /** Where load, reload and unload lines go (default: nowhere). */
  log?: (line: string) => void
}

export type ModelState = 'READY' | 'UNAVAILABLE'

/** One row of POST /v2/repository/index. */
export interface RepositoryIndexEntry {
  readonly name: string
  readonly version?: string
  readonly state: ModelState
  readonly reason: string
}

export declare class LoadError extends Error {}

export declare class ModelRepository {
  /** (Re)loads a model: new pools first, then the switch; resolves when the old pools are closed. */
  load(name: string): Promise<void[]>
  /** Stops serving a model; resolves when its running requests are done and its pools closed. */
  unload(name: string): Promise<void[]>
  /** Reloads the models whose files changed since their last load. */
  poll(): Array<{ name: string; ok: boolean; reason?: string }>
  index(readyOnly?: boolean): RepositoryIndexEntry[]
}

/** A request handler for node:http, express (`app.use(handler)`) or fastify (raw request and reply). */
export interface ServeHandler {
  (req: IncomingMessage, res: ServerResponse, next?: () => void): void
  readonly repository: ModelRepository
  /** Requests being answered now. */
  readonly active: number
  /** Threads parsing large JSON requests off the event loop (started on first use). */
  readonly parserThreads: number
  /** Readiness turns false and responses close their connections; requests go on. */
  drain(): void
  /** Resolves when no inference request is being answered. */
  idle(): Promise<void>
  /** Stops polling and closes every pool once its runs are done. */
  close(): Promise<unknown>
}

export interface ShutdownResult {
  /** Every accepted request was answered before the deadline. */
  readonly drained: boolean
  readonly unanswered: number
}

export interface ZgcServer extends Server {
  readonly zgc: ServeHandler
  /** Stops accepting, answers what was accepted, closes the pools. */
  shutdown(options?: { deadlineMs?: number }): Promise<ShutdownResult>
  /**
   * Serves the protocol's gRPC service (inference.GRPCInferenceService) too, on `port` (0: a
   * free one) of `host` (default 127.0.0.1); resolves the port. Needs @grpc/grpc-js.
   */
  listenGrpc(port: number, host?: string): Promise<number>
}

/** A node:http server for the Open Inference Protocol, its models loaded before it returns. */
export declare function createServer(options: ServeOptions): ZgcServer
export declare function createHandler(options: ServeOptions): ServeHandler
