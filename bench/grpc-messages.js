'use strict';

// ModelInferRequest bytes for the gRPC bench, encoded independently of lib/serve/pb.js (the
// server's codec is what is measured, so the client does not share it).
function varint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}
const field = (number, bytes) => Buffer.concat([varint(number * 8 + 2), varint(bytes.length), bytes]);
const str = (number, s) => field(number, Buffer.from(s, 'utf8'));

/** `inputs`: [name, datatype, shape, TypedArray], sent as raw_input_contents. */
function encodeInferRequest(model, inputs) {
  const parts = [str(1, model)];
  for (const [name, datatype, shape] of inputs) {
    const dims = Buffer.concat(shape.map(varint));
    parts.push(field(5, Buffer.concat([str(1, name), str(2, datatype), field(3, dims)])));
  }
  for (const [, , , data] of inputs) parts.push(field(7, Buffer.from(data.buffer, data.byteOffset, data.byteLength)));
  return Buffer.concat(parts);
}

/** The first raw output of a ModelInferResponse, as f32 values. */
function decodeInferResponse(buf) {
  let pos = 0;
  const read = () => {
    let n = 0;
    let shift = 0;
    for (;;) {
      const b = buf[pos++];
      n += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if (b < 0x80) return n;
    }
  };
  while (pos < buf.length) {
    const tag = read();
    const len = read();
    if (tag === 6 * 8 + 2) return new Float32Array(buf.buffer.slice(buf.byteOffset + pos, buf.byteOffset + pos + len));
    pos += len;
  }
  throw new Error('no raw_output_contents');
}

module.exports = { encodeInferRequest, decodeInferResponse };
