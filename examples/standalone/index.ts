/**
 * The whole Trailwire service in a few lines: the auth and data APIs on one HTTP port, the gRPC
 * LiveFeed on another, intake processing, and the embedded SQLite store — what `trailwire serve`
 * runs, started from code of your own (where you can add product modules and options).
 *
 *   TRAILWIRE_DB=./data/standalone.db TRAILWIRE_PORT=8080 TRAILWIRE_GRPC_PORT=50051 node --import tsx examples/standalone/index.ts
 *
 * Ports default to 0 (a free port each), so it never collides with a running server; the URLs are
 * printed on stdout, logs go to stderr. SIGINT or SIGTERM shuts it down gracefully.
 */
import { pino } from 'pino';
import { startServer } from 'trailwire/server';

const server = await startServer({
  db: process.env.TRAILWIRE_DB ?? './data/standalone.db',
  port: Number(process.env.TRAILWIRE_PORT ?? 0),
  grpcPort: Number(process.env.TRAILWIRE_GRPC_PORT ?? 0),
  logger: pino({ level: process.env.TRAILWIRE_LOG_LEVEL ?? 'info' }, pino.destination(2)),
});

console.log(`Trailwire is running
  http  ${server.url}
  grpc  127.0.0.1:${server.grpcPort}
  docs  ${server.url}/openapi.json`);

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    void server.close().then(() => process.exit(0));
  });
