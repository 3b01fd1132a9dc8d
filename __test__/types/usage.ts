// Compiled with `tsc --noEmit --strict` by types/types.spec.js: the public types must accept what
// the README shows and reject what the runtime would refuse.
import zgc, { load, createPool, createBatcher, Batcher, BatcherStats, Pool, Runtime, Tensor, ZgcError, SourceInfo, OutputArray, Float16ArrayLike } from 'zgc-runtime';
import { createServer, createHandler, ServeHandler, ShutdownResult, RepositoryIndexEntry } from 'zgc-runtime/serve';
import { connect, Client, RemoteModel, RemoteTensor, ServerStats } from 'zgc-runtime/client';

const rt: Runtime = load('model.so', { f16: 'bits' });
const fromBytes: Runtime = zgc.load(new Uint8Array(0));
const outputs: Tensor[] = rt.run({ x: new Float32Array(4), mask: [true, false], n: 3 });
const first: Float32Array | Uint16Array | Int8Array | Uint8Array | Float16ArrayLike = outputs[0].data;
const fp: bigint = rt.fingerprint;
const where: string | null = rt.path;
const info: readonly SourceInfo[] = rt.sources;
rt.set('w', [1, 2, 3]);
rt.bind('w', new Float32Array(3));
rt.output(0);
{
  using scoped = load('other.so');
  scoped.run();
}
try {
  rt.close();
} catch (err) {
  if (err instanceof ZgcError && err.code === 'ERR_ZGC_MISSING_BINDING') {
    const detail: [number | undefined, string | undefined, string | undefined] = [err.status, err.operation, err.source];
    void detail;
  }
}
const into: OutputArray[] = [new Float32Array(4)];
const reused: Tensor[] = rt.run({ x: new Float32Array(4) }, { into });
console.log(reused.length);
// @ts-expect-error into holds TypedArrays, not numbers
rt.run({}, { into: [1, 2] });
// @ts-expect-error run() takes an object of names to values
rt.run([new Float32Array(4)]);
// @ts-expect-error bind() takes storage, not a plain array
rt.bind('w', [1, 2, 3]);
const viaWorkers: Runtime = load('m.so', { offload: 'always' });
const waiting: number = viaWorkers.stats().queueDepth;
const p99: number | null = createPool('m.so', { offload: 'auto' }).stats().computeMs.p99;
const inlineNow: boolean = viaWorkers.offload.inline;
console.log(waiting, p99, inlineNow);
// @ts-expect-error offload is 'auto', 'always' or 'never'
load('m.so', { offload: 'sometimes' });
// A Float16Array (here without the esnext.float16 lib: its shape) goes wherever f16 values do.
declare const half: Float16ArrayLike;
load('m.so', { f16: 'float16' }).run({ h: half }, { into: [half] });
rt.bind('hb', half);
// @ts-expect-error f16 output format is 'float32', 'bits' or 'float16'
load('m.so', { f16: 'half' });
// @ts-expect-error the fingerprint is a bigint
const n: number = rt.fingerprint;
async function service(): Promise<number> {
  const pool: Pool = createPool('model.so', { size: 2, maxQueue: 64, setup: (r: Runtime, i: number) => r.set('w', [i]) });
  const controller = new AbortController();
  const [y] = await pool.run({ x: new Float32Array(4) }, { signal: controller.signal });
  const [z] = await rt.runAsync({ x: [1, 2] });
  await pool.run({ x: [1] }, { priority: 5 });
  // @ts-expect-error a runtime's runs keep call order: no priority
  await rt.runAsync({ x: [1] }, { priority: 5 });
  const storage = rt.storage('w');
  await pool.close();
  // @ts-expect-error pool sizes are numbers
  createPool('model.so', { size: '2' });
  return y.data.length + z.data.length + storage.length;
}
async function sequenced(pool: Pool): Promise<string> {
  const seq = pool.sequence({ initialState: { h: [1, 0, 0, 0, 0] }, waitMs: 100 });
  const [y] = await seq.run({ x: [1, 2, 3, 4] }, { priority: 2 });
  // @ts-expect-error the strategy is 'lent' or 'direct'
  const s: 'shared' = seq.strategy;
  await seq.close();
  return `${y.shape} ${seq.strategy} ${seq.ended ?? ''} ${s}`;
}
async function batched(): Promise<number> {
  const batcher: Batcher = createBatcher({ 1: 'm.so', 8: 'm_b8.so' }, { maxQueueDelayMs: 2, instances: 2, setup: (r: Runtime, i: number, size: number) => r.set('w', [i, size]) });
  const [y] = await batcher.run({ x: new Float32Array(8) }, { timeoutMs: 50, priority: 1 });
  const stats: BatcherStats = batcher.stats();
  const rows: readonly number[] = batcher.inputs[0].rowShape;
  // @ts-expect-error a batcher's delay is a number of ms
  createBatcher({ 1: 'm.so' }, { maxQueueDelayMs: '2' });
  // @ts-expect-error variants are artifacts (paths or bytes) by batch size
  createBatcher({ 1: 42 });
  await batcher.close();
  return y.shape[0] + stats.paddedRows + rows.length + batcher.batchSizes.length;
}
export { first, fp, where, info, fromBytes, n, service, batched, sequenced };

// PTO bindings, through the root export and the subpath.
import { pto } from 'zgc-runtime';
import { load as loadPto, PtoError, PtoRuntime, LaunchParams } from 'zgc-runtime/pto';
async function ptoUsage(): Promise<void> {
  const library = pto.load('libpto_runtime.so');
  await library.setDevice(0);
  await library.registerKernel(0, new Uint8Array([1]));
  const runtime: PtoRuntime = library.createRuntime();
  await runtime.initialize();
  const params: LaunchParams = { aicpuThreadNum: 1, blockDim: 1, aicpuBinary: new Uint8Array(1), aicoreBinary: new Uint8Array(1) };
  await runtime.launch(params);
  try {
    await runtime.finalize();
  } catch (err) {
    if (err instanceof PtoError) console.log(err.code, err.rc, err.operation);
  }
  const same = loadPto(new Uint8Array(0));
  console.log(same.device, runtime.state);
  // @ts-expect-error launch needs the binaries
  await runtime.launch({ aicpuThreadNum: 1, blockDim: 1 });
  // @ts-expect-error funcId is a number
  await library.registerKernel('0', new Uint8Array(1));
}
console.log(ptoUsage);

async function serveUsage(): Promise<void> {
  const server = createServer({ models: ['models/', 'add=add.so'], poolSize: 2, timeoutMs: 1000, log: console.error });
  createServer({ models: 'models/', modelControl: 'explicit', maxInflightBytes: '1g', headersTimeoutMs: 5000, maxConnections: 100, grpcMaxConcurrentStreams: 8 });
  // @ts-expect-error model control is none, poll or explicit
  createServer({ models: 'models/', modelControl: 'auto' });
  server.listen(8000);
  const handler: ServeHandler = createHandler({ models: 'repo' });
  const rows: RepositoryIndexEntry[] = handler.repository.index(true);
  await handler.repository.load('add');
  const done: ShutdownResult = await server.shutdown({ deadlineMs: 5000 });
  console.log(rows, done.drained, server.zgc.active);
  // @ts-expect-error models are paths, not artifacts
  createServer({ models: [new Uint8Array(1)] });
  // @ts-expect-error models are required
  createHandler({ poolSize: 1 });
}
console.log(serveUsage);

async function clientUsage(): Promise<void> {
  const server: Client = await connect('http://127.0.0.1:8000', { binary: false, f16: 'bits' });
  const spread: Client = await connect(['grpc://a:8001', new URL('grpc://b:8001')]);
  const mlp: RemoteModel = await server.model('mlp', { version: 1 });
  const outs: RemoteTensor[] = await mlp.runAsync({ x: new Float32Array(4), y: { shape: [2], data: [1, 2] } }, { timeoutMs: 100, outputs: ['probs'], signal: new AbortController().signal });
  const seq = mlp.sequence();
  await seq.run({ x: [1, 2, 3, 4] }, { end: true });
  const stats: ServerStats[] = spread.stats();
  console.log(outs[0].dtype, outs[0].shape, mlp.sources[0].dtype, stats[0].outstanding, await server.repositoryIndex());
  const stream = spread.stream();
  stream.send(mlp, { x: [1, 2, 3, 4] }, { id: 'r1' });
  stream.end();
  for await (const r of stream) console.log(r.id, r.final, r.tensors?.length, r.error?.code);
  for await (const step of mlp.responses({ x: { shape: [4], data: new Float32Array(4), dtype: 'f32' } })) console.log(step[0].data);
  // @ts-expect-error f16 is float32, bits or float16
  await connect('http://x', { f16: 'half' });
  // @ts-expect-error inputs are TypedArrays, arrays or { shape, data }
  await mlp.runAsync({ x: new Map() });
  // @ts-expect-error a sequence run takes end, not sequence
  await seq.run({ x: [1] }, { sequence: { id: 1 } });
}
console.log(clientUsage);
