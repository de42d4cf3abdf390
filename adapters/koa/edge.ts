/**
 * The edge of Trailwire's HTTP stack: the layer every request enters first and leaves last. It gives
 * the request its id, answers whatever the layers below throw (or leave unanswered) as problem+json,
 * and counts and logs the request with the status the caller gets.
 *
 * One layer for the four, each still in its own module (`request-id.ts`, `problem.ts`, `metrics.ts`,
 * `access-log.ts`): a Koa layer is an async frame, a promise and a dispatch per request, and four of
 * them around every route cost the intake 202 about as much as its rate limit does.
 */
import type { Context, Middleware } from 'koa';
import type { TrailwireLogger } from './logger.ts';
import type { AccessLog } from './access-log.ts';
import type { ClientAddressOf } from './client-address.ts';
import { type HttpMetrics, matchedRouteOf } from './metrics.ts';
import { answerError, answerUnrouted } from './problem.ts';
import { assignRequestId, setRequestIdHeader } from './request-id.ts';

export function edgeMiddleware(options: { logger: TrailwireLogger; accessLog: AccessLog; metrics: HttpMetrics; clientAddressOf?: ClientAddressOf }): Middleware {
  const { logger, accessLog, metrics, clientAddressOf } = options;
  return async (ctx, next) => {
    const started = performance.now();
    // Behind trusted proxies, `ctx.ip` is the client's by `client-address.ts`, for every layer below.
    if (clientAddressOf) ctx.request.ip = clientAddressOf(ctx.req);
    assignRequestId(ctx);
    accessLog.begin(ctx);
    try {
      await next();
      answerUnrouted(ctx);
    } catch (error) {
      answerError(ctx, error, logger);
    } finally {
      setRequestIdHeader(ctx);
      setStorageHeaders(ctx);
      metrics.observe(ctx.method, matchedRouteOf(ctx), ctx.status, started);
      accessLog.end(ctx, started);
    }
  };
}

/**
 * Answers are per caller and often secret (tokens, telemetry): no cache may keep one unless its route
 * says it may (the JWKS, the pages set their own), and no browser may read one as anything but its
 * declared type (issue 29). Koa ignores `set` once the headers are out (an event stream's).
 */
function setStorageHeaders(ctx: Context): void {
  if (!ctx.response.get('Cache-Control')) ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Content-Type-Options', 'nosniff');
}
