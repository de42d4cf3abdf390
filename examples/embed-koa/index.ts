/**
 * Trailwire inside a Koa app you already run. "Dispatch" is an existing app with its own middleware
 * (an `X-Response-Time` header), its own public route (`GET /health`) and its own admin routes behind
 * its own auth (`X-Dispatch-Key`). It mounts Trailwire's auth and data APIs under `/fleet-api` with
 * `createTrailwireMiddleware`, runs the LiveFeed on a gRPC port beside it, and uses the core's
 * services from its admin routes to onboard customers, partners, fleets and trailers.
 *
 *   DISPATCH_KEY=change-me PORT=3000 GRPC_PORT=50051 TRAILWIRE_DB=./data/dispatch.db node --import tsx examples/embed-koa/index.ts
 *
 * docs/embedding.md walks through it.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import { pino } from 'pino';
import { createTrailwire, HTTP_STATUS_BY_CODE, isTrailwireError } from 'trailwire/core';
import { startGrpcServer } from 'trailwire/grpc';
import { createLiveEventsRoute, createTrailwireMiddleware } from 'trailwire/koa';
import { builtInProducts } from 'trailwire/products';
import { openSqliteIntake, openSqliteStore } from 'trailwire/sqlite';

const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' }, pino.destination(2));
const dispatchKey = process.env.DISPATCH_KEY ?? 'dispatch-dev-key';

// 1. The Trailwire core over its store, with the same intake as `trailwire serve`: 202s once a turn's
//    payloads are committed to the intake log (its own file beside the store's, `<db>-intake-log`),
//    processing in a worker thread, its live updates published by the core.
const store = await openSqliteStore({ file: process.env.TRAILWIRE_DB ?? './data/dispatch.db' });
const intake = openSqliteIntake({ store, onEvents: (events) => events.forEach((event) => void trailwire.live.publish(event)) });
const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: intake.queue, worker: false });
await intake.start();

// 2. The app you already had: its timing header and its own error format.
const app = new Koa();
app.use(async (ctx, next) => {
  const started = performance.now();
  await next();
  ctx.set('X-Response-Time', `${(performance.now() - started).toFixed(1)}ms`);
});
app.use(async (ctx, next) => {
  try {
    await next();
  } catch (error) {
    // Errors of the core's services called below carry a stable code with its HTTP status.
    const status = isTrailwireError(error) ? HTTP_STATUS_BY_CODE[error.code].status : ((error as { status?: number }).status ?? 500);
    if (status >= 500) logger.error({ err: error }, 'dispatch request failed');
    ctx.status = status;
    ctx.body = { error: status < 500 ? (error as Error).message : 'internal error' };
  }
});

// 3. Trailwire's APIs under /fleet-api, before any body parser or auth of yours: everything under the
//    prefix is answered there (with Trailwire's own key-and-token auth); the rest goes on below.
// Built here rather than left to the default, so that shutdown can end its streams (see below).
const liveEvents = createLiveEventsRoute(trailwire, { logger });
app.use(createTrailwireMiddleware(trailwire, { prefix: '/fleet-api', logger, liveEvents }));

// 4. Your own routes, body parsing and auth, which never see /fleet-api requests.
const routes = new Router();
routes.get('/health', (ctx) => {
  ctx.body = { status: 'ok' };
});
const admin = new Router({ prefix: '/dispatch' });
admin.use(requireDispatchKey, jsonBody);
admin.post('/customers', async (ctx) => {
  const { principal, apiKey } = await trailwire.auth.createCustomer({ name: field(ctx.state.body, 'name') });
  ctx.status = 201;
  ctx.body = { id: principal.id, apiKey };
});
admin.post('/partners', async (ctx) => {
  const body = ctx.state.body;
  const { principal, apiKey } = await trailwire.auth.createPartner({ name: field(body, 'name'), product: field(body, 'product') });
  ctx.status = 201;
  ctx.body = { id: principal.id, apiKey };
});
admin.post('/fleets', async (ctx) => {
  const body = ctx.state.body;
  const fleet = await trailwire.admin.createFleet({ customerId: field(body, 'customerId'), name: field(body, 'name') });
  ctx.status = 201;
  ctx.body = { id: fleet.id };
});
admin.post('/trailers', async (ctx) => {
  const body = ctx.state.body as { fleetId?: unknown };
  const trailer = await trailwire.admin.registerTrailer({ fleetId: Number(body.fleetId), vin: field(body, 'vin') });
  ctx.status = 201;
  ctx.body = { id: trailer.id };
});
app.use(routes.routes()).use(admin.routes()).use(admin.allowedMethods());

// 5. Serve it, and the LiveFeed beside it.
const server = createServer(app.callback()).listen(Number(process.env.PORT ?? 0));
await new Promise((resolve) => server.once('listening', resolve));
const grpc = await startGrpcServer({ port: Number(process.env.GRPC_PORT ?? 0), tokens: trailwire.tokens, hub: trailwire.live });
console.log(`Dispatch is running
  http      http://127.0.0.1:${(server.address() as AddressInfo).port}   (Trailwire under /fleet-api)
  livefeed  127.0.0.1:${grpc.port}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, async () => {
    await grpc.shutdown(); // ends LiveFeed streams with UNAVAILABLE
    liveEvents.endAllStreams(); // ends /fleet-api/api/v1/live streams (event: error, unavailable); server.close() would wait for them
    server.closeIdleConnections();
    await new Promise((resolve) => server.close(resolve));
    await intake.stop(); // finishes the processing round in hand, ends the thread, lets go of the file's server lock
    await trailwire.close(); // then the live hub and the store
    process.exit(0);
  });

/** The app's own auth: an operator key in `X-Dispatch-Key`, answered in the app's own error format. */
async function requireDispatchKey(...[ctx, next]: Parameters<Middleware>) {
  if (ctx.get('x-dispatch-key') !== dispatchKey) {
    ctx.status = 401;
    ctx.body = { error: 'X-Dispatch-Key required' };
    return;
  }
  await next();
}

/** The app's own JSON body parser (in a real app @koa/bodyparser, which sets ctx.request.body), on its routes only. */
async function jsonBody(...[ctx, next]: Parameters<Middleware>) {
  let text = '';
  for await (const chunk of ctx.req) text += chunk;
  try {
    ctx.state.body = text ? JSON.parse(text) : {};
  } catch {
    ctx.status = 400;
    ctx.body = { error: 'invalid JSON' };
    return;
  }
  await next();
}

/** A required string field of the body, or a 400. */
function field(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  if (typeof value !== 'string' || value.trim() === '') throw Object.assign(new Error(`${name} is required`), { status: 400 });
  return value;
}
