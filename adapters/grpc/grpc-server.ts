/**
 * A ready-to-run gRPC server for the LiveFeed port: the LiveFeed service and the standard health
 * service on one `grpc.Server`, bound to `host:port`, with a graceful `shutdown()` that reports
 * NOT_SERVING, ends every live stream with UNAVAILABLE and then stops the server (cutting whatever
 * connections are still open after `shutdownGraceMs`).
 *
 * The server listens on a TCP listener of its own (`net.Server`) and hands each connection to
 * grpc-js (its connection injector), so that whoever composes it can cap the port's connections as
 * the HTTP server's are (`prepareListener`; issue 37: grpc-js has no per-address cap). A stream that
 * does not send its request within `requestTimeoutMs` is ended, since grpc-js runs no handler — and
 * no cap or auth check — before a server-streaming call's request has arrived whole.
 */
import { once } from 'node:events';
import { constants as http2Constants } from 'node:http2';
import { createServer, type Server as NetServer } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { TrailwireError } from '../../core/errors.ts';
import { addHealthService, HealthStatus, type HealthWatchLimits } from './health-service.ts';
import { addLiveFeedService, type LiveFeedService, type LiveFeedServiceOptions } from './live-feed-service.ts';

export interface GrpcServerOptions extends LiveFeedServiceOptions {
  /** The port to listen on; 0 picks a free one (see `RunningGrpcServer.port`). Default 50051. */
  port?: number;
  /** The address to bind. Default `0.0.0.0`. */
  host?: string;
  /** How long `shutdown()` lets streams finish before closing connections. Default 5,000 ms. */
  shutdownGraceMs?: number;
  /** Caps on the health service's `Watch` streams. Default: `DEFAULT_HEALTH_WATCH_LIMITS` (100 in total, 2 per connection). */
  healthWatch?: HealthWatchLimits;
  /**
   * Options for the underlying `grpc.Server`, spread over `DEFAULT_GRPC_SERVER_OPTIONS` below (an
   * option given here wins). Default: those.
   */
  serverOptions?: grpc.ServerOptions;
  /**
   * How long a stream may take to send its request (the client's half-close), in ms; then it ends
   * with DEADLINE_EXCEEDED. Until then no handler runs, so neither the per-customer stream cap nor
   * the token check holds such a stream: this bounds what streams that never half-close cost.
   * Default 10,000.
   */
  requestTimeoutMs?: number;
  /**
   * Called with the port's TCP listener before it listens, to cap its connections (the server
   * composition applies `capConnections`, as on the HTTP port). Default: none.
   */
  prepareListener?: (listener: NetServer) => void;
}

/**
 * The connection limits the LiveFeed server sets deliberately (docs/operations.md, "LiveFeed
 * connections", says why each value): grpc-js's own defaults let one connection open any number of
 * streams, never probe a silent peer, and keep an idle connection forever.
 */
const DEFAULT_GRPC_SERVER_OPTIONS: grpc.ServerOptions = {
  // Streams one HTTP/2 connection may carry: the per-customer cap's default, so a single connection
  // cannot hold more streams than a customer may.
  'grpc.max_concurrent_streams': 100,
  // Ping a connection after 2 minutes without traffic and drop it when no answer comes in 20 s: a
  // peer gone without a FIN (NAT timeout, crashed host) then frees its streams and its cap slots.
  'grpc.keepalive_time_ms': 120_000,
  'grpc.keepalive_timeout_ms': 20_000,
  // A connection with no stream for 5 minutes is closed: a LiveFeed client always holds a stream.
  'grpc.max_connection_idle_ms': 300_000,
};

export interface RunningGrpcServer {
  server: grpc.Server;
  /** The port actually bound. */
  port: number;
  liveFeed: LiveFeedService;
  health: HealthStatus;
  /** Ends every stream with UNAVAILABLE and stops the server. Idempotent. */
  shutdown(): Promise<void>;
}

/** The service name the health service reports for the LiveFeed. */
export const LIVE_FEED_SERVICE_NAME = 'livefeed.v1.LiveFeed';

const DEFAULTS = { port: 50051, host: '0.0.0.0', shutdownGraceMs: 5_000, requestTimeoutMs: 10_000 };

/** Starts the LiveFeed gRPC server and answers once it listens. */
export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const settings = { ...DEFAULTS, ...options };
  if (!Number.isInteger(settings.port) || settings.port < 0 || settings.port > 65_535)
    throw new TypeError(`startGrpcServer: \`port\` must be an integer from 0 to 65535, got ${settings.port}`);
  if (!Number.isInteger(settings.shutdownGraceMs) || settings.shutdownGraceMs < 0)
    throw new TypeError(`startGrpcServer: \`shutdownGraceMs\` must be a non-negative integer, got ${settings.shutdownGraceMs}`);
  if (!Number.isInteger(settings.requestTimeoutMs) || settings.requestTimeoutMs < 1)
    throw new TypeError(`startGrpcServer: \`requestTimeoutMs\` must be a positive integer, got ${settings.requestTimeoutMs}`);

  const server = new grpc.Server({
    ...DEFAULT_GRPC_SERVER_OPTIONS,
    ...settings.serverOptions,
    interceptors: [requestDeadline(settings.requestTimeoutMs), ...(settings.serverOptions?.interceptors ?? [])],
  });
  const liveFeed = addLiveFeedService(server, settings);
  const health = new HealthStatus([LIVE_FEED_SERVICE_NAME], settings.healthWatch);
  addHealthService(server, health);

  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const listener = createServer();
  settings.prepareListener?.(listener);
  // After the composition's listeners: a connection a cap refused is closed already.
  listener.on('connection', (socket) => {
    if (!socket.destroyed) injector.injectConnection(socket);
  });
  listener.listen(settings.port, settings.host);
  await Promise.race([once(listener, 'listening'), once(listener, 'error').then(([error]) => Promise.reject(error))]);
  const port = (listener.address() as { port: number }).port;

  let stopped: Promise<void> | undefined;
  const shutdown = () =>
    (stopped ??= new Promise<void>((resolve) => {
      health.setAllNotServing();
      liveFeed.endAllStreams(new TrailwireError('unavailable', 'The server is shutting down.'));
      health.endWatches();
      listener.close();
      injector.drain(settings.shutdownGraceMs);
      const force = setTimeout(() => {
        injector.destroy();
        server.forceShutdown();
      }, settings.shutdownGraceMs);
      server.tryShutdown(() => {
        clearTimeout(force);
        injector.destroy();
        resolve();
      });
    }));

  return { server, port, liveFeed, health, shutdown };
}

/**
 * Resets the HTTP/2 stream under a call (RST_STREAM CANCEL). grpc-js offers no public way to: its
 * call keeps the stream in a field of its own, used here when present; without it (another grpc-js
 * version) the call is answered but its stream waits for the client, and the test that watches the
 * client's stream close fails.
 */
function resetStream(call: grpc.ServerInterceptingCallInterface): void {
  const stream = (call as unknown as { stream?: { close?: (code: number) => void } }).stream;
  stream?.close?.(http2Constants.NGHTTP2_CANCEL);
}

/**
 * Ends a call whose request has not arrived whole (the client's half-close) within `timeoutMs`,
 * with DEADLINE_EXCEEDED, and resets its HTTP/2 stream: such a call holds a stream and its buffers,
 * yet no handler has run. The status alone is not enough: the stream stays open for the client's
 * half until the client ends it, and an answered stream costs more than a waiting one (10,000 of
 * them: server heap 63.6 MB waiting, 70.5 MB answered, 21.1 MB answered and reset; base 19.5 MB).
 */
function requestDeadline(timeoutMs: number): grpc.ServerInterceptor {
  return (_method, call) => {
    let timer: NodeJS.Timeout | undefined;
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        timer = setTimeout(() => {
          call.sendStatus({ code: grpc.status.DEADLINE_EXCEEDED, details: `The request did not arrive within ${timeoutMs} ms.` });
          resetStream(call);
        }, timeoutMs);
        timer.unref();
        next(
          new grpc.ServerListenerBuilder()
            .withOnReceiveHalfClose((halfClose) => {
              clearTimeout(timer);
              halfClose();
            })
            .withOnCancel(() => clearTimeout(timer))
            .build(),
        );
      },
      sendStatus(status, next) {
        clearTimeout(timer);
        next(status);
      },
    });
  };
}
