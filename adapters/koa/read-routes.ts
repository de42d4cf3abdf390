/**
 * The customer read API (contract 5): eleven GET endpoints behind a customer token and the
 * per-customer read limit. Each handler is one call into the core's ReadService.
 */
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { isFleetIdSegment, type QueryParams } from '../../core/read-service.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { type AuthenticatedState, bearerAuth } from './bearer-auth.ts';
import { setRateLimitHeaders } from './rate-limit-headers.ts';

export function createReadRouter(trailwire: Trailwire): Router {
  const router = new Router();
  const reads = trailwire.reads;
  const guard = [bearerAuth(trailwire.tokens, 'customers'), readLimit(trailwire)];
  const customer = (ctx: Context) => (ctx.state as AuthenticatedState).claims.sub;
  const query = (ctx: Context) => ctx.query as QueryParams;
  const param = (ctx: Context, name: string) => (ctx.params as Record<string, string>)[name] as string;

  router.get('/api/v1/fleets', ...guard, async (ctx) => {
    ctx.body = await reads.listFleets(customer(ctx), query(ctx));
  });
  router.get('/api/v1/fleets/:fleet', ...guard, async (ctx) => {
    ctx.body = await reads.getFleet(customer(ctx), param(ctx, 'fleet'));
  });
  router.get('/api/v1/trailers/telemetry/gps/:trailer', ...guard, async (ctx) => {
    ctx.body = await reads.listGps(customer(ctx), param(ctx, 'trailer'), query(ctx));
  });
  // All digits names a fleet (its trailers); anything else names one trailer (contract 2).
  router.get('/api/v1/trailers/:fleetOrTrailer', ...guard, async (ctx) => {
    const segment = param(ctx, 'fleetOrTrailer');
    ctx.body = isFleetIdSegment(segment)
      ? await reads.listTrailers(customer(ctx), segment, query(ctx))
      : await reads.getTrailer(customer(ctx), segment);
  });
  router.get('/api/v1/devices/details/:device', ...guard, async (ctx) => {
    ctx.body = await reads.getDevice(customer(ctx), param(ctx, 'device'));
  });
  router.get('/api/v1/devices/telemetry/:device', ...guard, async (ctx) => {
    ctx.body = await reads.listDeviceTelemetry(customer(ctx), param(ctx, 'device'), query(ctx));
  });
  router.get('/api/v1/devices/:trailer', ...guard, async (ctx) => {
    ctx.body = await reads.listDevices(customer(ctx), param(ctx, 'trailer'), query(ctx));
  });
  router.get('/api/v1/cargosafe', ...guard, async (ctx) => {
    ctx.body = await reads.listCargosafe(customer(ctx), query(ctx));
  });
  router.get('/api/v1/cargosafe/telemetry/:id', ...guard, async (ctx) => {
    ctx.body = await reads.listCargosafeTelemetry(customer(ctx), param(ctx, 'id'), query(ctx));
  });
  router.get('/api/v1/cargosafe/:id', ...guard, async (ctx) => {
    ctx.body = await reads.getCargosafe(customer(ctx), param(ctx, 'id'));
  });
  return router;
}

/** Counts the request against the customer's read limit and reports it in RateLimit-* headers. */
export function readLimit(trailwire: Trailwire): Middleware {
  return async (ctx, next) => {
    const state = await trailwire.readLimiter.consume((ctx.state as AuthenticatedState).claims.sub);
    if (!state.allowed) throw trailwire.readLimiter.limitedError(state);
    setRateLimitHeaders(ctx, state);
    await next();
  };
}
