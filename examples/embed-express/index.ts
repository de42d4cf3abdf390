/**
 * Trailwire inside an Express 5 app you already run. "Dispatch" has its own public route
 * (`GET /health`), its own JSON body parser and its own admin route behind its own key
 * (`X-Dispatch-Key`). It mounts Trailwire's whole HTTP service — the auth and data APIs, the live
 * events, the OpenAPI document and the live map — under `/fleet-api` with one
 * `app.use('/fleet-api', createTrailwireHandler(trailwire))`, above its body parser, and runs the
 * LiveFeed on a gRPC port beside it.
 *
 *   DISPATCH_KEY=change-me PORT=3000 GRPC_PORT=50051 TRAILWIRE_DB=./data/dispatch.db node --import tsx examples/embed-express/index.ts
 *
 * docs/embedding.md walks through it.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import { pino } from 'pino';
import { createTrailwire, HTTP_STATUS_BY_CODE, isTrailwireError } from 'trailwire/core';
import { startGrpcServer } from 'trailwire/grpc';
import { createLiveEventsRoute, createTrailwireHandler } from 'trailwire/koa';
import { builtInProducts } from 'trailwire/products';
import { openSqliteIntakeQueue, openSqliteStore } from 'trailwire/sqlite';

const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' }, pino.destination(2));
const dispatchKey = process.env.DISPATCH_KEY ?? 'dispatch-dev-key';

// 1. The Trailwire core over its store, with intake, and its intake worker running in this process.
const store = await openSqliteStore({ file: process.env.TRAILWIRE_DB ?? './data/dispatch.db' });
const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: openSqliteIntakeQueue(store.db) });
await trailwire.intake!.worker!.start();

const app = express();

// 2. Trailwire under /fleet-api, FIRST: it reads intake bodies itself, so no body parser may run
//    before it. Express hands it the path below the mount and keeps the rest in req.originalUrl,
//    which is where Trailwire reads its prefix from (Location headers, the OpenAPI server, the map's assets).
//    The live events route is built here so that shutdown can end its streams (see below).
const liveEvents = createLiveEventsRoute(trailwire, { logger });
app.use('/fleet-api', createTrailwireHandler(trailwire, { logger, liveEvents }));

// 3. Your own routes, body parser and auth, which never see /fleet-api requests.
app.use(express.json());
app.get('/health', (_req, res) => {
  res.json({ status: 'ok' });
});
app.post('/dispatch/onboard', async (req, res) => {
  if (req.get('x-dispatch-key') !== dispatchKey) {
    res.status(401).json({ error: 'X-Dispatch-Key required' });
    return;
  }
  // One customer with one fleet and trailer, and one partner sending that product: the core's services.
  const { customer, fleet, vin, partner, product } = req.body as Record<string, string>;
  try {
    const { principal, apiKey: customerKey } = await trailwire.auth.createCustomer({ name: customer! });
    const { id: fleetId } = await trailwire.admin.createFleet({ customerId: principal.id, name: fleet! });
    const trailer = await trailwire.admin.registerTrailer({ fleetId, vin: vin! });
    const { apiKey: partnerKey } = await trailwire.auth.createPartner({ name: partner!, product: product! });
    res.status(201).json({ customerKey, partnerKey, trailerId: trailer.id });
  } catch (error) {
    // Errors of the core's services carry a stable code with its HTTP status.
    const status = isTrailwireError(error) ? HTTP_STATUS_BY_CODE[error.code].status : 500;
    if (status >= 500) logger.error({ err: error }, 'onboarding failed');
    res.status(status).json({ error: status < 500 ? (error as Error).message : 'internal error' });
  }
});

// 4. Serve it, and the LiveFeed beside it.
const server = app.listen(Number(process.env.PORT ?? 0));
await new Promise((resolve) => server.once('listening', resolve));
const grpc = await startGrpcServer({ port: Number(process.env.GRPC_PORT ?? 0), tokens: trailwire.tokens, hub: trailwire.live });
console.log(`Dispatch (Express) is running
  http      http://127.0.0.1:${(server.address() as AddressInfo).port}   (Trailwire under /fleet-api)
  livefeed  127.0.0.1:${grpc.port}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, async () => {
    await grpc.shutdown(); // ends LiveFeed streams with UNAVAILABLE
    liveEvents.endAllStreams(); // ends /fleet-api/api/v1/live streams (event: error, unavailable); server.close() would wait for them
    server.closeIdleConnections();
    await new Promise((resolve) => server.close(resolve));
    await trailwire.close(); // stops the intake worker, then closes the store
    process.exit(0);
  });
