/**
 * The standalone Trailwire server: opens the store, assembles the core, serves the Koa app on one
 * HTTP port and the gRPC LiveFeed on another, and processes intake — in a worker thread with its own
 * connection by default, its live updates published on this process's hub. This is what `trailwire
 * serve` runs and what `examples/standalone` embeds; an integrator with a server of their own
 * mounts the adapters instead.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { pino, type Logger } from 'pino';
import { createTrailwire, type Trailwire, type TrailwireOptions } from '../../core/trailwire.ts';
import { createTrailwireApp } from '../koa/app.ts';
import { type RunningGrpcServer, startGrpcServer } from '../grpc/grpc-server.ts';
import { openSqliteStore, type SqliteDurability } from '../sqlite/index.ts';
import { openSqliteIntakeQueue } from '../sqlite/intake-queue.ts';
import { WriteLockHandoff } from '../sqlite/intake-lock-handoff.ts';
import { IntakeThread } from '../sqlite/intake-thread.ts';
import { builtInProducts } from '../../products/index.ts';
import { loadProductModule } from '../../core/products.ts';

export interface ServerOptions {
  /** The SQLite file of the embedded store. Default `./data/trailwire.db`. */
  db?: string;
  /** SQLite durability: `process` survives kill -9, `power` also power loss. Default `process`. */
  durability?: SqliteDurability;
  /** Interface to listen on. Default: all interfaces. */
  host?: string;
  /** HTTP port; 0 picks a free one. Default 8080. */
  port?: number;
  /** gRPC (LiveFeed) port; 0 picks a free one. Default 50051. */
  grpcPort?: number;
  /** LiveFeed heartbeat interval. Default 15,000 ms. */
  heartbeatIntervalMs?: number;
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
  /** Trust X-Forwarded-For for client addresses. Default false. */
  trustProxy?: boolean;
  /** Default: pino at `info` on stdout. */
  logger?: Logger;
  /** Core options besides the store and queue (limits, products, token lifetime, clock...). Products default to the built-in three. */
  core?: Omit<TrailwireOptions, 'store'>;
}

export interface RunningServer {
  trailwire: Trailwire;
  /** The HTTP base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  httpPort: number;
  /** The LiveFeed's bound port. */
  grpcPort: number;
  /** Payloads processed and dead-lettered by this process since it started (thread or inline). */
  readonly intakeCounts: { processed: number; failed: number };
  /** Stops accepting, finishes in-flight requests and the intake round in hand, closes the store. */
  close(): Promise<void>;
}

export const DEFAULT_DB_FILE = './data/trailwire.db';

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? pino();
  const file = options.db ?? DEFAULT_DB_FILE;
  const durability = options.durability ?? 'process';
  const productModules = options.productModules ?? [];
  const moduleProducts = await Promise.all(productModules.map((specifier) => loadProductModule(specifier)));
  const store = await openSqliteStore({ file, durability });
  const runWorker = options.intakeWorker ?? true;
  const useThread =
    runWorker && (options.intakeThread ?? true) && options.core?.products === undefined && options.core?.clock === undefined && file !== ':memory:';
  let thread: IntakeThread | undefined;
  const lockHandoff = useThread ? new WriteLockHandoff() : undefined;
  const trailwire = await createTrailwire({
    products: [...builtInProducts, ...moduleProducts],
    ...options.core,
    store,
    intakeQueue: openSqliteIntakeQueue(store.db, { onEnqueued: () => thread?.notify(), lockHandoff }),
  });
  try {
    if (useThread) {
      thread = await IntakeThread.start({
        file,
        durability,
        lockHandoff,
        productModules,
        worker: options.core?.worker,
        onEvents: (events) => {
          for (const event of events)
            trailwire.live.publish(event).catch((error: unknown) => logger.warn({ err: error, trailerId: event.trailer.id }, 'live update not published'));
        },
        onLog: ({ level, message, ...fields }) => logger[level](fields, message),
      });
    } else if (runWorker) await trailwire.intake!.worker.start();
  } catch (error) {
    await trailwire.close();
    throw error;
  }
  const app = createTrailwireApp(trailwire, {
    logger,
    trustProxy: options.trustProxy,
    intakeWorkerExpected: runWorker && !useThread,
    readinessChecks: thread
      ? {
          'intake-thread': async () => {
            if (!thread!.isRunning) throw new Error('the intake thread is not running');
          },
        }
      : undefined,
  });
  const server: Server = createServer(app.callback());
  server.keepAliveTimeout = 65_000;
  server.listen(options.port ?? 8080, options.host);
  try {
    await once(server, 'listening');
  } catch (error) {
    await thread?.stop();
    await trailwire.close();
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
    });
  } catch (error) {
    server.close();
    await thread?.stop();
    await trailwire.close();
    throw error;
  }
  const host = options.host && options.host !== '0.0.0.0' && options.host !== '::' ? options.host : '127.0.0.1';
  return {
    trailwire,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    httpPort: port,
    grpcPort: grpc.port,
    get intakeCounts() {
      return thread ? thread.counts : trailwire.intake!.worker.counts;
    },
    async close() {
      await grpc.shutdown();
      const closed = once(server, 'close');
      server.close();
      server.closeIdleConnections();
      await closed;
      await thread?.stop();
      await trailwire.close();
    },
  };
}
