/**
 * Gives every request an id, echoed in `X-Request-Id` and in problem bodies, so a caller can quote it
 * and an operator can find the log line. A well-formed id sent by the caller (or a proxy) is kept.
 *
 * The header is set when the response is about to go out, not when the request comes in: a route
 * that writes its whole response in one go (`answer-json.ts`) is fastest when no header was set on the
 * response before it, and it sends the id itself.
 */
import type { Context, Middleware } from 'koa';
import { requestIdFrom } from '../../core/audit.ts';

/** The request's id: the caller's when well-formed, a new UUID otherwise; kept in `ctx.state.requestId`. */
export function assignRequestId(ctx: Context): string {
  const requestId = requestIdFrom(ctx.get('x-request-id'));
  ctx.state.requestId = requestId;
  return requestId;
}

/** Sets `X-Request-Id` on a response Koa is about to write (one already on its way carries it already). */
export function setRequestIdHeader(ctx: Context): void {
  const requestId = (ctx.state as { requestId?: string }).requestId;
  if (requestId !== undefined && !ctx.res.headersSent) ctx.set('X-Request-Id', requestId);
}

/** The request id as a middleware of its own, for an app that assembles its own stack (Trailwire's app does this in its edge layer). */
export function requestIdMiddleware(): Middleware {
  return async (ctx, next) => {
    assignRequestId(ctx);
    try {
      await next();
    } finally {
      setRequestIdHeader(ctx);
    }
  };
}
