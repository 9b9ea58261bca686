/**
 * giul-agent's connections, kept within bounds without turning away the requests that matter. A
 * connection is *busy* while a request on it is being answered, and *idle* otherwise: before its
 * first request is complete (a client that connected and sent nothing, or is sending its headers a
 * byte at a time) and between keep-alive requests. Idle connections are the ones given up:
 *
 * - At most `maxConnections` are open. A new one beyond that takes the place of the connection
 *   idle the longest; only when every connection is busy is the new one refused.
 * - At most `maxPerAddress` come from one address. A new one beyond that takes the place of that
 *   address's connection idle the longest (or is refused when they are all busy), so one client
 *   cannot crowd out the others.
 * - Under pressure (more than half of `maxConnections` open) a connection idle for
 *   `pressureIdleMs` is closed, not after the seconds of the header and keep-alive timeouts.
 *
 * So thousands of idle or slow sockets cost the agent nothing but their churn, and a probe of
 * `/power` is answered among them.
 */
import type { Server } from "node:http";
import type { Socket } from "node:net";

export interface ConnectionLimits {
  readonly maxConnections: number;
  readonly maxPerAddress: number;
  readonly pressureIdleMs: number;
}

/** What the guard did, for diagnostics and tests. */
export interface ConnectionCounts {
  /** Connections open now, and busy among them. */
  open: number;
  busy: number;
  admitted: number;
  /** Idle connections closed to make room for a new one. */
  evicted: number;
  /** Idle connections closed under pressure for being idle too long. */
  reclaimed: number;
  /** New connections refused: every connection they could replace was busy. */
  refused: number;
}

interface Connection {
  readonly socket: Socket;
  readonly address: string;
  /** Requests being answered on it. */
  busy: number;
  /** performance.now() since when it has been idle. */
  idleSince: number;
}

/** How often idle connections are looked at under pressure (ms). */
const SWEEP_MS = 50;
/**
 * Idle connections closed at most per look: closing hundreds at once would hold the event loop
 * for tens of ms, the delay this is meant to spare the requests that matter (≤ 640 a second).
 */
const RECLAIM_PER_SWEEP = 32;

export class ConnectionGuard {
  private readonly connections = new Map<Socket, Connection>();
  private readonly perAddress = new Map<string, number>();
  private sweepTimer: NodeJS.Timeout | null = null;
  private readonly counts: ConnectionCounts = {
    open: 0,
    busy: 0,
    admitted: 0,
    evicted: 0,
    reclaimed: 0,
    refused: 0,
  };

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A new connection: kept (possibly in the place of an idle one), or refused and destroyed. */
  admit(socket: Socket): boolean {
    const address = socket.remoteAddress ?? "";
    const fromAddress = this.perAddress.get(address) ?? 0;
    if (
      (fromAddress >= this.limits.maxPerAddress && !this.evictIdlest(address)) ||
      (this.connections.size >= this.limits.maxConnections && !this.evictIdlest(null))
    ) {
      this.counts.refused += 1;
      socket.destroy();
      return false;
    }
    this.connections.set(socket, { socket, address, busy: 0, idleSince: this.now() });
    this.perAddress.set(address, (this.perAddress.get(address) ?? 0) + 1);
    this.counts.admitted += 1;
    socket.once("close", () => this.forget(socket));
    if (this.sweepTimer === null && this.underPressure()) {
      this.sweepTimer = setInterval(() => this.sweep(), SWEEP_MS);
      this.sweepTimer.unref();
    }
    return true;
  }

  /** A request on the socket is being answered. */
  busy(socket: Socket): void {
    const c = this.connections.get(socket);
    if (c !== undefined) c.busy += 1;
  }

  /** A request on the socket has been answered (or abandoned). */
  idle(socket: Socket): void {
    const c = this.connections.get(socket);
    if (c === undefined) return;
    c.busy = Math.max(0, c.busy - 1);
    if (c.busy === 0) c.idleSince = this.now();
  }

  snapshot(): ConnectionCounts {
    let busy = 0;
    for (const c of this.connections.values()) if (c.busy > 0) busy += 1;
    return { ...this.counts, open: this.connections.size, busy };
  }

  /** Stops looking at idle connections (the server is closing). */
  stop(): void {
    if (this.sweepTimer !== null) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
  }

  private underPressure(): boolean {
    return this.connections.size > this.limits.maxConnections / 2;
  }

  /** Closes the connection idle the longest (of `address`, or of any); false when all are busy. */
  private evictIdlest(address: string | null): boolean {
    let idlest: Connection | null = null;
    for (const c of this.connections.values()) {
      if (c.busy > 0 || (address !== null && c.address !== address)) continue;
      if (idlest === null || c.idleSince < idlest.idleSince) idlest = c;
    }
    if (idlest === null) return false;
    this.counts.evicted += 1;
    this.forget(idlest.socket);
    idlest.socket.destroy();
    return true;
  }

  private sweep(): void {
    if (!this.underPressure()) {
      this.stop();
      return;
    }
    const before = this.now() - this.limits.pressureIdleMs;
    const idle: Connection[] = [];
    // Oldest connections first (the map keeps the order they came in).
    for (const c of this.connections.values()) {
      if (c.busy > 0 || c.idleSince > before) continue;
      idle.push(c);
      if (idle.length >= RECLAIM_PER_SWEEP) break;
    }
    for (const c of idle) {
      this.counts.reclaimed += 1;
      this.forget(c.socket);
      c.socket.destroy();
    }
  }

  private forget(socket: Socket): void {
    const c = this.connections.get(socket);
    if (c === undefined) return;
    this.connections.delete(socket);
    const left = (this.perAddress.get(c.address) ?? 1) - 1;
    if (left <= 0) this.perAddress.delete(c.address);
    else this.perAddress.set(c.address, left);
  }
}

/**
 * Malformed requests, oversized heads and slow ones get a status and a closed connection (giul-agent
 * and giul-proxy alike); a connection already gone is destroyed.
 */
export function answerClientErrors(server: Server): void {
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable || error.code === "ECONNRESET") {
      socket.destroy();
      return;
    }
    const status =
      error.code === "HPE_HEADER_OVERFLOW"
        ? "431 Request Header Fields Too Large"
        : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? "408 Request Timeout"
          : "400 Bad Request";
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
    socket.destroySoon();
  });
}
