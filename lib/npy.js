'use strict';

// NumPy .npy files (format versions 1.0-3.0) for the four ZGC dtypes: f32 '<f4', f16 '<f2'
// (raw binary16 bits), i8 '|i1', bool '|b1'. C order only.

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY
const DESCR = { f32: '<f4', f16: '<f2', i8: '|i1', bool: '|b1' };
const ARRAYS = { f32: Float32Array, f16: Uint16Array, i8: Int8Array, bool: Uint8Array };
const BY_DESCR = { '<f4': 'f32', '<f2': 'f16', '|i1': 'i8', '<i1': 'i8', '|b1': 'bool', '<b1': 'bool' };

class NpyError extends Error {}

/** Parses .npy bytes: `{ dtype, shape, data }` with data a TypedArray (f16 as bits). */
function parseNpy(bytes, what = 'file') {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) throw new NpyError(`${what} is not a .npy file (no \\x93NUMPY magic)`);
  const major = buf[6];
  if (major < 1 || major > 3) throw new NpyError(`${what}: .npy format version ${major}.${buf[7]} is not supported (1.0 to 3.0)`);
  const lenBytes = major === 1 ? 2 : 4;
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = 8 + lenBytes;
  if (start + headerLen > buf.length) throw new NpyError(`${what}: header runs past the end of the file`);
  const header = buf.subarray(start, start + headerLen).toString(major === 3 ? 'utf8' : 'latin1');
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeText) throw new NpyError(`${what}: malformed header ${JSON.stringify(header.trim())}`);
  const dtype = BY_DESCR[descr[1]];
  if (!dtype) throw new NpyError(`${what}: dtype '${descr[1]}' is not one of ${Object.values(DESCR).join(', ')} (f32, f16, i8, bool)`);
  if (fortran[1] === 'True') throw new NpyError(`${what}: Fortran-order arrays are not supported; save with np.ascontiguousarray`);
  const shape = shapeText[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  if (shape.some((d) => !Number.isSafeInteger(d) || d < 0)) throw new NpyError(`${what}: bad shape (${shapeText[1]})`);
  const count = shape.reduce((a, b) => a * b, 1);
  const Array_ = ARRAYS[dtype];
  const bytesNeeded = count * Array_.BYTES_PER_ELEMENT;
  const body = buf.subarray(start + headerLen);
  if (body.length !== bytesNeeded) throw new NpyError(`${what}: shape (${shape.join(', ')}) of ${dtype} needs ${bytesNeeded} data bytes, the file has ${body.length}`);
  const data = new Array_(count);
  new Uint8Array(data.buffer).set(body);
  return { dtype, shape, data };
}

/** .npy (version 1.0) bytes of a tensor; f16 data are raw bits (Uint16Array). */
function formatNpy(dtype, shape, data) {
  const descr = DESCR[dtype];
  if (!descr) throw new NpyError(`no .npy dtype for ${dtype}`);
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  // Magic, version, length, header and its newline are padded to a multiple of 64 bytes.
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 10 - 1, ' ') + '\n';
  const head = Buffer.alloc(10);
  MAGIC.copy(head);
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  // The header is ASCII (a descr and digits): its length in characters is its length in bytes.
  return Buffer.concat([head, Buffer.from(header), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

module.exports = { parseNpy, formatNpy, NpyError, ARRAYS };
