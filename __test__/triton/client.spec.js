'use strict';

// zgc-runtime/client against the real Triton 2.51 (from PyPI's nvidia-pytriton, CPU-only), over
// a python-backend model that answers each input as its output: every datatype of the
// protocol goes there and back, to the bit, over binary REST and gRPC, and as JSON carries it.
const path = require('node:path');
const { startTriton, hasTriton } = require('./triton');
const { connect } = require('../../lib/client');

/** An input of each datatype, at its edges; f16 as bits, NaN payloads and -0 included. */
const INPUTS = {
  in_BOOL: { shape: [3], data: [true, false, true] },
  in_UINT8: { shape: [2], data: Uint8Array.of(0, 255) },
  in_UINT16: { shape: [2], data: Uint16Array.of(0, 65535) },
  in_UINT32: { shape: [2], data: Uint32Array.of(0, 4294967295) },
  in_UINT64: { shape: [3], data: BigUint64Array.of(0n, 2n ** 64n - 1n, 2n ** 53n + 1n) },
  in_INT8: { shape: [2], data: Int8Array.of(-128, 127) },
  in_INT16: { shape: [2], data: Int16Array.of(-32768, 32767) },
  in_INT32: { shape: [2], data: Int32Array.of(-2147483648, 2147483647) },
  in_INT64: { shape: [3], data: BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n, 12345678901234567n) },
  in_FP16: { shape: [5], data: Uint16Array.of(0x7c01, 0xfe12, 0x8000, 0x3c00, 0x7bff) },
  in_FP32: { shape: [5], data: Float32Array.of(-0, NaN, Infinity, 1.1, -3.4e38) },
  in_FP64: { shape: [3], data: Float64Array.of(-0, Math.PI, -1e308) },
  in_BYTES: { shape: [3], data: ['', 'héllo', Uint8Array.of(0, 255, 7)] },
};
const DTYPES = { BOOL: 'bool', UINT8: 'u8', UINT16: 'u16', UINT32: 'u32', UINT64: 'u64', INT8: 'i8', INT16: 'i16', INT32: 'i32', INT64: 'i64', FP16: 'f16', FP32: 'f32', FP64: 'f64', BYTES: 'bytes' };

/** The bytes of a value list as the expectation is compared: each element's own bits. */
function bitsOf(dtype, data) {
  if (dtype === 'bytes') return data.map((e) => Array.from(typeof e === 'string' ? Buffer.from(e) : e));
  if (dtype === 'bool') return Array.from(data, Number);
  if (dtype === 'f32' || dtype === 'f64') {
    const A = dtype === 'f32' ? Float32Array : Float64Array;
    const a = A.from(data);
    return Array.from(new Uint8Array(a.buffer));
  }
  return Array.from(data, String);
}

(hasTriton ? describe : describe.skip)('the client against the real Triton 2.51', () => {
  let triton;
  beforeAll(async () => {
    triton = await startTriton(path.join(__dirname, 'client-models'));
  }, 90000);
  afterAll(async () => {
    if (triton) await triton.stop();
  }, 30000);

  const address = (kind) => (kind === 'grpc' ? `grpc://127.0.0.1:${triton.grpc}` : triton.url);

  test.each([['REST (binary)', 'rest'], ['gRPC', 'grpc']])("every datatype there and back over %s, to the bit", async (_, kind) => {
    const client = await connect(address(kind), { f16: 'bits' });
    try {
      const model = await client.model('alltypes');
      expect(model.sources.map((s) => [s.name, s.dtype, s.shape])).toEqual(Object.entries(DTYPES).map(([t, d]) => [`in_${t}`, d, [-1]]));
      const outs = await model.runAsync(INPUTS);
      expect(outs.map((o) => o.name)).toEqual(Object.keys(DTYPES).map((t) => `out_${t}`));
      for (const o of outs) {
        const given = INPUTS[o.name.replace('out_', 'in_')];
        expect([o.name, o.dtype, o.shape]).toEqual([o.name, DTYPES[o.name.slice(4)], given.shape]);
        expect([o.name, bitsOf(o.dtype, o.data)]).toEqual([o.name, bitsOf(o.dtype, given.data)]);
      }
      expect(outs.find((o) => o.dtype === 'i64').data).toBeInstanceOf(BigInt64Array);
      expect(outs.find((o) => o.dtype === 'u64').data).toBeInstanceOf(BigUint64Array);
      expect(outs.find((o) => o.dtype === 'f16').data).toBeInstanceOf(Uint16Array);
    } finally {
      client.close();
    }
  });

  test('as JSON: exact 64-bit integers, and FP16 refused as Triton refuses it', async () => {
    const client = await connect(triton.url, { binary: false });
    try {
      const model = await client.model('alltypes');
      const { in_FP16: _f16, in_FP32: _f32, ...finite } = INPUTS;
      const outs = await model.runAsync({ ...finite, in_FP32: { shape: [3], data: Float32Array.of(-0, 1.1, -3.4e38) } });
      const byName = new Map(outs.map((o) => [o.name, o]));
      expect(String(byName.get('out_UINT64').data)).toBe('0,18446744073709551615,9007199254740993');
      expect(String(byName.get('out_INT64').data)).toBe('-9223372036854775808,9223372036854775807,12345678901234567');
      expect(bitsOf('f32', byName.get('out_FP32').data)).toEqual(bitsOf('f32', [-0, 1.1, -3.4e38]));
      expect(byName.get('out_BYTES').data.map((b) => new TextDecoder().decode(b))).toEqual(['', 'héllo', '\u0000\ufffd\u0007']);
      expect(byName.has('out_FP16')).toBe(false);
      const err = await model.runAsync({ in_FP16: INPUTS.in_FP16 }).catch((e) => e);
      expect(err).toMatchObject({ code: 'ERR_ZGC_REMOTE_INVALID', status: 400, server: triton.url });
      expect(err.message).toContain('receiving FP16 data via JSON is not supported');
    } finally {
      client.close();
    }
  });

  test('a stream of requests (ModelStreamInfer): each answered once, by its id, final', async () => {
    const client = await connect(address('grpc'), { f16: 'bits' });
    try {
      const model = await client.model('alltypes');
      const stream = client.stream();
      stream.send(model, { in_INT64: INPUTS.in_INT64 }, { id: 'a' });
      stream.send(model, { in_FP16: INPUTS.in_FP16, in_BYTES: INPUTS.in_BYTES }, { id: 'b' });
      stream.send(model, { in_FP32: INPUTS.in_FP32 }, { id: 'c', outputs: ['out_FP64'] });
      stream.end();
      const got = {};
      for await (const r of stream) (got[r.id] ??= []).push(r);
      expect(Object.keys(got).sort()).toEqual(['a', 'b', 'c']);
      expect(got.a.map((r) => [r.final, r.tensors.map((t) => [t.name, bitsOf(t.dtype, t.data)])])).toEqual([[true, [['out_INT64', bitsOf('i64', INPUTS.in_INT64.data)]]]]);
      expect(got.b.map((r) => [r.final, r.tensors.map((t) => [t.name, bitsOf(t.dtype, t.data)])])).toEqual([[true, [['out_FP16', bitsOf('f16', INPUTS.in_FP16.data)], ['out_BYTES', bitsOf('bytes', INPUTS.in_BYTES.data)]]]]);
      // out_FP64 asked for, which the model does not give without in_FP64: Triton answers
      // without it, and so does the stream.
      expect(got.c).toEqual([{ id: 'c', model: 'alltypes', version: '1', final: true, tensors: [] }]);
    } finally {
      client.close();
    }
  });

  test("sharedMemory: 'auto': Triton takes the tensors through this client's regions, over both", async () => {
    for (const kind of ['rest', 'grpc']) {
      const client = await connect(address(kind), { sharedMemory: 'auto' });
      expect(client.sharedMemory).toBe(true);
      const add = await client.model('add');
      for (let k = 0; k < 3; k++) {
        const a = Float32Array.of(k, 1.5, -2, 1e-3);
        const b = Float32Array.of(1, 2, 3, 4);
        expect(Array.from((await add.runAsync({ a, b }))[0].data)).toEqual(Array.from(a, (v, j) => Math.fround(v + b[j])));
      }
      const status = await (await fetch(`${triton.url}/v2/systemsharedmemory/status`)).json();
      expect(status.map((r) => r.name).filter((n) => n.startsWith(`zgc-client-${process.pid}-`))).toHaveLength(1);
      await client.close();
      const after = await (await fetch(`${triton.url}/v2/systemsharedmemory/status`)).json();
      expect(after.filter((r) => r.name.startsWith(`zgc-client-${process.pid}-`))).toEqual([]);
    }
  });

  test("Triton's refusals, health and repository, over both", async () => {
    for (const kind of ['rest', 'grpc']) {
      const client = await connect(address(kind));
      try {
        const missing = await client.model('nope').catch((e) => e);
        expect(missing).toMatchObject({ code: 'ERR_ZGC_REMOTE_NOT_FOUND', status: kind === 'grpc' ? 5 : 404 });
        expect(missing.message).toContain("Request for unknown model: 'nope' is not found");
        expect([await client.live(), await client.ready(), await client.modelReady('alltypes'), await client.modelReady('nope')]).toEqual([true, true, true, false]);
        expect(await client.metadata()).toMatchObject({ name: 'triton', version: '2.51.0' });
        expect((await client.repositoryIndex()).map((m) => [m.name, m.state])).toEqual([['add', 'READY'], ['alltypes', 'READY']]);
      } finally {
        client.close();
      }
    }
  });
});
