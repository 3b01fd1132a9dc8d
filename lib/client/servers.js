'use strict';

// The servers a client spreads its requests over: each request to the one with the fewest
// outstanding (ties in turn), away from those that refused a connection, reset one, or
// answered 503: left out for their Retry-After (else `retryAfterMs`), then asked whether they
// are ready before they take requests again. A request goes again to the
// next server only when it cannot have run (a refused connection, a 503), or when it may run
// twice (idempotent: a plain infer, metadata; never a sequence's step).

const { ZgcError } = require('../errors');

const RETRY_AFTER_MS = 1000;

class Servers {
  constructor(list, options) {
    this.list = list.map((s) => ({ ...s, outstanding: 0, requests: 0, failures: 0, failovers: 0, down: false, probe: null }));
    this.retryAfterMs = options.retryAfterMs ?? RETRY_AFTER_MS;
    this.turn = 0;
    this.closed = false;
  }

  /**
   * Leaves `server` out: after `ms`, asks it whether it is ready, and takes it back when it is
   * (else asks again `ms` later). A lone server is never left out: there is no other.
   */
  leaveOut(server, ms) {
    if (this.closed || this.list.length === 1) return;
    server.down = true;
    if (server.probe !== null) return;
    const check = () => {
      if (this.closed) return;
      server.transport.ready().then(
        (ready) => {
          server.probe = null;
          if (ready) server.down = false;
          else this.leaveOut(server, ms);
        },
        () => {
          server.probe = null;
          this.leaveOut(server, ms);
        },
      );
    };
    server.probe = setTimeout(check, ms);
    server.probe.unref();
  }

  /** A request's bytes, written once for whichever server sends it. */
  prepare(name, version, request) {
    return this.list[0].transport.prepare(name, version, request);
  }

  /** The server to send to: fewest outstanding among those not tried and not left out (else among those left out). */
  pick(tried) {
    let best = null;
    const n = this.list.length;
    for (const down of [false, true]) {
      for (let k = 0; k < n; k++) {
        const s = this.list[(this.turn + k) % n];
        if (tried.has(s) || s.down !== down) continue;
        if (best === null || s.outstanding < best.outstanding) best = s;
      }
      if (best !== null) break;
    }
    this.turn = (this.turn + 1) % n;
    return best;
  }

  /**
   * `f(transport)` on a server: resolves `{ server, response }`. `pin`: that server only.
   * `all`: on every server (model control), resolving the first's.
   */
  async call(f, { idempotent, pin, all, signal } = {}) {
    if (all && this.list.length > 1) {
      const results = await Promise.all(this.list.map((s) => this.#on(s, f)));
      return results[0];
    }
    if (pin !== undefined) return this.#on(pin, f);
    const tried = new Set();
    for (;;) {
      const server = this.pick(tried);
      tried.add(server);
      try {
        return await this.#on(server, f);
      } catch (err) {
        const again = this.#mayRetry(err, idempotent) && tried.size < this.list.length && !(signal && signal.aborted);
        if (!again) throw err;
        server.failovers++;
      }
    }
  }

  async #on(server, f) {
    server.outstanding++;
    server.requests++;
    try {
      return { server, response: await f(server.transport) };
    } catch (err) {
      if (err instanceof ZgcError) {
        server.failures++;
        if (err.code === 'ERR_ZGC_CONNECTION' || err.code === 'ERR_ZGC_REMOTE_UNAVAILABLE') this.leaveOut(server, err.retryAfterMs ?? this.retryAfterMs);
      }
      throw err;
    } finally {
      server.outstanding--;
    }
  }

  /** Whether a request that failed with `err` may go to another server. */
  #mayRetry(err, idempotent) {
    if (!(err instanceof ZgcError)) return false;
    if (err.code === 'ERR_ZGC_CONNECTION') return !err.sent || idempotent;
    // The server did not run it: a full queue, a server shutting down.
    return err.code === 'ERR_ZGC_REMOTE_UNAVAILABLE';
  }

  stats() {
    return this.list.map((s) => ({ url: s.url, requests: s.requests, outstanding: s.outstanding, failures: s.failures, failovers: s.failovers, available: !s.down }));
  }

  close() {
    this.closed = true;
    for (const s of this.list) {
      clearTimeout(s.probe);
      s.transport.close();
    }
  }
}

module.exports = { Servers };
