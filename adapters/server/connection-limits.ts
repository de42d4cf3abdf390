/**
 * Caps on the HTTP server's connections and a deadline for delivering an answer (issue 29, finding
 * 8: 1,000 connections reading their answers a byte at a time stayed open 60 s, and nothing capped
 * connections in total or per address). Node's own timeouts bound how long a client may take to
 * *send* a request (`headersTimeout`, `requestTimeout`); nothing bounds how long it may take to
 * *read* the answer, since a slow reader keeps the socket busy and never idle. So:
 *
 * - `maxConnections`: connections open at once; the next is closed as it arrives (Node's
 *   `server.maxConnections`, which drops it before any byte is read).
 * - `maxConnectionsPerAddress`: the same per peer address, so one host cannot take them all. A
 *   reverse proxy is one address for all its clients: `exempt` (the trusted proxies) skips it.
 * - `sendTimeoutMs`: once the server has ended an answer, the client has this long to take it;
 *   then the connection is destroyed. Event streams never end their answer and are not concerned
 *   (they have their own slow-subscriber rule, contract 8).
 *
 * The two caps hold any TCP listener (`capConnections`): the gRPC port gets them too (issue 37).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import type { Logger } from 'pino';
import { trustedProxyList } from '../koa/index.ts';

export interface ConnectionCapOptions {
  /** Connections open at once; 0: no cap. Default 10,000. */
  maxConnections?: number;
  /** Connections open at once from one peer address; 0: no cap. Default 512. */
  maxConnectionsPerAddress?: number;
  /** Peers the per-address cap does not apply to (the reverse proxies). Default: none. */
  exempt?: (address: string) => boolean;
  /** Where a refused connection is said (a warning at most once a minute). Default: nowhere. */
  logger?: Logger;
}

export interface ConnectionLimitOptions extends ConnectionCapOptions {
  /** How long a client may take to read an answer the server has ended, in ms. Default 20,000. */
  sendTimeoutMs?: number;
}

export const DEFAULT_CONNECTION_LIMITS = { maxConnections: 10_000, maxConnectionsPerAddress: 512, sendTimeoutMs: 20_000 } as const;

/** At most one warning about refused connections per this many ms. */
const REFUSAL_WARNING_INTERVAL_MS = 60_000;

export interface ConnectionLimits {
  /** Connections open now per address, answers waiting to be read, and connections refused so far. */
  readonly counts: { addresses: number; sending: number; refused: number };
  /** Stops the deadline sweep (the server is closing). */
  stop(): void;
}

/** Applies the caps and the send deadline to `server`; call before it accepts connections. */
export function limitConnections(server: Server, options: ConnectionLimitOptions = {}): ConnectionLimits {
  const settings = { ...DEFAULT_CONNECTION_LIMITS, ...options };
  checkWholeNumbers('limitConnections', settings, ['maxConnections', 'maxConnectionsPerAddress', 'sendTimeoutMs']);
  const caps = capConnections(server, settings);

  // The answers of each connection not yet taken by the client, oldest first, and when the oldest
  // ended answer was first seen unsent: a sweep over the connections rather than a timer (or a table
  // entry) per answer. Keyed by the connection (`req.socket`, always set), which lives across its
  // requests: a table of every answer in flight, one insert and one delete per request, made V8
  // promote every request's objects to the old generation (4 MB a scavenge at 15,000 requests/s:
  // `npm run bench -- intake`). A list, not one answer: a client may pipeline requests, and an
  // answer queued behind an unfinished one has no socket yet (`res.socket` is null until node:http
  // hands it the connection); the connection's list is one array reused for its whole life.
  const answersOf = new WeakMap<Socket, ServerResponse[]>();
  const endedAt = new WeakMap<ServerResponse, number>();
  const connections = new Set<Socket>();
  let sweep: NodeJS.Timeout | undefined;
  if (settings.sendTimeoutMs > 0) {
    server.on('connection', (socket: Socket) => {
      connections.add(socket);
      answersOf.set(socket, []);
      socket.once('close', () => connections.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const answers = answersOf.get(req.socket);
      if (answers === undefined) return; // a connection handed to the server by its owner (`server.emit('connection')` before this listener)
      dropTaken(answers);
      answers.push(res);
    });
    const every = Math.min(1000, Math.max(10, Math.floor(settings.sendTimeoutMs / 4)));
    sweep = setInterval(() => {
      const now = Date.now();
      for (const socket of connections) {
        const res = oldestUnsent(answersOf.get(socket));
        if (res === undefined) continue;
        const since = endedAt.get(res);
        if (since === undefined) endedAt.set(res, now);
        // The connection, not the answer: the answers pipelined behind this one go with it.
        else if (now - since >= settings.sendTimeoutMs) socket.destroy();
      }
    }, every).unref();
  }
  return {
    get counts() {
      let sending = 0;
      for (const socket of connections) if (oldestUnsent(answersOf.get(socket)) !== undefined) sending++;
      return { ...caps.counts, sending };
    },
    stop() {
      clearInterval(sweep);
    },
  };
}

/**
 * Caps `server`'s connections open at once, in total and per peer address (an over-cap connection is
 * closed as it arrives); any TCP listener: the HTTP server, the gRPC port's. Call before it listens.
 */
export function capConnections(server: NetServer, options: ConnectionCapOptions = {}): { readonly counts: { addresses: number; refused: number } } {
  const settings = { ...DEFAULT_CONNECTION_LIMITS, ...options };
  checkWholeNumbers('capConnections', settings, ['maxConnections', 'maxConnectionsPerAddress']);
  if (settings.maxConnections > 0) server.maxConnections = settings.maxConnections;
  const perAddress = new Map<string, number>();
  let refused = 0;
  let warnedAt = -Infinity;
  const refuse = (socket: Socket, address: string) => {
    refused++;
    socket.destroy();
    const now = Date.now();
    if (now - warnedAt < REFUSAL_WARNING_INTERVAL_MS) return;
    warnedAt = now;
    settings.logger?.warn({ clientAddress: address, limit: settings.maxConnectionsPerAddress, refused }, 'connections refused: too many open from one address');
  };
  server.on('drop', () => {
    refused++;
  });
  if (settings.maxConnectionsPerAddress > 0)
    server.on('connection', (socket: Socket) => {
      const address = socket.remoteAddress ?? '';
      if (settings.exempt?.(address)) return;
      const open = (perAddress.get(address) ?? 0) + 1;
      if (open > settings.maxConnectionsPerAddress) return refuse(socket, address);
      perAddress.set(address, open);
      socket.once('close', () => {
        const left = (perAddress.get(address) ?? 1) - 1;
        if (left > 0) perAddress.set(address, left);
        else perAddress.delete(address);
      });
    });
  return {
    get counts() {
      return { addresses: perAddress.size, refused };
    },
  };
}

function checkWholeNumbers<T extends object>(owner: string, settings: T, names: readonly (keyof T & string)[]): void {
  for (const name of names)
    if (!Number.isSafeInteger(settings[name]) || (settings[name] as number) < 0)
      throw new TypeError(`${owner}: \`${name}\` must be a whole number >= 0, got ${String(settings[name])}`);
}

/** Forgets the answers at the head of a connection's list that are done with (taken or destroyed). */
function dropTaken(answers: ServerResponse[]): void {
  let taken = 0;
  while (taken < answers.length && (answers[taken]!.writableFinished || answers[taken]!.destroyed)) taken++;
  if (taken > 0) answers.splice(0, taken);
}

/**
 * The connection's answer the server has ended and the client has not taken in full yet, if any:
 * the oldest answer not done with (the ones behind it cannot go out before it).
 */
function oldestUnsent(answers: ServerResponse[] | undefined): ServerResponse | undefined {
  if (answers === undefined) return undefined;
  dropTaken(answers);
  const oldest = answers[0];
  return oldest !== undefined && oldest.writableEnded ? oldest : undefined;
}

/**
 * The peers the per-address cap skips, from the proxy settings: the listed proxies; with
 * `trustProxy` alone every peer is taken for a proxy (the cap would count the proxy, not its
 * clients); none otherwise.
 */
export function proxyExemption(options: { trustProxy?: boolean; trustedProxies?: readonly string[] }): ((address: string) => boolean) | undefined {
  if (options.trustedProxies && options.trustedProxies.length > 0) {
    const list = trustedProxyList(options.trustedProxies);
    return (address) => {
      const plain = address.startsWith('::ffff:') && !address.slice(7).includes(':') ? address.slice(7) : address;
      return list.check(plain, plain.includes(':') ? 'ipv6' : 'ipv4');
    };
  }
  return options.trustProxy ? () => true : undefined;
}
