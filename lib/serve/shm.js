'use strict';

// Client system shared memory, Triton's `shared_memory` extension: a client on the same host
// registers a POSIX shared memory object by its key, and requests then name a region, an
// offset and a size instead of sending tensor bytes. Off unless the server allows it.
//
// Regions are read and written through their descriptor (pread, pwrite), never mapped: a
// client that truncates its object mid-request gets a short read and a 400, where a mapping
// would raise SIGBUS and end the process.

const fs = require('node:fs');
const path = require('node:path');
const { RequestError, bad } = require('./reasons');
const { ARRAY } = require('./signature');
const { overBudget } = require('./body');

/** Where Linux keeps POSIX shared memory objects (shm_open's names). */
const SHM_DIR = '/dev/shm';
/** A key is shm_open's name: one slash, then a file name of these characters (never a path). */
const KEY = /^\/[A-Za-z0-9._-]{1,250}$/;
/** A region's name, as clients choose it: it is echoed in answers and logs, so kept plain. */
const NAME = /^[A-Za-z0-9._:-]{1,128}$/;
/** Regions a server holds open at once: each is a descriptor. */
const MAX_REGIONS = 256;
/** Reads and writes of this many bytes or more go to the libuv pool, off the event loop. */
const ASYNC_BYTES = 1 << 20;
/** Input buffers from this size up are kept for the next request (a few per size): no GC churn. */
const SPARE_BYTES = 1 << 16;
const SPARES_PER_SIZE = 4;

const { O_RDWR, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

const quoted = (s) => JSON.stringify(typeof s === 'string' && s.length > 130 ? `${s.slice(0, 130)}…` : s);

function checkInteger(what, v) {
  if (!Number.isSafeInteger(v) || v < 0) throw bad(`${what} must be a non-negative integer, got ${quoted(v)}`);
  return v;
}

/** The regions a server holds, by name. `allowed` false: every call says how to turn it on. */
class Regions {
  #regions = new Map();
  #closed = false;
  // Input buffers a run has taken its copy of, by byte size, for the next request's reads.
  #spares = new Map();

  constructor({ allowed }) {
    this.allowed = allowed;
  }

  get count() {
    return this.#regions.size;
  }

  get bytes() {
    let total = 0;
    for (const r of this.#regions.values()) total += r.byteSize;
    return total;
  }

  #buffer(bytes) {
    const list = this.#spares.get(bytes);
    return list !== undefined && list.length > 0 ? list.pop() : Buffer.allocUnsafeSlow(bytes).buffer;
  }

  #get(name) {
    if (!this.allowed) throw off();
    const r = typeof name === 'string' ? this.#regions.get(name) : undefined;
    if (r === undefined) throw bad(`no shared memory region ${quoted(name)} is registered`);
    return r;
  }

  register(name, key, offset, byteSize) {
    if (!this.allowed) throw off();
    if (this.#closed) throw new RequestError('shutting_down', 'the server is shutting down');
    if (typeof name !== 'string' || !NAME.test(name)) throw bad(`a region name must be 1 to 128 of A-Z a-z 0-9 . _ : -, got ${quoted(name)}`);
    if (typeof key !== 'string' || !KEY.test(key) || key === '/.' || key === '/..') throw bad(`region ${quoted(name)}: the key must be a POSIX shared memory name, "/" then 1 to 250 of A-Z a-z 0-9 . _ -, got ${quoted(key)}`);
    checkInteger(`region ${quoted(name)}: offset`, offset);
    checkInteger(`region ${quoted(name)}: byte_size`, byteSize);
    if (this.#regions.has(name)) throw bad(`a shared memory region named ${quoted(name)} is registered already: unregister it first`);
    if (this.#regions.size >= MAX_REGIONS) throw bad(`the server holds ${MAX_REGIONS} shared memory regions already, its most: unregister one first`);
    let fd;
    try {
      // No symlink is followed, and opening a FIFO placed there does not wait for a writer.
      fd = fs.openSync(path.join(SHM_DIR, key.slice(1)), O_RDWR | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      throw bad(`region ${quoted(name)}: the shared memory object ${quoted(key)} cannot be opened (${err.code}): create it first, readable and writable by the server`);
    }
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile()) throw bad(`region ${quoted(name)}: ${quoted(key)} is not a shared memory object`);
      if (offset + byteSize > st.size) throw bad(`region ${quoted(name)}: offset ${offset} + byte_size ${byteSize} runs past the end of ${quoted(key)} (${st.size} bytes)`);
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
    this.#regions.set(name, { name, key, offset, byteSize, fd, users: 0, closing: false });
  }

  #closeRegion(r) {
    this.#regions.delete(r.name);
    // A region a request still reads or writes closes when it lets go: a descriptor closed
    // under it could be reused for another file meanwhile.
    if (r.users === 0) fs.closeSync(r.fd);
    else r.closing = true;
  }

  /** Unregisters one region, or every one (`name` empty). A region a request uses stays, and that is an error. */
  unregister(name) {
    if (!this.allowed) throw off();
    if (name !== undefined && name !== '') {
      const r = this.#get(name);
      if (r.users > 0) throw bad(`shared memory region ${quoted(name)} is in use by ${r.users} request${r.users > 1 ? 's' : ''}: unregister it once they are answered`);
      this.#closeRegion(r);
      return;
    }
    const busy = [...this.#regions.values()].filter((r) => r.users > 0);
    for (const r of [...this.#regions.values()]) if (r.users === 0) this.#closeRegion(r);
    if (busy.length > 0) throw bad(`shared memory region${busy.length > 1 ? 's' : ''} ${busy.map((r) => quoted(r.name)).join(', ')} ${busy.length > 1 ? 'are' : 'is'} in use and stay${busy.length > 1 ? '' : 's'} registered; the others are unregistered`);
  }

  /** `[{ name, key, offset, byte_size }]` of one region or every one. */
  status(name) {
    if (!this.allowed) throw off();
    const list = name !== undefined && name !== '' ? [this.#get(name)] : [...this.#regions.values()];
    return list.map((r) => ({ name: r.name, key: r.key, offset: r.offset, byte_size: r.byteSize }));
  }

  /**
   * The region `where.region`, held (it cannot be unregistered) until released; the
   * tensor's offset and size (checked against the tensor at parse) must lie inside it.
   */
  #hold(where, what) {
    const r = this.#get(where.region);
    if (where.offset + where.byteSize > r.byteSize) throw bad(`${what}: shared_memory_offset ${where.offset} + shared_memory_byte_size ${where.byteSize} runs past region ${quoted(r.name)} (${r.byteSize} bytes)`);
    r.users++;
    return r;
  }

  #release(r) {
    r.users--;
    if (r.users === 0 && r.closing) fs.closeSync(r.fd);
  }

  /**
   * Holds every region `request` names (parsed: `shmInputs`, `shmOutputs`) and reads its
   * inputs from them into `request.inputs`, their bytes counted against the in-flight budget
   * (`claim.bytes` grows by them). Resolves the regions held, for `deliver` and `letGo`.
   */
  async stage(request, budget, claim) {
    const ins = request.shmInputs ?? [];
    const outs = request.shmOutputs ?? [];
    const held = [];
    try {
      let bytes = 0;
      for (const i of ins) {
        held.push(this.#hold(i, `input "${i.name}"`));
        bytes += i.byteSize;
      }
      for (const o of outs) held.push(this.#hold(o, `output "${o.name}"`));
      if (bytes > 0) {
        if (!budget.claim(bytes)) throw overBudget(budget);
        claim.bytes += bytes;
      }
      // Into uninitialised memory (every byte is read over it), all inputs at once.
      const reads = ins.map((i, k) => {
        const target = new ARRAY[i.datatype](this.#buffer(i.byteSize), 0, i.count);
        request.inputs[i.name] = target;
        return readRegion(held[k], i.offset, target, `input "${i.name}"`);
      });
      if (reads.some((r) => r instanceof Promise)) await Promise.all(reads);
      return held;
    } catch (err) {
      this.letGo(held);
      throw err;
    }
  }

  /** Writes the run's outputs that `request` asked for in shared memory into their regions. */
  async deliver(request, held, tensors) {
    const outs = request.shmOutputs ?? [];
    const first = (request.shmInputs ?? []).length;
    for (let k = 0; k < outs.length; k++) {
      const o = outs[k];
      const done = writeRegion(held[first + k], o.offset, tensors[o.index].data, `output "${o.name}"`);
      if (done instanceof Promise) await done;
    }
  }

  /**
   * Takes back `request`'s input buffers once its run has copied them (a pool copies its
   * inputs when the run is submitted, in-process or isolated).
   */
  recycle(request) {
    for (const i of request.shmInputs) {
      const array = request.inputs[i.name];
      if (array === undefined || array.byteLength < SPARE_BYTES) continue;
      let list = this.#spares.get(array.byteLength);
      if (list === undefined) this.#spares.set(array.byteLength, (list = []));
      if (list.length < SPARES_PER_SIZE) list.push(array.buffer);
      request.inputs[i.name] = undefined;
    }
  }

  letGo(held) {
    for (const r of held) this.#release(r);
  }

  /** Closes every region's descriptor (shutdown). */
  close() {
    this.#closed = true;
    this.#spares.clear();
    for (const r of [...this.#regions.values()]) this.#closeRegion(r);
  }
}

function off() {
  return new RequestError('forbidden', 'client shared memory is off: start the server with --allow-client-shm (createServer option allowClientShm) to allow it');
}

/** Reads `target.byteLength` bytes of region `r` at `offset` into `target`; a short read is the client's truncation. */
function readRegion(r, offset, target, what) {
  const at = r.offset + offset;
  const view = new Uint8Array(target.buffer, target.byteOffset, target.byteLength);
  const short = (got) => bad(`${what}: region ${quoted(r.name)} ended after ${got} of the ${view.length} bytes at offset ${offset}: its shared memory object was truncated`);
  if (view.length < ASYNC_BYTES) {
    let got = 0;
    while (got < view.length) {
      const n = fs.readSync(r.fd, view, got, view.length - got, at + got);
      if (n === 0) throw short(got);
      got += n;
    }
    return target;
  }
  return new Promise((resolve, reject) => {
    const step = (got) => {
      if (got === view.length) return resolve(target);
      fs.read(r.fd, view, got, view.length - got, at + got, (err, n) => {
        if (err) return reject(bad(`${what}: region ${quoted(r.name)} could not be read (${err.code})`));
        if (n === 0) return reject(short(got));
        step(got + n);
      });
    };
    step(0);
  });
}

/** Writes `bytes` into region `r` at `offset`; refused when the object no longer holds that range. */
function writeRegion(r, offset, bytes, what) {
  const at = r.offset + offset;
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // A pwrite past the end would grow the client's object: it was truncated, so say so.
  const size = fs.fstatSync(r.fd).size;
  if (at + view.length > size) throw bad(`${what}: region ${quoted(r.name)} now holds ${Math.max(0, size - r.offset)} bytes, ${view.length} were to be written at offset ${offset}: its shared memory object was truncated`);
  if (view.length < ASYNC_BYTES) {
    let done = 0;
    while (done < view.length) done += fs.writeSync(r.fd, view, done, view.length - done, at + done);
    return undefined;
  }
  return new Promise((resolve, reject) => {
    const step = (done) => {
      if (done === view.length) return resolve();
      fs.write(r.fd, view, done, view.length - done, at + done, (err, n) => (err ? reject(bad(`${what}: region ${quoted(r.name)} could not be written (${err.code})`)) : step(done + n)));
    };
    step(0);
  });
}

const createRegions = (options) => new Regions(options);

module.exports = { createRegions, Regions, MAX_REGIONS, KEY };
