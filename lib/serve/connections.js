'use strict';

// The connection limit (--max-connections), HTTP and gRPC together, and which connection makes
// way for a new one when it is reached.

const FULL = Buffer.from('HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 59\r\n\r\n{"error":"the server has too many connections: try again"}\n');

/** How long one ranking of the connections serves. */
const RANK_MS = 100;

const kState = Symbol('zgc connection');

/**
 * At most `max` connections, HTTP and gRPC together. When full, a new connection takes the
 * place of the HTTP connection idle longest between keep-alive requests, or else of the one
 * that has received nothing for longest while it still owes bytes (no complete request yet:
 * silent, slow, or a body stalled); only when every connection is handshaken gRPC or has a
 * whole request being answered is it refused (HTTP: a 503). So a flood of connections that
 * send nothing, or stop sending, displaces itself, never clients with something to ask.
 */
class ConnectionLimit {
  // Per connection: its request and response now, and when bytes last came (`heard`). Nothing
  // is done per chunk: bytes are noticed from socket.bytesRead when a place is needed, so that
  // a request pays two property writes for all this.
  #open = new Set();
  // Only the order of events matters: a counter, cheaper than a clock.
  #tick = 0;
  // The ranking is kept for a moment: under a flood of connections, one scan serves many
  // arrivals instead of one scan each (which took the event loop ~1 s for 2,000 at once).
  // Stryker disable next-line ArrayDeclaration: rankedAt 0 ranks at the first pick whatever this holds
  #queue = [];
  #next = 0;
  #rankedAt = 0;

  constructor(max, metrics) {
    this.max = max;
    this.metrics = metrics;
  }

  get size() {
    return this.#open.size;
  }

  #evictable(socket) {
    const st = socket[kState];
    return this.#open.has(socket) && !st.handshaken && (st.req === null || !st.req.complete || st.res.writableFinished);
  }

  /** Every connection that may go, in the order they go: idle ones, then those owing bytes, each heard from longest ago first. */
  #rank() {
    const now = ++this.#tick;
    const idle = [];
    const owing = [];
    for (const socket of this.#open) {
      const st = socket[kState];
      // Stryker disable next-line ConditionalExpression: only saves work, evictable() refuses them
      if (st.handshaken) continue;
      const read = socket.bytesRead;
      if (read !== st.bytes) {
        st.bytes = read;
        st.heard = now;
      }
      if (st.req !== null && st.req.complete) {
        // Stryker disable next-line ConditionalExpression: only saves work, evictable() refuses one still answering
        if (st.res.writableFinished) idle.push(socket);
      } else {
        owing.push(socket);
      }
    }
    const byHeard = (x, y) => x[kState].heard - y[kState].heard;
    return idle.sort(byHeard).concat(owing.sort(byHeard));
  }

  /** The connection to close for a new one, or null when none may go. */
  #pick() {
    const now = Date.now();
    let fresh = false;
    const rankNow = () => {
      this.#queue = this.#rank();
      this.#next = 0;
      this.#rankedAt = now;
      fresh = true;
    };
    // Stryker disable next-line ConditionalExpression,EqualityOperator,ArithmeticOperator: ranking more often only costs time
    if (this.#next >= this.#queue.length || now - this.#rankedAt > RANK_MS) rankNow();
    for (;;) {
      while (this.#next < this.#queue.length) {
        const socket = this.#queue[this.#next++];
        if (this.#evictable(socket)) return socket;
      }
      // Nothing left in a kept ranking (its connections closed or got busy since): connections
      // that came after it may go, so rank again before refusing.
      if (fresh) return null;
      rankNow();
    }
  }

  /** Whether `socket` may stay open; counts it until it closes. */
  admit(socket) {
    if (this.#open.size >= this.max) {
      const victim = this.#pick();
      if (victim === null) {
        this.metrics.refuseConnection();
        return false;
      }
      this.#open.delete(victim);
      victim.destroy();
    }
    this.#open.add(socket);
    socket[kState] = { req: null, res: null, bytes: 0, heard: ++this.#tick, handshaken: false };
    socket.once('close', () => this.#open.delete(socket));
    return true;
  }

  /** An HTTP request began on `socket`: heard from now. */
  request(socket, req, res) {
    const st = socket[kState];
    if (st === undefined) return;
    st.req = req;
    st.res = res;
    st.bytes = socket.bytesRead;
    st.heard = ++this.#tick;
  }

  /** A gRPC connection completed its HTTP/2 handshake: never displaced (its idle timeout closes it). */
  handshaken(socket) {
    const st = socket[kState];
    if (st !== undefined) st.handshaken = true;
  }
}

const connectionLimit = (max, metrics) => new ConnectionLimit(max, metrics);

function limitConnections(server, limit) {
  // Before node:http's own listener, so that a refused connection is never parsed.
  server.prependListener('connection', (socket) => {
    if (limit.admit(socket)) return;
    socket.end(FULL);
    // A client that never reads must not keep it.
    socket.setTimeout(1000, () => socket.destroy());
  });
}

module.exports = { connectionLimit, limitConnections };
