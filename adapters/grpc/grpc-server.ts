/**
 * A ready-to-run gRPC server for the LiveFeed port: the LiveFeed service and the standard health
 * service on one `grpc.Server`, bound to `host:port`, with a graceful `shutdown()` that reports
 * NOT_SERVING, ends every live stream with UNAVAILABLE and then stops the server (cutting whatever
 * connections are still open after `shutdownGraceMs`).
 */
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

const DEFAULTS = { port: 50051, host: '0.0.0.0', shutdownGraceMs: 5_000 };

/** Starts the LiveFeed gRPC server and answers once it listens. */
export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const settings = { ...DEFAULTS, ...options };
  if (!Number.isInteger(settings.port) || settings.port < 0 || settings.port > 65_535)
    throw new TypeError(`startGrpcServer: \`port\` must be an integer from 0 to 65535, got ${settings.port}`);
  if (!Number.isInteger(settings.shutdownGraceMs) || settings.shutdownGraceMs < 0)
    throw new TypeError(`startGrpcServer: \`shutdownGraceMs\` must be a non-negative integer, got ${settings.shutdownGraceMs}`);

  const server = new grpc.Server({ ...DEFAULT_GRPC_SERVER_OPTIONS, ...settings.serverOptions });
  const liveFeed = addLiveFeedService(server, settings);
  const health = new HealthStatus([LIVE_FEED_SERVICE_NAME], settings.healthWatch);
  addHealthService(server, health);

  const address = settings.host.includes(':') ? `[${settings.host}]:${settings.port}` : `${settings.host}:${settings.port}`;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)));
  });

  let stopped: Promise<void> | undefined;
  const shutdown = () =>
    (stopped ??= new Promise<void>((resolve) => {
      health.setAllNotServing();
      liveFeed.endAllStreams(new TrailwireError('unavailable', 'The server is shutting down.'));
      health.endWatches();
      const force = setTimeout(() => server.forceShutdown(), settings.shutdownGraceMs);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    }));

  return { server, port, liveFeed, health, shutdown };
}
