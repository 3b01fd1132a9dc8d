'use strict';

// ModelInferRequest bytes for the gRPC bench, encoded independently of lib/protocol/pb.js (the
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

/** Length-delimited fields of a message: [number, wire, start, end] (varints skipped). */
function fields(buf, from = 0, to = buf.length) {
  const out = [];
  let pos = from;
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
  while (pos < to) {
    const tag = read();
    const wire = tag & 7;
    if (wire === 2) {
      const len = read();
      out.push([Math.floor(tag / 8), pos, pos + len]);
      pos += len;
    } else if (wire === 0) read();
    else pos += wire === 1 ? 8 : 4;
  }
  return out;
}

/** The first output of a ModelInferResponse as f32 values: raw bytes, or typed fp32_contents. */
function decodeInferResponse(buf) {
  const top = fields(buf);
  const raw = top.find(([n]) => n === 6);
  const copy = (from, to) => new Float32Array(buf.buffer.slice(buf.byteOffset + from, buf.byteOffset + to));
  if (raw) return copy(raw[1], raw[2]);
  const output = top.find(([n]) => n === 5);
  const contents = output && fields(buf, output[1], output[2]).find(([n]) => n === 5);
  const fp32 = contents && fields(buf, contents[1], contents[2]).find(([n]) => n === 6);
  if (!fp32) throw new Error('no output values in the response');
  return copy(fp32[1], fp32[2]);
}

module.exports = { encodeInferRequest, decodeInferResponse };
