/**
 * The standalone Trailwire server: opens the backend the options name (`backends.ts`: a table keyed
 * by URL scheme, each backend through its adapter's front door), assembles the core, serves the Koa
 * app on one HTTP port and the gRPC LiveFeed on another, and processes intake — with SQLite in the
 * backend's processing thread, its live updates published on this process's hub; otherwise with the
 * core's worker. This is what `trailwire serve` runs and what `examples/standalone` embeds; an
 * integrator with a server of their own mounts the adapters instead. It imports other adapters only
 * through their `index.ts`.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { pino, type Logger } from 'pino';
import type { AccessLogLevel } from '../../core/audit.ts';
import { TrailwireError } from '../../core/errors.ts';
import { isProcessable } from '../../core/intake-queue.ts';
import { failedAttemptLine, ROUND_FAILED_MESSAGE } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import { RepeatingFaultLog } from '../../core/repeating-fault-log.ts';
import { createTrailwire, type Trailwire, type TrailwireOptions } from '../../core/trailwire.ts';
import { createLiveEventsRoute, createTrailwireHandler, type LiveEventsRoute } from '../koa/index.ts';
import { type HealthWatchLimits, type RunningGrpcServer, startGrpcServer } from '../grpc/index.ts';
import { readableByOthers, type SqliteDurability } from '../sqlite/index.ts';
import { openStoreBackend, redactUrl, type StoreBackend } from './backends.ts';
import { openSharedState } from './shared-state.ts';
import { DEFAULT_STARTUP_TIMEOUT_MS, openWhenReachable } from './dependency-wait.ts';
import { Registry } from 'prom-client';
import { registerDependencyMetrics } from '../koa/index.ts';
import { capConnections, type ConnectionLimitOptions, type ConnectionLimits, limitConnections, proxyExemption } from './connection-limits.ts';
import { type MetricsListener, type MetricsListenerOptions, startMetricsListener } from './metrics-listener.ts';
import { builtInProducts } from '../../products/index.ts';
import { loadProductModule } from '../../core/products.ts';

/** Options of `startServer`; every field is optional, with the default it names. */
export interface ServerOptions {
  /** The SQLite file of the embedded store (without `databaseUrl`). Default `./data/trailwire.db`. */
  db?: string;
  /** SQLite durability: `process` survives kill -9, `power` also power loss. Default `process`. */
  durability?: SqliteDurability;
  /**
   * A `postgres://` URL: the store and the durable intake queue live there, shared by every process
   * given the same URL (contract 11). Default: none (the SQLite file).
   */
  databaseUrl?: string;
  /** The PostgreSQL schema of Trailwire's tables. Default `public`. */
  databaseSchema?: string;
  /**
   * A `nats://` URL: the intake log lives in NATS JetStream (stream `TRAILWIRE_INTAKE`, created when
   * missing, checked when present), processing partitioned by VIN across every process given the
   * same URL; needs `databaseUrl` (PostgreSQL keeps the log's index and the store). Default: none.
   */
  intakeLog?: string;
  /**
   * A `redis://` URL: limits, live updates and key rotations shared by every process given the same
   * URL. Needed as soon as more than one process serves the same fleet. Default: none (in-process).
   */
  redisUrl?: string;
  /**
   * With `redisUrl`: starts every Redis key and channel of this deployment (`<prefix>window:...`,
   * `<prefix>live`, `<prefix>rotations`), so that deployments or test runs can share one Redis.
   * Every process of one deployment must use the same. Default `'trailwire:'`.
   */
  redisKeyPrefix?: string;
  /**
   * How long to wait at start for PostgreSQL and Redis when they cannot be reached (retrying every
   * second), before failing with the reason. Default 60,000 ms.
   */
  startupTimeoutMs?: number;
  /** Interface to listen on. Default: all interfaces. */
  host?: string;
  /** HTTP port; 0 picks a free one. Default 8080. */
  port?: number;
  /** gRPC (LiveFeed) port; 0 picks a free one. Default 50051. */
  grpcPort?: number;
  /** Heartbeat interval of the LiveFeed and of `GET /api/v1/live`. Default 15,000 ms. */
  heartbeatIntervalMs?: number;
  /**
   * Live streams one customer may hold in this process, LiveFeed and `GET /api/v1/live` together; the
   * next is refused (gRPC RESOURCE_EXHAUSTED, HTTP 429). Default 100.
   */
  maxStreamsPerCustomer?: number;
  /**
   * Run the intake worker in this process. Default true; false makes a process that only takes
   * intake while others (sharing the store) process it.
   */
  intakeWorker?: boolean;
  /**
   * Process intake in a worker thread with its own connection (`adapters/sqlite/intake-thread.ts`),
   * so that processing never takes turns with requests. Default true; it applies with the built-in
   * products and `productModules` and the system clock (products given as objects in `core.products`,
   * or an injected clock, keep processing on the event loop).
   */
  intakeThread?: boolean;
  /** Product modules installed besides the built-in products (`loadProductModule` specifiers, relative to the working directory). */
  productModules?: readonly string[];
  /**
   * A PEM file holding the JWT signing private key (RSA: RS256, EC P-256: ES256), e.g. a mounted
   * secret: it signs, and the store keeps only its public key. Default: none (a key generated once
   * and kept in the store). See "Keys and secrets" in docs/operations.md.
   */
  signingKeyFile?: string;
  /** The level of the access-log lines (one per HTTP request, two per LiveFeed stream). Default `info`. */
  accessLogLevel?: AccessLogLevel;
  /**
   * Caps on the unauthenticated `grpc.health.v1.Health/Watch` streams of the gRPC port: in total and
   * per connection (`{ maxWatches, maxWatchesPerConnection }`; 0 refuses every Watch). Default 100 and 2.
   */
  healthWatch?: HealthWatchLimits;
  /**
   * Caps on the HTTP port's connections (and, counted apart, the gRPC port's), in total and per peer address (a trusted proxy is exempt
   * from the latter), and how long a client may take to read an answer; `connection-limits.ts`.
   * Default 10,000, 512 and 20,000 ms.
   */
  connectionLimits?: Pick<ConnectionLimitOptions, 'maxConnections' | 'maxConnectionsPerAddress' | 'sendTimeoutMs'>;
  /**
   * Serve `GET /metrics` on a listener of its own (`{ port, host }`, host default `127.0.0.1`) instead
   * of the public HTTP port. Default: none (on the HTTP port, as the contract's ops endpoints).
   */
  metrics?: MetricsListenerOptions;
  /** The peer is a reverse proxy: the client address is the right-most X-Forwarded-For entry. Default false. */
  trustProxy?: boolean;
  /** Reverse proxies to trust (addresses, CIDR ranges): the client is the right-most X-Forwarded-For entry not among them. Default: none. */
  trustedProxies?: readonly string[];
  /** Largest intake body in bytes; a larger one is refused 413. Default 262,144 (256 KiB). */
  intakeBodyLimitBytes?: number;
  /** Origins whose pages may call authenticate, the read API and the event stream from a browser (CORS). Default: none. */
  corsOrigins?: readonly string[];
  /**
   * A raster tile URL template for the live map at `/` (`https://tiles.example.com/{z}/{x}/{y}.png`);
   * its host is added to the page's Content-Security-Policy. Default: none (the outlines shipped in
   * the package, nothing fetched elsewhere).
   */
  mapTilesUrl?: string;
  /** Default: pino at `info` on stdout. */
  logger?: Logger;
  /** Core options besides the store and queue (limits, products, token lifetime, clock...). Products default to the built-in three. */
  core?: Omit<TrailwireOptions, 'store'>;
}

/** A started server, as `startServer` answers it. */
export interface RunningServer {
  /** The assembled core: provision principals (`trailwire.auth`, `trailwire.admin`) and read its services. */
  trailwire: Trailwire;
  /** The HTTP base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** The HTTP port actually bound (useful with `port: 0`). */
  httpPort: number;
  /** The LiveFeed's bound port. */
  grpcPort: number;
  /** With `metrics`: where `GET /metrics` answers, e.g. `http://127.0.0.1:9464/metrics`. */
  metricsUrl?: string;
  /** Where the state lives, as it may be printed: `sqlite <file>` or `postgres <url without password>`, and `+ redis <url>` when shared. */
  storeDescription: string;
  /** Payloads processed and dead-lettered by this process since it started (thread or inline). */
  readonly intakeCounts: { processed: number; failed: number };
  /** Stops accepting, finishes in-flight requests and the intake round in hand, closes the store. */
  close(): Promise<void>;
}

/** A line as the core and the backends hand it over (`{ level, message, ...fields }`), written to pino. */
type LogEntry = { level: 'info' | 'warn' | 'error'; message: string; [field: string]: unknown };
const writeTo =
  (logger: Logger) =>
  ({ level, message, ...fields }: LogEntry): void =>
    logger[level](fields, message);

/**
 * The log lines of the core's worker, as SQLite's processing thread writes them for its own: each
 * failed attempt (a retry or a dead letter is news), and a failed batch once, then once per interval
 * with a count (its payloads stay queued and are taken again).
 */
function intakeEventsLog(logger: Logger): NonNullable<TrailwireOptions['intakeEvents']> {
  const write = writeTo(logger);
  const rounds = new RepeatingFaultLog({ write });
  return {
    onAttemptFailed: (...failed) => write(failedAttemptLine(...failed)),
    onRoundFailed: (error) => rounds.failed('round', { level: 'error', message: ROUND_FAILED_MESSAGE, err: error }),
  };
}

/**
 * The Node HTTP server's timeouts, set deliberately (docs/operations.md, "HTTP timeouts"): a client
 * must send its headers within 15 s and its whole request (by default at most a 256 KiB body) within 30 s, so a
 * slow-loris client cannot hold sockets open; an idle keep-alive connection is kept 65 s, longer than
 * the 60 s idle timeout of common load balancers, so the balancer, not the server, closes it.
 */
const HTTP_SERVER_TIMEOUTS = { headersTimeout: 15_000, requestTimeout: 30_000, keepAliveTimeout: 65_000 } as const;

/** While closing, connections that become idle once their response is sent are closed this often. */
const CLOSE_SWEEP_MS = 50;

/** Where the embedded store lives unless `db` says otherwise. */
export { DEFAULT_DB_FILE } from './backends.ts';

/**
 * Starts the whole service: opens the SQLite store, assembles the core with the built-in products (and
 * `productModules`), starts intake processing, and listens for HTTP and gRPC. Answers once both listen.
 */
export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? pino();
  const bodyLimit = options.intakeBodyLimitBytes;
  if (bodyLimit !== undefined && (!Number.isSafeInteger(bodyLimit) || bodyLimit < 1))
    throw new TrailwireError('validation_failed', `ServerOptions.intakeBodyLimitBytes must be a positive integer of bytes, got ${String(bodyLimit)}`);
  // Read before anything opens, so that a missing or unreadable file fails the start at once.
  const signingKeyPem = options.signingKeyFile === undefined ? undefined : readSigningKeyFile(options.signingKeyFile);
  const productModules = options.productModules ?? [];
  const moduleProducts = await Promise.all(productModules.map((specifier) => loadProductModule(specifier)));
  const startupTimeoutMs = options.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS;
  const redisUrl = options.redisUrl;
  const shared = redisUrl
    ? await openWhenReachable(() => openSharedState({ redisUrl, keyPrefix: options.redisKeyPrefix, logger, replay: options.core?.live?.replay }), {
        what: `Redis at ${redactUrl(redisUrl)}`,
        timeoutMs: startupTimeoutMs,
        logger,
      })
    : undefined;
  const runWorker = options.intakeWorker ?? true;
  // Product objects cannot cross to a thread, and an injected clock would not reach it: those process inline.
  const mayUseThread = (options.intakeThread ?? true) && options.core?.products === undefined && options.core?.clock === undefined;
  let publish: (event: LiveTrailerEvent) => void = () => {};
  let outboxWritten: () => void = () => {};
  // What a backend's own processing (SQLite's thread) did; the core's worker counts its own.
  const backendCounts = { processed: 0, failed: 0 };
  const backendOptions = {
    ...options,
    clock: options.core?.clock,
    intake: {
      process: runWorker,
      thread: mayUseThread,
      productModules,
      worker: options.core?.worker || undefined,
      requireGrants: options.core?.partnerIntake?.requireGrants ?? false,
      onEvents: (events: LiveTrailerEvent[]) => {
        events.forEach((event) => publish(event));
        // The batch that changed these trailers wrote their webhook events with them: the deliverer looks at once rather than at its next poll.
        outboxWritten();
      },
      onRound: ({ processed, failed }: { processed: number; failed: number }) => {
        backendCounts.processed += processed;
        backendCounts.failed += failed;
      },
      log: writeTo(logger),
    },
  };
  let backend: StoreBackend;
  try {
    backend = options.databaseUrl
      ? await openWhenReachable(() => openStoreBackend(backendOptions), { what: `PostgreSQL at ${redactUrl(options.databaseUrl)}${options.intakeLog ? ` and the intake log at ${redactUrl(options.intakeLog)}` : ''}`, timeoutMs: startupTimeoutMs, logger })
      : await openStoreBackend(backendOptions);
  } catch (error) {
    await shared?.close();
    throw error;
  }
  if (backend.sqliteFile && backend.sqliteFile !== ':memory:') warnIfReadableByOthers(backend.sqliteFile, logger);
  const intake = backend.intake;
  const trailwire = await createTrailwire({
    products: [...builtInProducts, ...moduleProducts],
    ...shared?.coreOptions,
    ...options.core,
    // Merged rather than replaced: a caller tuning the hub or the rotation recheck keeps the shared bus and feed.
    live: { ...shared?.coreOptions.live, ...options.core?.live },
    rotations: { ...shared?.coreOptions.rotations, ...options.core?.rotations },
    // A backend whose processing owns the store's writes (SQLite's thread) runs the deliverer's writes there too.
    webhooks: { ...options.core?.webhooks, deliveryStore: options.core?.webhooks?.deliveryStore ?? intake.webhookDeliveryStore },
    operatorChanges: { onError: (error: unknown) => logger.warn({ err: error }, 'operator change feed not read'), ...options.core?.operatorChanges },
    signingKeys: {
      onError: (error: unknown) => logger.warn({ err: error }, 'signing keys not re-read; retrying at the next refresh'),
      ...options.core?.signingKeys,
      ...(signingKeyPem === undefined ? {} : { privateKeyPem: signingKeyPem }),
    },
    store: backend.store,
    intakeQueue: intake.queue,
    // The core's worker (PostgreSQL, or SQLite without its thread) says what the thread's worker says of itself.
    intakeEvents: intakeEventsLog(logger),
    // The core builds a worker only for a queue in the process role (not one its backend processes, as SQLite's thread does), and not in an intake-only process.
    worker: isProcessable(intake.queue) && runWorker ? options.core?.worker : false,
  });
  publish = (event) =>
    void trailwire.live.publish(event).catch((error: unknown) => logger.warn({ err: error, trailerId: event.trailer.id }, 'live update not published'));
  // A rotation by `trailwire keys rotate` (another process) reaches this one at a key refresh: say so.
  trailwire.keys.onChange(() =>
    logger.info({ audit: true, event: 'signing-keys.changed', keys: trailwire.keys.list().map(({ kid, status }) => ({ kid, status })) }, 'signing keys changed'),
  );
  intake.onEnqueuedElsewhere(() => trailwire.intake?.worker?.notify());
  const closeCore = async () => {
    // Processing ends first (the core's worker, then the backend's thread or session), before the live hub it publishes to and the store it reads;
    // the deliverer before the backend's processing, through which it may write (SQLite's thread).
    await trailwire.intake?.worker?.stop();
    await trailwire.webhooks.stop();
    await intake.stop();
    await trailwire.close();
    await shared?.close();
  };
  const webhookDeliverer = trailwire.webhooks.deliverer;
  outboxWritten = () => webhookDeliverer.notify();
  // The deliverer asks the store every poll: a store that is down is said once, then once per interval.
  const webhookFaults = new RepeatingFaultLog({ write: writeTo(logger) });
  webhookDeliverer.onError((error) => webhookFaults.failed('store', { level: 'warn', message: 'webhook delivery: a store call failed; the work is taken again', err: error }));
  webhookDeliverer.onAttempt(({ target, delivery, outcome }) => {
    webhookFaults.recovered('store', 'webhook delivery: the store answers again');
    if (outcome.kind === 'failing')
      logger.warn(
        { audit: true, event: 'webhook.failing', webhookId: target.id, customerId: target.customerId, deliveryId: delivery.id, reason: outcome.error },
        'webhook failing: a delivery was refused for the whole retry period',
      );
  });
  try {
    await trailwire.operatorChanges.start();
    await intake.start();
    await trailwire.intake?.worker?.start();
    // Every serving process delivers: the store's leases give each endpoint to one of them at a time.
    webhookDeliverer.start();
  } catch (error) {
    await closeCore();
    throw error;
  }
  // One heartbeat and one per-customer cap for both live transports (the cap counts their streams together).
  let liveEvents: LiveEventsRoute;
  try {
    liveEvents = createLiveEventsRoute(trailwire, {
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      maxStreamsPerCustomer: options.maxStreamsPerCustomer,
      logger,
    });
  } catch (error) {
    await closeCore();
    throw error;
  }
  const registry = new Registry();
  registerDependencyMetrics(registry, {
    ...(shared ? { redis: () => shared.isUp() } : {}),
    ...(options.databaseUrl ? { postgres: () => trailwire.store.ping().then(() => true) } : {}),
  });
  const handler = createTrailwireHandler(trailwire, {
    logger,
    registry,
    liveEvents,
    metricsRoute: options.metrics === undefined,
    trustProxy: options.trustProxy,
    trustedProxies: options.trustedProxies,
    corsOrigins: options.corsOrigins,
    intakeBodyLimitBytes: options.intakeBodyLimitBytes,
    accessLogLevel: options.accessLogLevel,
    pages: { mapTilesUrl: options.mapTilesUrl },
    readinessChecks: intake.readinessChecks,
  });
  const server: Server = createServer(HTTP_SERVER_TIMEOUTS, handler);
  let connections: ConnectionLimits | undefined;
  let metricsListener: MetricsListener | undefined;
  const closeListeners = async () => {
    connections?.stop();
    await metricsListener?.close();
  };
  try {
    connections = limitConnections(server, { ...options.connectionLimits, exempt: proxyExemption(options), logger });
    if (options.metrics) metricsListener = await startMetricsListener(registry, options.metrics);
    // Inside the try: a bad port throws at once, and the core started above must still be closed.
    server.listen(options.port ?? 8080, options.host);
    await once(server, 'listening');
  } catch (error) {
    await closeListeners();
    await closeCore();
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  let grpc: RunningGrpcServer;
  try {
    grpc = await startGrpcServer({
      port: options.grpcPort ?? 50051,
      host: options.host ?? '0.0.0.0',
      tokens: trailwire.tokens,
      hub: trailwire.live,
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      maxStreamsPerCustomer: options.maxStreamsPerCustomer,
      connectLimits: trailwire.liveConnectLimits,
      clock: trailwire.clock,
      recheckOn: (listener) => trailwire.keys.onChange(listener),
      accessLog: { logger, level: options.accessLogLevel },
      healthWatch: options.healthWatch,
      // The HTTP port's caps hold the gRPC port too (issue 37): grpc-js has no per-address cap.
      prepareListener: (listener) => capConnections(listener, { ...options.connectionLimits, exempt: proxyExemption(options), logger }),
    });
  } catch (error) {
    server.close();
    await closeListeners();
    await closeCore();
    throw error;
  }
  const host = options.host && options.host !== '0.0.0.0' && options.host !== '::' ? options.host : '127.0.0.1';
  return {
    trailwire,
    url: `http://${hostInUrl(host)}:${port}`,
    httpPort: port,
    grpcPort: grpc.port,
    ...(metricsListener ? { metricsUrl: `http://${hostInUrl(options.metrics?.host ?? '127.0.0.1')}:${metricsListener.port}/metrics` } : {}),
    storeDescription: options.redisUrl ? `${backend.description} + redis ${redactUrl(options.redisUrl)}` : backend.description,
    get intakeCounts() {
      return trailwire.intake?.worker?.counts ?? backendCounts;
    },
    async close() {
      await grpc.shutdown();
      // The HTTP server waits for open responses: the event streams end first, each with its final event.
      liveEvents.endAllStreams();
      const closed = once(server, 'close');
      server.close();
      // close() ends the connections idle at that moment; a keep-alive connection whose response was
      // still in flight would stay open until its idle timeout (65 s), holding the shutdown that long.
      server.closeIdleConnections();
      const sweep = setInterval(() => server.closeIdleConnections(), CLOSE_SWEEP_MS);
      await closed.finally(() => clearInterval(sweep));
      await closeListeners();
      await closeCore();
    },
  };
}

/**
 * An existing database file that other users can read gives away the key hashes and, unless
 * `signingKeyFile` keeps it elsewhere, the signing key. It is not chmod-ed for the operator (a
 * backup job or a group may rely on the mode); the warning says how to fix it.
 */
function warnIfReadableByOthers(file: string, logger: Logger): void {
  const exposed = readableByOthers(file);
  if (exposed.length === 0) return;
  const fix = `chmod 600 ${exposed.map((entry) => JSON.stringify(entry.file)).join(' ')}`;
  logger.warn({ files: exposed, fix }, `the database is readable by other users; restrict it with: ${fix}`);
}

function readSigningKeyFile(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new TrailwireError('validation_failed', `The signing key file ${file} cannot be read: ${(error as Error).message}`, { cause: error });
  }
}

/** A host as a URL writes it: an IPv6 address in brackets; any-interface as the loopback. */
function hostInUrl(host: string): string {
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return reachable.includes(':') ? `[${reachable}]` : reachable;
}
