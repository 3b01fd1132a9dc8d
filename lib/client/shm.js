'use strict';

// Tensors through POSIX shared memory (Triton's system shared memory extension), for a server
// on this host: inputs are written into a region of /dev/shm (what shm_open opens on Linux)
// and outputs read from it, and a request carries only where they are. Regions are made as
// needed, registered once, reused by later runs, and always unregistered and removed: at
// close(), and their files at the latest when this process exits.

const fs = require('node:fs');

const DIR = '/dev/shm';
/** Regions are made at least this large, in powers of two, so that they serve many runs. */
const MIN_BYTES = 64 * 1024;
/** At most this many regions a client: more runs at once than that send their bytes. */
const MAX_REGIONS = 16;
/** Each tensor starts on this boundary within its region. */
const ALIGN = 64;

/** Files of regions not yet removed, by every client of this process: removed at exit. */
const files = new Set();
let exitHook = false;
function removeAtExit(file) {
  files.add(file);
  if (!exitHook) {
    exitHook = true;
    process.once('exit', () => {
      for (const f of files) {
        try {
          fs.unlinkSync(f);
        } catch {
          // Gone already.
        }
      }
    });
  }
}

let serial = 0;

class Regions {
  /** `transport`: the one server's, which registers and unregisters regions. */
  constructor(transport) {
    this.transport = transport;
    this.free = [];
    this.all = new Set();
    this.closed = false;
  }

  /**
   * A region of at least `bytes` for one run, now (its file made and sized synchronously, so
   * that inputs are written before the call returns); `region.registered` settles once the
   * server has it. Null when this client holds its most regions and none is free.
   */
  take(bytes) {
    const at = this.free.findIndex((r) => r.size >= bytes);
    if (at >= 0) return this.free.splice(at, 1)[0];
    if (this.all.size >= MAX_REGIONS || this.closed) return null;
    let size = MIN_BYTES;
    while (size < bytes) size *= 2;
    const name = `zgc-client-${process.pid}-${++serial}`;
    const file = `${DIR}/${name}`;
    const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    removeAtExit(file);
    const region = { name, key: `/${name}`, file, fd, size, registered: null };
    try {
      fs.ftruncateSync(fd, size);
    } catch (err) {
      this.#remove(region);
      throw err;
    }
    this.all.add(region);
    region.registered = this.transport.registerRegion(name, region.key, size);
    // A region the server would not take is dropped: its runs fail, the next makes another.
    region.registered.catch(() => this.drop(region));
    return region;
  }

  /** Back to the free list after its run, answered or failed. */
  give(region) {
    if (this.all.has(region) && !this.closed) this.free.push(region);
  }

  /** A region gone wrong: unregistered and removed. */
  drop(region) {
    if (!this.all.delete(region)) return;
    const i = this.free.indexOf(region);
    if (i >= 0) this.free.splice(i, 1);
    this.transport.unregisterRegion(region.name).catch(() => {});
    this.#remove(region);
  }

  #remove(region) {
    try {
      fs.closeSync(region.fd);
    } catch {
      // Closed already.
    }
    try {
      fs.unlinkSync(region.file);
    } catch {
      // Gone already.
    }
    files.delete(region.file);
  }

  /** Unregisters and removes every region. */
  async close() {
    this.closed = true;
    const all = [...this.all];
    this.all.clear();
    this.free = [];
    await Promise.all(all.map((r) => this.transport.unregisterRegion(r.name).catch(() => {})));
    for (const r of all) this.#remove(r);
  }
}

const align = (n) => Math.ceil(n / ALIGN) * ALIGN;

/**
 * Moves a request's tensors into `region`: each input's bytes written now, each output given
 * its place. `outputBytes`: each wanted output's size. Returns the outputs' places by name.
 */
function placeInRegion(request, region, outputBytes) {
  let offset = 0;
  for (const t of request.inputs) {
    fs.writeSync(region.fd, t.bytes, 0, t.bytes.byteLength, offset);
    t.shm = { region: region.name, offset, size: t.bytes.byteLength };
    t.bytes = undefined;
    offset = align(offset + t.shm.size);
  }
  const places = new Map();
  request.outputs = outputBytes.map(({ name, bytes }) => {
    const shm = { region: region.name, offset, size: bytes };
    places.set(name, shm);
    offset = align(offset + bytes);
    return { name, shm };
  });
  return places;
}

/** Bytes a request puts in a region: its inputs', then its outputs', each aligned. */
function regionBytes(request, outputBytes) {
  let n = 0;
  for (const t of request.inputs) n = align(n + t.bytes.byteLength);
  for (const o of outputBytes) n = align(n + o.bytes);
  return n;
}

/** An output's bytes, read from its place in `region`. */
function readPlace(region, place) {
  const buf = Buffer.allocUnsafeSlow(place.size);
  const n = fs.readSync(region.fd, buf, 0, place.size, place.offset);
  return n === place.size ? buf : buf.subarray(0, n);
}

module.exports = { Regions, placeInRegion, regionBytes, readPlace };
