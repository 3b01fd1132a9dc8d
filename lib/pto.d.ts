// The PTO task runtime host library (`require('zgc-runtime').pto`, or `zgc-runtime/pto`).
// Every method that calls the library returns a Promise; all calls of one library run in
// call order on one OS thread that library owns.

export type PtoErrorCode =
  | 'ERR_PTO_LOAD'
  | 'ERR_PTO_STATE'
  | 'ERR_PTO_LIVE_RUNTIME'
  | 'ERR_PTO_DEVICE'
  | 'ERR_PTO_INVALID_ARGUMENT'
  | 'ERR_PTO_FAILED'
  | 'ERR_PTO_VALIDATION'
  | 'ERR_PTO_OUT_OF_MEMORY'
  | 'ERR_PTO_STOPPED'

export declare class PtoError extends Error {
  readonly name: 'PtoError'
  readonly code: PtoErrorCode
  /** The library's raw result when it was called and failed: -1, or a positive device code. */
  readonly rc: number | null
  /** The C function concerned (`'dlopen'` for load errors). */
  readonly operation: string | null
}

export type PtoRuntimeState = 'created' | 'initialized' | 'launched' | 'finalized'

export interface LaunchParams {
  /** AICPU scheduler threads, 1..4. */
  aicpuThreadNum: number
  /** Blocks (1 AIC + 2 AIV each), 1..24 and a multiple of aicpuThreadNum. */
  blockDim: number
  /** Defaults to the library's device; any other id is refused. */
  deviceId?: number
  aicpuBinary: Uint8Array
  aicoreBinary: Uint8Array
}

export declare class PtoRuntime {
  private constructor()
  readonly library: PtoLibrary
  /** As of the last settled call. */
  readonly state: PtoRuntimeState
  initialize(): Promise<void>
  launch(params: LaunchParams): Promise<void>
  /** Rejects with ERR_PTO_VALIDATION when the library's validation fails. */
  finalize(): Promise<void>
}

export declare class PtoLibrary {
  private constructor()
  /** Resolved path; null when loaded from bytes. */
  readonly path: string | null
  readonly runtimeSize: number
  /** The device of the first setDevice, once it settled; null before. */
  readonly device: number | null
  /** OS thread id (tid) on which every call of this library runs. */
  readonly threadId: number
  setDevice(deviceId: number): Promise<void>
  registerKernel(funcId: number, binary: Uint8Array): Promise<void>
  createRuntime(): PtoRuntime
}

/** A path (the same path gives the same library) or the library's bytes. Never unloaded. */
export declare function load(library: string | Uint8Array): PtoLibrary

declare const pto: {
  load: typeof load
  PtoLibrary: typeof PtoLibrary
  PtoRuntime: typeof PtoRuntime
  PtoError: typeof PtoError
}
export default pto
