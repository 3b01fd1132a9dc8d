'use strict';

// lib/protocol/pb.js, the server's protobuf codec, against protobufjs reading the same
// inference.proto: messages protobufjs writes decode to the same values, the messages the
// server writes read back the same in protobufjs, and a cut message is refused, never misread.

const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const protobuf = require('protobufjs');
const { decode, encoders, messages, DecodeError } = require('../../lib/protocol/pb');
const { rng } = require('../helpers');

const root = protobuf.loadSync(path.join(testDir, '..', 'lib', 'serve', 'inference.proto'));
const Request = root.lookupType('inference.ModelInferRequest');
const Response = root.lookupType('inference.ModelInferResponse');
const MetadataResponse = root.lookupType('inference.ModelMetadataResponse');
const ServerMetadataResponse = root.lookupType('inference.ServerMetadataResponse');
const LiveResponse = root.lookupType('inference.ServerLiveResponse');
const ReadyResponse = root.lookupType('inference.ServerReadyResponse');
const IndexResponse = root.lookupType('inference.RepositoryIndexResponse');
const toObject = (type, bytes) => type.toObject(type.decode(bytes), { longs: Number, bytes: Buffer, defaults: true, arrays: true, objects: true });

// A fixed seed: the same messages each run.
const next = rng(2027);
const random = (n) => Math.floor(next() * n);
const pick = (list) => list[random(list.length)];
const text = () => pick(['', 'a', 'input_0', 'ünïcødé ✓', 'x'.repeat(200)]);
const bytesOf = (n) => Buffer.from(Array.from({ length: n }, () => random(256)));
const param = () => pick([{ boolParam: true }, { int64Param: -(2 ** 40) }, { int64Param: 7 }, { stringParam: text() }, { doubleParam: -1.5e300 }, { uint64Param: 2 ** 52 }]);
const params = () => Object.fromEntries(Array.from({ length: random(3) }, (_, k) => [`p${k}`, param()]));

function randomRequest() {
  const inputs = Array.from({ length: random(4) }, () => ({
    name: text(),
    datatype: pick(['FP32', 'FP16', 'INT8', 'BOOL']),
    shape: Array.from({ length: random(4) }, () => pick([0, 1, 3, 127, 128, 300, 2 ** 33, -1, -(2 ** 40)])),
    parameters: params(),
    ...(random(2) === 0
      ? {
          contents: {
            boolContents: Array.from({ length: random(3) }, () => random(2) === 1),
            intContents: Array.from({ length: random(4) }, () => pick([0, -1, 127, -128, 2 ** 31 - 1, -(2 ** 31)])),
            int64Contents: Array.from({ length: random(3) }, () => pick([0, -5, 2 ** 50])),
            uintContents: Array.from({ length: random(3) }, () => pick([0, 255, 2 ** 32 - 1])),
            uint64Contents: Array.from({ length: random(2) }, () => pick([0, 2 ** 52])),
            fp32Contents: Array.from({ length: random(5) }, () => Math.fround(pick([0, -0, 1.5, -3.25e-5, Infinity, 3.4e38]))),
            fp64Contents: Array.from({ length: random(3) }, () => pick([0.1, -1e-300, 1e300])),
            bytesContents: Array.from({ length: random(2) }, () => bytesOf(random(20))),
          },
        }
      : {}),
  }));
  return {
    modelName: text(),
    modelVersion: pick(['', '1', '42']),
    id: text(),
    parameters: params(),
    inputs,
    outputs: Array.from({ length: random(3) }, () => ({ name: text(), parameters: params() })),
    rawInputContents: Array.from({ length: random(3) }, () => bytesOf(pick([0, 3, 16, 1025, 5000]))),
  };
}

/** What pb.decode gives, in protobufjs's shape: maps as objects, absent messages as null. */
function normalized(msg) {
  const map = (entries) => Object.fromEntries(entries.map((e) => [e.key, { ...e.value }]));
  return {
    modelName: msg.modelName ?? '',
    modelVersion: msg.modelVersion ?? '',
    id: msg.id ?? '',
    parameters: map(msg.parameters),
    inputs: msg.inputs.map((t) => ({
      name: t.name ?? '',
      datatype: t.datatype ?? '',
      shape: t.shape,
      parameters: map(t.parameters),
      contents: t.contents === undefined ? null : { ...t.contents, bytesContents: t.contents.bytesContents.map((b) => Buffer.from(b)) },
    })),
    outputs: msg.outputs.map((o) => ({ name: o.name ?? '', parameters: map(o.parameters) })),
    rawInputContents: msg.rawInputContents.map((b) => Buffer.from(b)),
  };
}

/** protobufjs's reading of a request, with parameters' oneof reduced to the field set. */
function expected(bytes) {
  const o = toObject(Request, bytes);
  const map = (m) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k, { ...v }]));
  return {
    ...o,
    parameters: map(o.parameters),
    inputs: o.inputs.map((t) => ({ ...t, parameters: map(t.parameters), contents: t.contents ?? null })),
    outputs: o.outputs.map((r) => ({ ...r, parameters: map(r.parameters) })),
  };
}

test('300 random ModelInferRequests written by protobufjs decode to the same values', () => {
  for (let n = 0; n < 300; n++) {
    const bytes = Buffer.from(Request.encode(Request.fromObject(randomRequest())).finish());
    expect(normalized(decode(messages.ModelInferRequest, bytes))).toEqual(expected(bytes));
  }
});

test('a message anywhere in a larger buffer decodes the same, and bytes fields are views of it', () => {
  const bytes = Buffer.from(Request.encode(Request.fromObject({ modelName: 'm', rawInputContents: [bytesOf(16)] })).finish());
  const slab = Buffer.alloc(bytes.length + 200, 0xff);
  bytes.copy(slab, 101);
  const msg = decode(messages.ModelInferRequest, slab.subarray(101, 101 + bytes.length));
  expect(msg.modelName).toBe('m');
  expect(msg.rawInputContents[0].buffer).toBe(slab.buffer);
  expect(Buffer.from(msg.rawInputContents[0])).toEqual(Request.decode(bytes).rawInputContents[0]);
});

test('every cut of a message is refused with a DecodeError or decodes to a prefix of its fields, never read past the cut', () => {
  for (let n = 0; n < 40; n++) {
    const bytes = Buffer.from(Request.encode(Request.fromObject(randomRequest())).finish());
    for (let cut = 0; cut < bytes.length; cut++) {
      // The bytes after the cut are garbage that a reader going past it would see.
      const slab = Buffer.concat([bytes.subarray(0, cut), Buffer.alloc(64, 0x0a)]);
      let mine;
      try {
        mine = decode(messages.ModelInferRequest, slab, 0, cut);
      } catch (err) {
        expect(err).toBeInstanceOf(DecodeError);
        continue;
      }
      // Accepted: it ended on a field boundary, and protobufjs reads the same prefix the same.
      expect(normalized(mine)).toEqual(expected(bytes.subarray(0, cut)));
    }
  }
});

test('inferResponse: protobufjs reads back the ids, metadata and raw contents, small and past the copy limit', () => {
  for (let n = 0; n < 100; n++) {
    const outputs = Array.from({ length: random(4) }, () => {
      const data = pick([Float32Array, Uint16Array, Int8Array, Uint8Array]);
      const length = pick([0, 1, 4, 300, 2000]);
      const values = new data(length).map(() => random(100));
      // Some outputs are views into a larger buffer.
      const view = random(2) === 0 ? values : new data(new data([0, ...values]).buffer, data.BYTES_PER_ELEMENT, length);
      return { name: text(), datatype: pick(['FP32', 'FP16']), shape: Array.from({ length: random(3) }, () => pick([1, 128, 2 ** 33])), data: view };
    });
    const msg = { modelName: text(), modelVersion: pick(['', '1']), id: pick([undefined, '', text()]), outputs };
    const back = toObject(Response, encoders.inferResponse(msg));
    expect(back.modelName).toBe(msg.modelName);
    expect(back.modelVersion).toBe(msg.modelVersion);
    expect(back.id).toBe(msg.id ?? '');
    expect(back.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual(outputs.map((o) => [o.name, o.datatype, o.shape]));
    expect(back.rawOutputContents).toEqual(outputs.map((o) => Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength)));
  }
});

test('fields the schema does not know are stepped over, of every wire type; groups and cut ones are refused', () => {
  const known = Buffer.from(Request.encode(Request.fromObject({ modelName: 'm', id: 'x', rawInputContents: [bytesOf(8)] })).finish());
  // Field 99 (two-byte tag) as a varint, 98 as fixed64, 97 as fixed32, 96 as bytes, 15 as a ten-byte varint.
  const unknown = Buffer.concat([
    Buffer.from([0x98, 0x06, 0xac, 0x02]),
    Buffer.from([0x91, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]),
    Buffer.from([0x8d, 0x06, 1, 2, 3, 4]),
    Buffer.from([0x82, 0x06, 3, 0x0a, 0x0a, 0x0a]),
    Buffer.from([0x78, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
  ]);
  const mixed = Buffer.concat([unknown.subarray(0, 4), known, unknown.subarray(4)]);
  expect(normalized(decode(messages.ModelInferRequest, mixed))).toEqual(expected(known));
  // As a Uint8Array that is not a Buffer, strings read the same.
  const plain = new Uint8Array(mixed.buffer.slice(mixed.byteOffset, mixed.byteOffset + mixed.length));
  expect(normalized(decode(messages.ModelInferRequest, plain))).toEqual(expected(known));
  const refusal = (bytes) => {
    try {
      decode(messages.ModelInferRequest, bytes);
    } catch (err) {
      expect(err).toBeInstanceOf(DecodeError);
      return err.message;
    }
    return 'accepted';
  };
  // Each names where decoding stopped: the field's tag, or the byte a value lacks.
  expect(refusal(Buffer.from([0x9b, 0x06]))).toBe('wire type 3 is not supported at byte 0');
  expect(refusal(Buffer.from([0x9c, 0x06]))).toBe('wire type 4 is not supported at byte 0');
  expect(refusal(Buffer.from([0x91, 0x06, 1, 2, 3]))).toBe('truncated field at byte 0');
  expect(refusal(Buffer.from([0x8d, 0x06, 1, 2, 3]))).toBe('truncated field at byte 0');
  expect(refusal(Buffer.from([0x82, 0x06, 4, 1, 2, 3]))).toBe('truncated field at byte 0');
  expect(refusal(Buffer.from([0x0a, 0x01, 0x61, 0x82, 0x06, 4, 1, 2, 3]))).toBe('truncated field at byte 3');
  // An eleven-byte varint, and a known field sent with the wrong wire type.
  expect(refusal(Buffer.from([0x78, ...Array(10).fill(0xff), 0x01]))).toBe('varint too long at byte 1');
  expect(refusal(Buffer.from([0x08, 0x01]))).toBe('field modelName: wire type 0 does not match string at byte 0');
  expect(refusal(Buffer.from([0x0a, 0x05, 0x61]))).toBe('field modelName runs past its message at byte 0');
  expect(refusal(Buffer.from([0x2a, 0x03, 0x1a, 0x05, 0x01]))).toBe('field shape runs past its message at byte 2');
  expect(refusal(Buffer.from([0x2a, 0x02, 0x18, 0x80]))).toBe('truncated varint at byte 4');
});

test('repeated scalars sent unpacked, one field each, are read as packed ones are', () => {
  // inputs[0]: name "a", shape 2 and 3 as separate varint fields, and an fp32 content unpacked.
  const input = Buffer.from([0x0a, 0x01, 0x61, 0x18, 0x02, 0x18, 0x03, 0x2a, 0x05, 0x35, 0x00, 0x00, 0xc0, 0x3f]);
  const bytes = Buffer.concat([Buffer.from([0x2a, input.length]), input]);
  const mine = decode(messages.ModelInferRequest, bytes).inputs[0];
  expect(mine.shape).toEqual([2, 3]);
  expect(mine.contents.fp32Contents).toEqual([1.5]);
  expect(Request.decode(bytes).inputs[0].shape.map(Number)).toEqual([2, 3]);
});

test('packed floats and doubles cut inside a value are refused, with the bytes after the cut present', () => {
  const bytes = Buffer.from(Request.encode(Request.fromObject({ inputs: [{ contents: { fp32Contents: [1.5, 2.5], fp64Contents: [0.25] } }] })).finish());
  expect(decode(messages.ModelInferRequest, bytes).inputs[0].contents).toMatchObject({ fp32Contents: [1.5, 2.5], fp64Contents: [0.25] });
  // Shorten each packed field's length by one byte: its last value is then cut.
  const fp32 = bytes.indexOf(Buffer.from([0x32, 0x08]));
  const cut32 = Buffer.from(bytes);
  cut32[fp32 + 1] = 7;
  expect(() => decode(messages.ModelInferRequest, cut32)).toThrow(new DecodeError('truncated float', fp32 + 2 + 4));
  const fp64 = bytes.indexOf(Buffer.from([0x3a, 0x08]));
  const cut64 = Buffer.from(bytes);
  cut64[fp64 + 1] = 7;
  expect(() => decode(messages.ModelInferRequest, cut64)).toThrow(new DecodeError('truncated double', fp64 + 2));
});

test('int64 extremes: -2^63, -2^32 and other negatives whose low word is zero, both ways', () => {
  const shape = [-(2 ** 63), -(2 ** 32), -(2 ** 33), -(2 ** 52), -1, 2 ** 53 - 1];
  const bytes = Buffer.from(Request.encode(Request.fromObject({ inputs: [{ name: 'a', shape }] })).finish());
  expect(decode(messages.ModelInferRequest, bytes).inputs[0].shape).toEqual(shape);
  const meta = { name: 'm', versions: [], platform: '', inputs: [{ name: 'a', datatype: 'FP32', shape }], outputs: [] };
  expect(toObject(MetadataResponse, encoders.modelMetadata(meta)).inputs[0].shape).toEqual(shape);
  expect(encoders.modelMetadata(meta)).toEqual(Buffer.from(MetadataResponse.encode(MetadataResponse.fromObject(present(meta))).finish()));
});

/** `obj` without its default values: protobufjs writes every field it is given, proto3 leaves defaults out. */
const present = (obj) => (Array.isArray(obj) ? obj.map(present) : obj !== null && typeof obj === 'object' && !Buffer.isBuffer(obj) ? Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== '' && v !== false).map(([k, v]) => [k, present(v)])) : obj);

test('the Writer-built messages are byte for byte what protobufjs writes, defaults left out', () => {
  for (const meta of [{ name: '', version: '1', extensions: [] }, { name: 'zgc-runtime', version: '', extensions: ['model_repository', 'ünï'] }]) {
    expect(encoders.serverMetadata(meta)).toEqual(Buffer.from(ServerMetadataResponse.encode(ServerMetadataResponse.fromObject(present(meta))).finish()));
  }
  for (const v of [true, false]) {
    expect(encoders.live({ live: v })).toEqual(Buffer.from(LiveResponse.encode(present({ live: v })).finish()));
    expect(encoders.ready({ ready: v })).toEqual(Buffer.from(ReadyResponse.encode(present({ ready: v })).finish()));
  }
  expect(encoders.empty()).toHaveLength(0);
  // Large pieces (over the copy limit) between many small fields, and growth after them.
  const index = { models: [{ name: 'big', version: '1', state: 'READY', reason: 'r'.repeat(3000) }, ...Array.from({ length: 200 }, (_, k) => ({ name: `m${k}`, version: '', state: k % 3 ? 'READY' : '', reason: k % 50 ? '' : 'y'.repeat(1500) }))] };
  expect(encoders.repositoryIndex(index)).toEqual(Buffer.from(IndexResponse.encode(IndexResponse.fromObject(present(index))).finish()));
});

test('the Writer-built messages (metadata, repository index) read back in protobufjs', () => {
  const meta = {
    name: 'ünïcødé',
    versions: ['1', '2'],
    platform: 'zgc',
    inputs: [{ name: 'a', datatype: 'FP32', shape: [2 ** 33, 3, -1, -(2 ** 50) - 3] }],
    outputs: [{ name: 'o'.repeat(2000), datatype: 'INT8', shape: [] }],
  };
  expect(toObject(MetadataResponse, encoders.modelMetadata(meta))).toEqual(meta);
  const index = { models: Array.from({ length: 50 }, (_, k) => ({ name: `m${k}`, version: String(k), state: 'READY', reason: k % 2 ? '' : 'x'.repeat(k * 40) })) };
  expect(toObject(IndexResponse, encoders.repositoryIndex(index))).toEqual(index);
});

test('a ModelStreamInferResponse reads back in protobufjs: an answer whole, a refusal as its message and id', () => {
  const { encodeStreamResponse } = require('../../lib/serve/grpc-stream');
  const StreamResponse = root.lookupType('inference.ModelStreamInferResponse');
  const answer = { modelName: 'm', modelVersion: '2', id: 'req-7', outputs: [{ name: 'y', datatype: 'FP32', shape: [2], data: Buffer.from(Float32Array.of(1.5, -2).buffer) }] };
  const got = toObject(StreamResponse, encodeStreamResponse({ response: encoders.inferResponse(answer) }));
  expect(got.errorMessage).toBe('');
  expect(got.inferResponse).toMatchObject({ modelName: 'm', modelVersion: '2', id: 'req-7', outputs: [{ name: 'y', datatype: 'FP32', shape: [2] }] });
  expect(got.inferResponse.rawOutputContents).toEqual([answer.outputs[0].data]);
  const refused = toObject(StreamResponse, encodeStreamResponse({ error: '[request id: r] no', id: 'r' }));
  expect(refused.errorMessage).toBe('[request id: r] no');
  expect(refused.inferResponse).toMatchObject({ id: 'r', modelName: '', outputs: [] });
});
