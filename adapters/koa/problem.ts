/**
 * RFC 9457 problem responses. Every error that leaves the Koa adapter goes through `problemMiddleware`:
 * a `TrailwireError` becomes its mapped status with a problem+json body, Koa/router HTTP
 * errors are translated to the matching Trailwire code, and anything else is a 500 whose body says
 * nothing about internals — the log has the error under the request id the response carries.
 */
import type { Context, Middleware } from 'koa';
import type { TrailwireLogger } from './logger.ts';
import {
  DEFAULT_RETRY_AFTER_SECONDS,
  type ErrorCode,
  HTTP_STATUS_BY_CODE,
  isTrailwireError,
  problemType,
  TrailwireError,
} from '../../core/errors.ts';
import { setRateLimitHeaders } from './answer-headers.ts';

interface HttpLikeError {
  status?: number;
  statusCode?: number;
  message?: string;
  headers?: Record<string, string>;
}

const CODE_BY_HTTP_STATUS: Record<number, ErrorCode> = {
  400: 'validation_failed',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  501: 'method_not_allowed',
  503: 'unavailable',
};

/** Catches every error below it and answers a problem+json response (Trailwire's app does this in its edge layer). */
export function problemMiddleware(logger: TrailwireLogger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      answerUnrouted(ctx);
    } catch (error) {
      answerError(ctx, error, logger);
    }
  };
}

/** Answers a request no route answered — one that matched nothing (404) or matched another method (405) leaves an empty body — with its problem. */
export function answerUnrouted(ctx: Context): void {
  if (ctx.body != null || ctx.status < 400 || ctx.respond === false) return;
  let code = CODE_BY_HTTP_STATUS[ctx.status] ?? 'not_found';
  // The router answers an unknown method (501) even on a path no route matches: no Allow list, no resource.
  if (code === 'method_not_allowed' && !ctx.response.get('Allow')) {
    ctx.remove('Allow');
    code = 'not_found';
  }
  const detail = code === 'method_not_allowed' ? `${ctx.method} is not allowed on ${ctx.path}.` : `No resource at ${ctx.path}.`;
  sendProblem(ctx, new TrailwireError(code, detail));
}

/** Answers whatever a layer below threw as its problem; an internal error is logged under the request id, never shown. */
export function answerError(ctx: Context, error: unknown, logger: TrailwireLogger): void {
  // The route's pattern, never the raw path: a path is the caller's text (a VIN, junk, a long string).
  const route = (ctx as Context & { _matchedRoute?: string })._matchedRoute;
  if (!isTrailwireError(error) && clientGone(ctx)) {
    // Nobody is there to read an answer, and it is the client's doing, not a fault (issue 29: one
    // slow-body run wrote 1,000 error lines): a debug line, and a 400 in the access log and metrics.
    logger.debug({ requestId: ctx.state.requestId, route, reason: (error as Error)?.message }, 'client closed the connection before the answer');
    sendProblem(ctx, new TrailwireError('validation_failed', 'The client closed the connection before the request ended.', { cause: error }));
    return;
  }
  const problem = toTrailwireError(error, ctx);
  if (problem.code === 'internal') logger.error({ err: error, requestId: ctx.state.requestId, route }, 'request failed');
  // The host's mounting, not a fault of this request: the operator's line says what to change.
  else if (problem.code === 'body_already_read') logger.error({ code: problem.code, requestId: ctx.state.requestId, route }, problem.message);
  sendProblem(ctx, problem);
}

/** Whether the client closed the connection: the request ended before its body did, or the socket is gone. */
function clientGone(ctx: Context): boolean {
  return (ctx.req.destroyed && !ctx.req.complete) || ctx.res.destroyed || ctx.req.socket?.destroyed === true;
}

/** Translates whatever was thrown into a Trailwire error (internal when it is not a known kind). */
export function toTrailwireError(error: unknown, ctx: Context): TrailwireError {
  if (isTrailwireError(error)) return error;
  const http = error as HttpLikeError;
  const status = http?.status ?? http?.statusCode;
  if (typeof status !== 'number' || status < 400 || status >= 500) {
    return status === 503
      ? new TrailwireError('unavailable', 'The service is not ready.', { cause: error })
      : new TrailwireError('internal', 'An unexpected error occurred.', { cause: error });
  }
  if (status === 401) return fromAuthenticationError(ctx);
  const code = CODE_BY_HTTP_STATUS[status] ?? 'validation_failed';
  return new TrailwireError(code, http.message ?? HTTP_STATUS_BY_CODE[code].title, { cause: error });
}

// A 401 thrown by a layer other than ours (`ctx.throw(401)` in a host app's router under the middleware).
function fromAuthenticationError(ctx: Context): TrailwireError {
  if (!ctx.get('authorization')) return new TrailwireError('missing_token', 'An Authorization: Bearer <token> header is required.');
  return new TrailwireError('invalid_token', 'The Authorization header must be "Bearer <token>".');
}

/** The RFC 9457 body of an error (also the `data` of a live event stream's final `error` event). */
export function problemBody(error: TrailwireError, requestId?: string) {
  const { status, title } = HTTP_STATUS_BY_CODE[error.code];
  // An internal error's detail is fixed text: its message may name internals. Every other code's
  // message is written for the caller (a 503's names the failing part in the operator's terms,
  // `body_already_read`'s says how to mount Trailwire).
  const detail = error.code === 'internal' ? 'An unexpected error occurred; quote the request id to support.' : error.message;
  return {
    type: problemType(error.code),
    title,
    status,
    detail,
    ...(error.errors ? { errors: error.errors } : {}),
    ...(requestId ? { requestId } : {}),
  };
}

/** Writes the problem+json response of an error, with the headers its code calls for. */
export function sendProblem(ctx: Context, error: TrailwireError): void {
  ctx.status = HTTP_STATUS_BY_CODE[error.code].status;
  ctx.type = 'application/problem+json';
  ctx.body = problemBody(error, ctx.state.requestId);
  if (error.code === 'invalid_token')
    ctx.set('WWW-Authenticate', `Bearer realm="trailwire", error="invalid_token", error_description="${error.message.replace(/"/g, "'")}"`);
  if (error.code === 'missing_token') ctx.set('WWW-Authenticate', 'Bearer realm="trailwire"');
  if (error.code === 'invalid_api_key') ctx.set('WWW-Authenticate', 'ApiKey realm="trailwire", header="X-API-KEY"');
  if (error.rateLimit) {
    setRateLimitHeaders(ctx, error.rateLimit);
    ctx.set('Retry-After', String(error.rateLimit.resetSeconds));
  }
  // Every 503 says when to come back (contract 6).
  if (ctx.status === 503) ctx.set('Retry-After', String(error.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS));
}
