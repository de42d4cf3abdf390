/**
 * Trailwire inside a Fastify 5 app you already run. "Dispatch" has its own public route
 * (`GET /health`) and its own admin route behind its own key (`X-Dispatch-Key`), whose JSON bodies
 * Fastify parses. Trailwire's whole HTTP service — the auth and data APIs, the live events, the
 * OpenAPI document and the live map — answers under `/fleet-api`: an `onRequest` hook, which runs
 * before Fastify reads any body, hands those requests to `createTrailwireHandler` as they came. The
 * app's own logger (`fastify.log`) is Trailwire's too. The LiveFeed runs on a gRPC port beside it.
 *
 *   DISPATCH_KEY=change-me PORT=3000 GRPC_PORT=50051 TRAILWIRE_DB=./data/dispatch.db node --import tsx examples/embed-fastify/index.ts
 *
 * docs/embedding.md walks through it.
 */
import Fastify from 'fastify';
import { createTrailwire, HTTP_STATUS_BY_CODE, isTrailwireError } from 'trailwire/core';
import { startGrpcServer } from 'trailwire/grpc';
import { createLiveEventsRoute, createTrailwireHandler } from 'trailwire/koa';
import { builtInProducts } from 'trailwire/products';
import { openSqliteIntakeQueue, openSqliteStore } from 'trailwire/sqlite';

const fastify = Fastify({ logger: { level: process.env.LOG_LEVEL ?? 'info', stream: process.stderr } });
const dispatchKey = process.env.DISPATCH_KEY ?? 'dispatch-dev-key';

// 1. The Trailwire core over its store, with intake, and its intake worker running in this process.
const store = await openSqliteStore({ file: process.env.TRAILWIRE_DB ?? './data/dispatch.db' });
const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: openSqliteIntakeQueue(store.db) });
await trailwire.intake!.worker!.start();

// 2. Trailwire under /fleet-api. Fastify hands hooks the whole URL, so the handler is told its prefix.
//    onRequest runs before Fastify parses a body: the request is taken over (hijack) with its body
//    unread. A Fastify route instead would have parsed it, and Trailwire would refuse it (500 body_already_read).
//    The live events route is built here so that shutdown can end its streams (see below).
const PREFIX = '/fleet-api';
const liveEvents = createLiveEventsRoute(trailwire, { logger: fastify.log });
const trailwireApi = createTrailwireHandler(trailwire, { prefix: PREFIX, logger: fastify.log, liveEvents });
fastify.addHook('onRequest', async (request, reply) => {
  if (request.url !== PREFIX && !request.url.startsWith(`${PREFIX}/`) && !request.url.startsWith(`${PREFIX}?`)) return;
  reply.hijack();
  trailwireApi(request.raw, reply.raw);
});

// 3. Your own routes, which never see /fleet-api requests.
fastify.get('/health', async () => ({ status: 'ok' }));
fastify.post<{ Body: Record<string, string> }>('/dispatch/onboard', async (request, reply) => {
  if (request.headers['x-dispatch-key'] !== dispatchKey) return reply.code(401).send({ error: 'X-Dispatch-Key required' });
  // One customer with one fleet and trailer, and one partner sending that product: the core's services.
  const { customer, fleet, vin, partner, product } = request.body;
  try {
    const { principal, apiKey: customerKey } = await trailwire.auth.createCustomer({ name: customer! });
    const { id: fleetId } = await trailwire.admin.createFleet({ customerId: principal.id, name: fleet! });
    const trailer = await trailwire.admin.registerTrailer({ fleetId, vin: vin! });
    const { apiKey: partnerKey } = await trailwire.auth.createPartner({ name: partner!, product: product! });
    return reply.code(201).send({ customerKey, partnerKey, trailerId: trailer.id });
  } catch (error) {
    // Errors of the core's services carry a stable code with its HTTP status.
    const status = isTrailwireError(error) ? HTTP_STATUS_BY_CODE[error.code].status : 500;
    if (status >= 500) request.log.error({ err: error }, 'onboarding failed');
    return reply.code(status).send({ error: status < 500 ? (error as Error).message : 'internal error' });
  }
});

// 4. Serve it, and the LiveFeed beside it.
const address = await fastify.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const grpc = await startGrpcServer({ port: Number(process.env.GRPC_PORT ?? 0), tokens: trailwire.tokens, hub: trailwire.live });
console.log(`Dispatch (Fastify) is running
  http      ${address}   (Trailwire under /fleet-api)
  livefeed  127.0.0.1:${grpc.port}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, async () => {
    await grpc.shutdown(); // ends LiveFeed streams with UNAVAILABLE
    liveEvents.endAllStreams(); // ends /fleet-api/api/v1/live streams (event: error, unavailable); closing would wait for them
    await fastify.close();
    await trailwire.close(); // stops the intake worker, then closes the store
    process.exit(0);
  });
