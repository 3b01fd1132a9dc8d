// Types of zgc-runtime/client (lib/client/index.js): docs/client.md.
import type { ZgcError } from '../../index'

export { ZgcError }

/** The package's names of the protocol's datatypes. */
export type RemoteDtype = 'bool' | 'u8' | 'u16' | 'u32' | 'u64' | 'i8' | 'i16' | 'i32' | 'i64' | 'f16' | 'bf16' | 'f32' | 'f64' | 'bytes'

export type RemoteData =
  | Float32Array
  | Float64Array
  | Uint16Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint32Array
  | BigUint64Array
  | Uint8Array[]

/** An output: `data` is the dtype's TypedArray; bytes come as an array of Uint8Arrays. */
export interface RemoteTensor {
  readonly name: string
  readonly dtype: RemoteDtype
  readonly shape: number[]
  readonly data: RemoteData
}

/** An input or output as the model's metadata describes it; -1 is a dimension of any size. */
export interface RemoteTensorInfo {
  readonly name: string
  readonly dtype: RemoteDtype
  readonly shape: readonly number[]
}

/** A TypedArray or array (when the shape is fully known), or `{ shape, data }`. */
export type RemoteInput = ArrayBufferView | ReadonlyArray<number | boolean | bigint | string | Uint8Array> | number | boolean | { shape: number[]; data: ArrayBufferView | ReadonlyArray<number | boolean | bigint | string | Uint8Array>; dtype?: RemoteDtype }

export interface RemoteRunOptions {
  signal?: AbortSignal
  /** No answer after this long rejects ERR_ZGC_REMOTE_TIMEOUT; the server is told (Triton's `timeout`). */
  timeoutMs?: number
  /** The server's priority level (Triton: 1 is the highest; 0 the model's default). */
  priority?: number
  /** The outputs wanted, in this order (default: all, in the model's order). */
  outputs?: string[]
  /** The top k classes of each output, as bytes "value:index" (Triton's classification). */
  classification?: number
  /** A step of a sequence by hand (see `sequence()` for the managed way). */
  sequence?: { id: number | string; start?: boolean; end?: boolean }
  /** One TypedArray per output, written in place and returned as the Tensors' data. */
  into?: ArrayBufferView[]
}

export interface RemoteSequence extends AsyncDisposable {
  readonly id: number | string
  readonly runs: number
  readonly ended: boolean
  run(inputs: Record<string, RemoteInput>, options?: Omit<RemoteRunOptions, 'sequence' | 'classification'> & { end?: boolean }): Promise<RemoteTensor[]>
  close(): Promise<void>
}

/** One response on a stream: a request's Tensors (a decoupled model gives several, the last `final`), or its error. */
export interface StreamResponse {
  readonly id: string | undefined
  readonly final: boolean
  readonly model?: string
  readonly version?: string
  readonly tensors?: RemoteTensor[]
  readonly error?: ZgcError
}

/** gRPC's ModelStreamInfer: requests to one server, their responses as they come. */
export declare class RemoteStream implements AsyncIterable<StreamResponse> {
  private constructor()
  readonly url: string
  readonly pending: number
  /** Sends a request; returns its id (options.id, else the stream's own). */
  send(model: RemoteModel, inputs: Record<string, RemoteInput>, options?: Omit<RemoteRunOptions, 'signal' | 'timeoutMs'> & { id?: string | number }): string
  /** No more requests: the iteration ends once those sent are answered. */
  end(): void
  cancel(): void
  [Symbol.asyncIterator](): AsyncIterator<StreamResponse>
}

export declare class RemoteModel {
  private constructor()
  readonly name: string
  readonly version: string | undefined
  readonly versions: readonly string[]
  readonly platform: string | undefined
  readonly sources: readonly RemoteTensorInfo[]
  readonly outputs: readonly RemoteTensorInfo[]
  runAsync(inputs?: Record<string, RemoteInput>, options?: RemoteRunOptions): Promise<RemoteTensor[]>
  ready(): Promise<boolean>
  sequence(options?: { id?: number | string }): RemoteSequence
  /** The responses of one request (a decoupled model's several), over gRPC. */
  responses(inputs?: Record<string, RemoteInput>, options?: Omit<RemoteRunOptions, 'timeoutMs'>): AsyncIterableIterator<RemoteTensor[]>
  readonly f16: 'float32' | 'bits' | 'float16'
}

export interface ServerStats {
  url: string
  requests: number
  outstanding: number
  failures: number
  failovers: number
  available: boolean
}

export interface RepositoryEntry {
  name: string
  version?: string
  state?: string
  reason?: string
}

export declare class Client {
  private constructor()
  readonly urls: string[]
  model(name: string, options?: { version?: string | number; f16?: 'float32' | 'bits' | 'float16' }): Promise<RemoteModel>
  live(): Promise<boolean>
  ready(): Promise<boolean>
  modelReady(name: string, version?: string | number): Promise<boolean>
  metadata(): Promise<{ name: string; version: string; extensions: string[] }>
  modelMetadata(name: string, version?: string | number): Promise<Record<string, unknown>>
  modelConfig(name: string, version?: string | number): Promise<Record<string, unknown>>
  statistics(name?: string, version?: string | number): Promise<Record<string, unknown>>
  repositoryIndex(options?: { ready?: boolean }): Promise<RepositoryEntry[]>
  loadModel(name: string, options?: { parameters?: Record<string, unknown> }): Promise<void>
  unloadModel(name: string, options?: { parameters?: Record<string, unknown> }): Promise<void>
  sharedMemoryStatus(region?: string): Promise<unknown>
  logSettings(settings?: Record<string, unknown>): Promise<Record<string, unknown>>
  traceSettings(model?: string, settings?: Record<string, unknown>): Promise<Record<string, unknown>>
  /** A stream of requests (gRPC's ModelStreamInfer) to one server. */
  stream(): RemoteStream
  stats(): ServerStats[]
  /** Whether tensors go through shared memory (sharedMemory: 'auto' found a server here that takes them). */
  readonly sharedMemory: boolean
  /** Closes the connections and cancels open streams; resolves once shared memory regions are unregistered and removed. */
  close(): Promise<void>
}

export interface ConnectOptions {
  /** REST: the binary tensor data extension (true) or JSON (false); by default binary where the server lists the extension. */
  binary?: boolean
  /** Sent with every request (HTTP headers, gRPC metadata). */
  headers?: Record<string, string>
  /** How f16 outputs come back (as a local runtime's option). */
  f16?: 'float32' | 'bits' | 'float16'
  /** REST: connections per server (default: no limit). */
  maxSockets?: number
  /** How long a server that refused or reset a connection, or answered 503 without Retry-After, is left out (default 1000). */
  retryAfterMs?: number
  /** Channel options for @grpc/grpc-js. */
  grpcOptions?: Record<string, unknown>
  /** 'auto': tensors through POSIX shared memory when the one server is on this host and lists system_shared_memory (Linux). Default 'off'. */
  sharedMemory?: 'auto' | 'off'
}

/** Connects to a server (http://, https://, grpc://, grpcs://), or spreads requests over several. */
export declare function connect(target: string | URL | Array<string | URL>, options?: ConnectOptions): Promise<Client>
