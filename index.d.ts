/** ZGC executable ABI version this runtime implements. */
export declare const ABI_VERSION: 1

export type DType = 'f32' | 'f16' | 'i8' | 'bool'
export type SourceKind = 'input' | 'parameter' | 'constant' | 'state'
export type SourceBinding = 'owned' | 'bound' | 'embedded'

export interface LoadOptions {
  /**
   * How f16 outputs (and `storage()` of f16 sources) come back: exact values in a Float32Array
   * (default), raw bits in a Uint16Array, or a Float16Array (only where the host has one:
   * Node 24+, Bun, Deno, Node 22 with --js-float16array; elsewhere load throws a TypeError).
   */
  f16?: 'float32' | 'bits' | 'float16'
  /**
   * Where async runs (`runAsync`, `pool.run`) compute. 'auto' (default): on a worker thread,
   * except a graph whose measured run time is below the measured cost of the trip there and
   * back, which runs inline on the JavaScript thread (still a Promise) until it gets slower;
   * 'always': always on a worker; 'never': always inline.
   */
  offload?: 'auto' | 'always' | 'never'
  /**
   * 'process': the instance lives in a child process of its own, so that an artifact that
   * crashes, hangs or runs out of memory fails one run and never the Node process; the
   * instance then starts again (docs/isolation.md). Default 'none': in this process. Needs a
   * path, not bytes.
   */
  isolate?: 'none' | 'process'
  /** Isolated only: a run still going after this is stopped (its process killed): ERR_ZGC_TIMEOUT. */
  timeoutMs?: number
  /** Isolated only: resident memory (MiB) past which a run's process is killed: ERR_ZGC_MEMORY_LIMIT. */
  maxMemoryMb?: number
  /** Isolated only: how long a process may take to load the artifact (default 30000). */
  startTimeoutMs?: number
}

/** Latency percentiles of recent async runs, in milliseconds (null before the first run). */
export interface Percentiles {
  readonly p50: number | null
  readonly p90: number | null
  readonly p99: number | null
}

/**
 * Every async run since the start, counted per latency bucket (what a Prometheus histogram
 * exports): `counts[i]` runs took at most `boundsMs[i]` and more than the bound before it;
 * the last count is above every bound.
 */
export interface LatencyHistogram {
  readonly boundsMs: readonly number[]
  readonly counts: readonly number[]
  readonly sumMs: number
  readonly count: number
}

/** What a runtime's or pool's async runs have done: what a service exports as metrics. */
export interface RunStats {
  /** Runs that finished, and runs the artifact failed (a status, a closed instance). */
  readonly completed: number
  readonly failed: number
  /** Runs waiting for an instance. */
  readonly queueDepth: number
  /** Runs running now, or starting on a free instance. */
  readonly inFlight: number
  /** Runs done inline on the JavaScript thread, and on worker threads. */
  readonly inline: number
  readonly offloaded: number
  readonly offload: 'auto' | 'always' | 'never' | 'process'
  /** What the next run does. */
  readonly decision: 'inline' | 'offloaded' | 'process'
  /** From the call to the run's start (0 for inline runs), and the run itself. */
  readonly queueWaitMs: Percentiles
  readonly computeMs: Percentiles
  readonly queueWaitHistogram: LatencyHistogram
  readonly computeHistogram: LatencyHistogram
  /** The estimates 'auto' weighs: a run's time, and the cost of a trip to a worker and back. */
  readonly estimatedComputeMs: number | null
  readonly estimatedHopMs: number | null
  /** Isolated instances only (isolate: 'process'): what their processes went through. */
  readonly crashes?: number
  readonly restarts?: number
  readonly timeouts?: number
  readonly memoryKills?: number
  readonly aborts?: number
  /** Starts that failed (a process that died or timed out before it had loaded the artifact). */
  readonly startFailures?: number
  /** Instances able to run now (not restarting, not given up). */
  readonly alive?: number
  /** Per instance, its process id now (null while it restarts). */
  readonly pids?: readonly (number | null)[]
}

/**
 * A Float16Array, typed by its shape so that these declarations compile without TypeScript's
 * `esnext.float16` lib; with that lib, a `Float16Array` is one.
 */
// Explicit resource management (`using`, `await using`) without lib "esnext.disposable" or
// @types/node: the same declarations both of them make, so they merge with either.
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol
    readonly asyncDispose: unique symbol
  }
  interface Disposable {
    [Symbol.dispose](): void
  }
  interface AsyncDisposable {
    [Symbol.asyncDispose](): PromiseLike<void>
  }
}

export interface Float16ArrayLike extends ArrayBufferView {
  readonly [Symbol.toStringTag]: 'Float16Array'
  readonly length: number
  [index: number]: number
}

/** One source of the compiled graph, as its descriptor gives it. */
export interface SourceInfo {
  readonly key: number
  readonly name: string
  readonly kind: SourceKind
  readonly binding: SourceBinding
  readonly dtype: DType
  readonly shape: readonly number[]
  /** Strides in elements; may be negative (BOUND sources). */
  readonly strides: readonly number[]
  /** Physical index of the first logical element. */
  readonly offset: number
  /** Physical storage extent, in elements: the length `bind()` takes. */
  readonly elementCount: number
  /** Logical bytes: product(shape) * item size. */
  readonly byteCount: number
}

export interface OutputInfo {
  readonly dtype: DType
  readonly shape: readonly number[]
  readonly elementCount: number
  readonly byteCount: number
}

/** The TypedArray an output of each dtype comes back as. */
export type TensorData = Float32Array | Uint16Array | Int8Array | Uint8Array | Float16ArrayLike

/** One output of a run, C-contiguous. */
export interface Tensor {
  readonly dtype: DType
  readonly shape: readonly number[]
  readonly data: TensorData
}

/**
 * Values for a source, in logical C order: a TypedArray of its dtype (f32: Float32Array;
 * f16: Float32Array/Float64Array, rounded to nearest even, or Uint16Array bits; i8:
 * Int8Array; bool: Uint8Array of 0/1), a plain array of numbers (booleans for bool), or a
 * number for a one-element source. f16 also takes a Float16Array where the host has one.
 */
export type SourceValues =
  | Float32Array
  | Float64Array
  | Uint16Array
  | Float16ArrayLike
  | Int8Array
  | Uint8Array
  | ReadonlyArray<number>
  | ReadonlyArray<boolean>
  | number
  | boolean

/** Physical storage for `bind()`: `elementCount` elements (f16 as Uint16Array bits, or a Float16Array). */
export type BoundStorage = Float32Array | Uint16Array | Int8Array | Uint8Array | Float16ArrayLike

export type Inputs = Readonly<Record<string, SourceValues>>

export type ZgcErrorCode =
  /** Thrown by require('zgc-runtime') itself (a plain Error with this code) when no addon loads. */
  | 'ERR_ZGC_NATIVE_MISSING'
  | 'ERR_ZGC_LOAD'
  | 'ERR_ZGC_ABI_VERSION'
  | 'ERR_ZGC_INVALID_ARTIFACT'
  | 'ERR_ZGC_UNKNOWN_SOURCE'
  | 'ERR_ZGC_EMBEDDED'
  | 'ERR_ZGC_NOT_BOUND'
  | 'ERR_ZGC_DTYPE'
  | 'ERR_ZGC_SIZE'
  | 'ERR_ZGC_VALUE'
  | 'ERR_ZGC_DETACHED'
  | 'ERR_ZGC_ALIGNMENT'
  | 'ERR_ZGC_OUT_OF_MEMORY'
  | 'ERR_ZGC_CLOSED'
  | 'ERR_ZGC_BUSY'
  | 'ERR_ZGC_QUEUE_FULL'
  | 'ERR_ZGC_OUTPUT_INDEX'
  | 'ERR_ZGC_INVALID_ARGUMENT'
  | 'ERR_ZGC_INVALID_RUNTIME_STORAGE'
  | 'ERR_ZGC_INVALID_SOURCE'
  | 'ERR_ZGC_INVALID_OUTPUT'
  | 'ERR_ZGC_SIZE_MISMATCH'
  | 'ERR_ZGC_ALIGNMENT_MISMATCH'
  | 'ERR_ZGC_INCOMPATIBLE_BINDING'
  | 'ERR_ZGC_MISSING_BINDING'
  | 'ERR_ZGC_BUFFER_TOO_SMALL'
  | 'ERR_ZGC_UNKNOWN_STATUS'
  | 'ERR_ZGC_INSTANCE_CRASHED'
  | 'ERR_ZGC_TIMEOUT'
  | 'ERR_ZGC_MEMORY_LIMIT'
  | 'ERR_ZGC_BATCH_VARIANTS'
  | 'ERR_ZGC_SEQUENCE'
  | 'ERR_ZGC_INSTANCE_FAILED'
  | 'ERR_ZGC_ABORTED'
  | 'ERR_ZGC_INSTANCE_START'
  | 'ERR_ZGC_INSTANCE'
  | 'ERR_ZGC_NAPI'
  /** zgc-runtime/client: a server's refusal (with its HTTP or gRPC `status`), or a failed connection. */
  | 'ERR_ZGC_REMOTE'
  | 'ERR_ZGC_REMOTE_INVALID'
  | 'ERR_ZGC_REMOTE_NOT_FOUND'
  | 'ERR_ZGC_REMOTE_UNAVAILABLE'
  | 'ERR_ZGC_REMOTE_TIMEOUT'
  | 'ERR_ZGC_CONNECTION'

export declare class ZgcError extends Error {
  readonly name: 'ZgcError'
  readonly code: ZgcErrorCode
  /** The raw status, when the artifact returned one. */
  readonly status?: number
  /** The C function that returned `status`. */
  readonly operation?: string
  /** The source the error is about, when there is one. */
  readonly source?: string
  /** ERR_ZGC_INSTANCE_CRASHED: the signal that ended the process ('SIGSEGV', ...), or its exit code. */
  readonly signal?: string | null
  readonly exitCode?: number | null
  /** Isolated failures: the end of what the instance's process wrote to stderr. */
  readonly stderr?: string
  readonly timeoutMs?: number
  readonly maxMemoryMb?: number
  readonly residentBytes?: number
  /** zgc-runtime/client: the server's address. */
  readonly server?: string
  /** ERR_ZGC_CONNECTION: whether the request may have reached the server. */
  readonly sent?: boolean
  /** ERR_ZGC_REMOTE_UNAVAILABLE: the server's Retry-After, in ms. */
  readonly retryAfterMs?: number
}

export declare class Runtime implements Disposable {
  private constructor()
  /** Absolute, resolved path of the artifact; null when it was loaded from bytes. */
  readonly path: string | null
  readonly abiVersion: number
  /** Structural fingerprint: a u64, hence a bigint. */
  readonly fingerprint: bigint
  /** '0x' and 16 lowercase hex digits. */
  readonly fingerprintHex: string
  readonly runtimeSize: number
  readonly runtimeAlignment: number
  readonly mutableBytes: number
  readonly sources: readonly SourceInfo[]
  readonly outputs: readonly OutputInfo[]
  readonly closed: boolean
  /** The offload option and whether the next async run goes inline. */
  readonly offload: { readonly mode: 'auto' | 'always' | 'never'; readonly inline: boolean }
  /** What this runtime's async runs have done. */
  stats(): RunStats
  /** 'process' on an isolated runtime (see LoadOptions.isolate); absent in-process. */
  readonly isolate?: 'process'
  /** An isolated runtime's process id now (it changes when the instance restarts). */
  readonly pid?: number

  /**
   * Gives a source logical values. OWNED sources copy them (the buffer may be reused at
   * once); BOUND sources get them packed into aligned storage the runtime keeps.
   */
  set(name: string, values: SourceValues): void
  /**
   * Binds a BOUND source to caller storage without copying. The runtime reads it in place at
   * every run and keeps it alive until it is rebound or the runtime is closed.
   */
  bind(name: string, storage: BoundStorage): void
  /**
   * Runs the graph once after applying `inputs` (OWNED: as set; BOUND: bound zero-copy when
   * the array is the physical storage, else packed as set). With `{ into }` the outputs are
   * written into your arrays (checked like inputs) and the same Tensor objects come back for
   * the same arrays, so a steady-state loop allocates nothing per run.
   */
  run(inputs?: Inputs, options?: RunOptions): Tensor[]
  /**
   * Runs on this runtime's worker thread (or inline, see `offload`); the event loop keeps
   * serving. Inputs are copied when you call; storage bound with `bind()` is copied when the
   * run starts; storage from `storage()` is read in place. Runs of one runtime keep call
   * order. An aborted `signal` rejects a run that has not started with an AbortError; a
   * started run finishes.
   */
  runAsync(inputs?: Inputs, options?: RunAsyncOptions): Promise<Tensor[]>
  /**
   * Binds new zeroed storage owned by the runtime to a BOUND source and returns it as a
   * TypedArray of its physical layout (`elementCount` elements): the zero-copy path for
   * async runs. No JavaScript action can free it under the artifact.
   */
  storage(name: string): BoundStorage
  /** Output `index` of the last run. */
  output(index: number): Tensor
  /** Deinitialises the runtime and releases bound storage. Idempotent. */
  close(): void
  [Symbol.dispose](): void
}

/** One array per output, `elementCount` long: its dtype's TypedArray (f16: Float32Array of values, Uint16Array of bits, or a Float16Array). */
export type OutputArray = Float32Array | Uint16Array | Int8Array | Uint8Array | Float16ArrayLike

export interface RunOptions {
  into?: readonly OutputArray[]
  /** Isolated runtimes only: overrides the runtime's timeoutMs for this run. */
  timeoutMs?: number
}

/** What `runAsync` needs of an AbortSignal; Node's and the DOM's both match. */
export interface AbortSignalLike {
  readonly aborted: boolean
  readonly reason?: unknown
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void
  removeEventListener(type: 'abort', listener: () => void): void
}

export interface RunAsyncOptions {
  /** Must be a real AbortSignal at run time (`AbortController().signal`, `AbortSignal.timeout()`). */
  signal?: AbortSignalLike
  /**
   * Isolated runtimes and pools only: overrides their timeoutMs for this run. On an isolated
   * instance an abort or a timeout during the run kills its process; in-process it is refused.
   */
  timeoutMs?: number
}

export interface PoolRunOptions extends RunAsyncOptions {
  /**
   * A 32-bit integer (default 0): while every instance is busy, queued runs start higher
   * priority first, and in call order within one priority.
   */
  priority?: number
}

export interface PoolOptions extends LoadOptions {
  /** Instances of the artifact (default: `os.availableParallelism()`). */
  size?: number
  /** Runs that may wait for a free instance before `run` rejects ERR_ZGC_QUEUE_FULL (default 1024). */
  maxQueue?: number
  /** Called once per instance, synchronously, to set parameters or bind storage. */
  setup?: (runtime: Runtime, index: number) => void
}

export declare class Pool implements AsyncDisposable {
  private constructor()
  readonly size: number
  /** Runs waiting for a free instance. */
  readonly pending: number
  /** Runs executing now. */
  readonly inFlight: number
  readonly closed: boolean
  readonly runtimes: readonly Runtime[]
  /** 'process' for a pool of isolated instances. */
  readonly isolate?: 'process'
  /** Completed runs, queue depth, in flight, latency percentiles, inline vs offloaded. */
  stats(): RunStats
  /** Runs once on a free instance; inputs are copied at call time. */
  run(inputs?: Inputs, options?: PoolRunOptions): Promise<Tensor[]>
  /** A sequence of runs that keeps its own STATE between them. */
  sequence(options?: SequenceOptions): Sequence
  /** Refuses new runs, lets queued and running ones finish, then closes every instance. */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

export interface SequenceOptions {
  /** Logical values (C order) of STATE sources at the sequence's start (default: zeros; OWNED state: as the instance's init leaves it). */
  initialState?: Inputs
  /** Direct sequences: how long the first run waits for an instance when every one is held (default 0), then ERR_ZGC_QUEUE_FULL. */
  waitMs?: number
}

export interface SequenceRunOptions {
  /** Must be a real AbortSignal at run time: an abort rejects a run that has not started. */
  signal?: AbortSignalLike
  /** As `pool.run`'s: among queued runs of the pool, higher first. */
  priority?: number
}

/** Runs of a pool that keep their own STATE between them, one after another. */
export declare class Sequence implements AsyncDisposable {
  private constructor()
  /** Runs started or queued so far. */
  readonly runs: number
  readonly closed: boolean
  /** 'lent': storage of its own, lent to each run (BOUND state, in-process); 'direct': an instance of its own (OWNED state, or isolated). */
  readonly strategy: 'lent' | 'direct'
  /** Why a direct sequence ended on its own (its isolated instance died), or null. */
  readonly ended: string | null
  /** One run after the sequence's earlier ones; inputs are copied at call time. */
  run(inputs?: Inputs, options?: SequenceRunOptions): Promise<Tensor[]>
  /** Refuses new runs; resolves once the runs already made are over. */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

export interface BatcherOptions {
  /** How long a request waits for others to join its batch (default 0: only requests that arrived while every instance was busy join). */
  maxQueueDelayMs?: number
  /** Batch sizes (of the variants) worth running at once: waiting rows that reach the largest go without waiting out the delay (default: the largest variant). */
  preferredBatchSizes?: number[]
  /** Batches run at once, and instances of each variant (default 1). */
  instances?: number
  /** Requests that may wait before `run` rejects ERR_ZGC_QUEUE_FULL (default 1024). */
  maxQueue?: number
  /** Called once per instance of each variant, to set parameters: the variant's batch size is the third argument. */
  setup?: (runtime: Runtime, index: number, batchSize: number) => void
  f16?: LoadOptions['f16']
  offload?: LoadOptions['offload']
  isolate?: LoadOptions['isolate']
  timeoutMs?: LoadOptions['timeoutMs']
  maxMemoryMb?: LoadOptions['maxMemoryMb']
  startTimeoutMs?: LoadOptions['startTimeoutMs']
}

export interface BatcherRunOptions {
  /** Must be a real AbortSignal at run time: an abort takes a waiting request out of the queue, or drops its answer. */
  signal?: AbortSignalLike
  /** The request is never held past this, and rejects ERR_ZGC_TIMEOUT when its answer has not come by then. */
  timeoutMs?: number
  /** A 32-bit integer (default 0): higher priorities go into batches first. */
  priority?: number
}

/** One row's layout of a batched INPUT or output: its shape past the batch dimension. */
export interface BatchedTensorInfo {
  readonly name: string
  readonly dtype: DType
  readonly rowShape: readonly number[]
}

export interface BatcherStats {
  /** Runs made, each of one variant. */
  batches: number
  /** Rows of requests run. */
  rows: number
  /** Rows of zeros run to fill variants. */
  paddedRows: number
  /** Runs made of each variant, by its batch size. */
  runsBySize: Record<string, number>
  /** Runs made, by the rows of requests they held. */
  runsByRows: Record<string, number>
  pendingRows: number
  running: number
}

/** Requests of a few rows each, run together on batch variants of one graph. */
export declare class Batcher implements AsyncDisposable {
  private constructor()
  /** The variants' batch sizes, smallest first. */
  readonly batchSizes: readonly number[]
  readonly inputs: readonly BatchedTensorInfo[]
  readonly outputs: readonly BatchedTensorInfo[]
  /** Rows waiting to be run. */
  readonly pending: number
  /** Batches that may run at once (`instances`). */
  readonly size: number
  /** 'process' when the variants' instances are isolated. */
  readonly isolate?: 'process'
  readonly closed: boolean
  stats(): BatcherStats
  /** Each variant's pool's stats, by batch size. */
  variantStats(): Record<string, RunStats>
  /** Runs one request's rows (every INPUT, the same number of rows each); resolves its rows of every output, shaped `[rows, ...rowShape]`. */
  run(inputs: Inputs, options?: BatcherRunOptions): Promise<Tensor[]>
  /** Refuses new runs, runs what waits at once, then closes every variant. */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * A dynamic batcher over batch variants of one graph, `{ 1: 'm.so', 8: 'm_b8.so' }`: the
 * first dimension of every INPUT and output of a variant is its batch size.
 */
export declare function createBatcher(variants: Record<number, string | Uint8Array> | Map<number, string | Uint8Array>, options?: BatcherOptions): Batcher

/** Loads and validates an artifact (a path, `~` allowed, or the library's bytes). */
export declare function load(artifact: string | Uint8Array, options?: LoadOptions): Runtime

/** A pool of instances of one artifact (one library, separate state) for services. */
export declare function createPool(artifact: string | Uint8Array, options?: PoolOptions): Pool

import * as pto from './lib/pto'
/** The PTO task runtime host library bindings (also `zgc-runtime/pto`). */
export { pto }

declare const zgc: {
  pto: typeof pto
  ABI_VERSION: typeof ABI_VERSION
  load: typeof load
  createPool: typeof createPool
  createBatcher: typeof createBatcher
  Runtime: typeof Runtime
  Pool: typeof Pool
  Batcher: typeof Batcher
  Sequence: typeof Sequence
  ZgcError: typeof ZgcError
}
export default zgc
