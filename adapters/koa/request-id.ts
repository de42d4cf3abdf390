/**
 * Gives every request an id, echoed in `X-Request-Id` and in problem bodies, so a caller can quote it
 * and an operator can find the log line. A well-formed id sent by the caller (or a proxy) is kept.
 */
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';

const ACCEPTABLE_ID = /^[A-Za-z0-9._:-]{1,64}$/;

export function requestIdMiddleware(): Middleware {
  // Not async: nothing follows `next`, so its promise is answered as it is, without another around it.
  return (ctx, next) => {
    const incoming = ctx.get('x-request-id');
    const requestId = ACCEPTABLE_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    return next();
  };
}
