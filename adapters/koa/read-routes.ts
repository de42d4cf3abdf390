/**
 * The customer read API (contract 5): twelve GET endpoints behind a customer token and the
 * per-customer read limit. Each handler is one call into the core's ReadService. The four telemetry
 * lists also answer `Accept: text/csv` and `application/x-ndjson` with an export of their whole range
 * (issue 40), streamed with backpressure; an export counts as one read.
 */
import { Readable } from 'node:stream';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { isFleetIdSegment, type QueryParams } from '../../core/read-service.ts';
import { EXPORT_MEDIA_TYPES, type ExportFormat } from '../../core/telemetry-export.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { type AuthenticatedState, bearerAuth } from './bearer-auth.ts';
import type { TrailwireLogger } from './logger.ts';
import { matchedRouteOf } from './metrics.ts';
import { setRateLimitHeaders } from './answer-headers.ts';

/** `logger`: where an export that fails after its first byte is logged (its client only sees the transfer cut off). */
export function createReadRouter(trailwire: Trailwire, options: { logger?: TrailwireLogger } = {}): Router {
  const router = new Router();
  const answerTelemetry = telemetryAnswerer(options.logger);
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
  router.get('/api/v1/fleets/:fleet/telemetry/gps', ...guard, async (ctx) => {
    await answerTelemetry(ctx, {
      list: () => reads.listFleetGps(customer(ctx), param(ctx, 'fleet'), query(ctx)),
      export: (format) => reads.exportFleetGps(customer(ctx), param(ctx, 'fleet'), query(ctx), format),
    });
  });
  router.get('/api/v1/trailers/telemetry/gps/:trailer', ...guard, async (ctx) => {
    await answerTelemetry(ctx, {
      list: () => reads.listGps(customer(ctx), param(ctx, 'trailer'), query(ctx)),
      export: (format) => reads.exportGps(customer(ctx), param(ctx, 'trailer'), query(ctx), format),
    });
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
    await answerTelemetry(ctx, {
      list: () => reads.listDeviceTelemetry(customer(ctx), param(ctx, 'device'), query(ctx)),
      export: (format) => reads.exportDeviceTelemetry(customer(ctx), param(ctx, 'device'), query(ctx), format),
    });
  });
  router.get('/api/v1/devices/:trailer', ...guard, async (ctx) => {
    ctx.body = await reads.listDevices(customer(ctx), param(ctx, 'trailer'), query(ctx));
  });
  router.get('/api/v1/cargosafe', ...guard, async (ctx) => {
    ctx.body = await reads.listCargosafe(customer(ctx), query(ctx));
  });
  router.get('/api/v1/cargosafe/telemetry/:id', ...guard, async (ctx) => {
    await answerTelemetry(ctx, {
      list: () => reads.listCargosafeTelemetry(customer(ctx), param(ctx, 'id'), query(ctx)),
      export: (format) => reads.exportCargosafeTelemetry(customer(ctx), param(ctx, 'id'), query(ctx), format),
    });
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

// The media types a telemetry list answers, JSON first: any type, no Accept header, or one naming
// none of these gets JSON, as before exports existed.
const TELEMETRY_MEDIA_TYPES = ['application/json', 'text/csv', 'application/x-ndjson'];
const EXPORT_FORMAT_BY_TYPE: Record<string, ExportFormat> = { 'text/csv': 'csv', 'application/x-ndjson': 'ndjson' };

/**
 * Answers a telemetry list as the request's Accept asks: a JSON page, or the export of the whole
 * range. The export's text is the body stream: Koa pipes it to the socket, which pulls the next page
 * from the store only when the client has taken the last (bounded memory); if the store fails
 * mid-stream, the pipeline destroys the response, so the client sees a cut-off transfer rather than
 * a clean end of a partial file, and the failure is logged with the request id.
 */
function telemetryAnswerer(logger: TrailwireLogger | undefined) {
  return async (
    ctx: Context,
    answers: { list: () => Promise<unknown>; export: (format: ExportFormat) => Promise<AsyncIterable<string>> },
  ): Promise<void> => {
    ctx.vary('Accept');
    const format = EXPORT_FORMAT_BY_TYPE[ctx.accepts(TELEMETRY_MEDIA_TYPES) || 'application/json'];
    if (format === undefined) {
      ctx.body = await answers.list();
      return;
    }
    const chunks = await answers.export(format);
    ctx.type = EXPORT_MEDIA_TYPES[format];
    // One page's text per chunk; a high-water mark of one keeps at most a page or two read ahead.
    const body = Readable.from(chunks, { highWaterMark: 1 });
    const { requestId } = ctx.state as { requestId?: string };
    body.once('error', (err) => logger?.error({ err, requestId, route: matchedRouteOf(ctx) }, 'export failed after its first byte; the transfer was cut off'));
    ctx.body = body;
  };
}
