/**
 * The per-request envelope of Trailwire's HTTP stack: the edge layer every request enters first and
 * leaves last. It gives the request its id, answers whatever the layers below throw (or leave
 * unanswered) as problem+json (`problem.ts`), and counts (`metrics.ts`) and logs the request with the
 * status the caller gets. One layer rather than four: a Koa layer is an async frame, a promise and a
 * dispatch per request, and four of them around every route cost the intake 202 about as much as its
 * rate limit does.
 *
 * The request id: every request gets one, echoed in `X-Request-Id` and in problem bodies, so a caller
 * can quote it and an operator can find the log line. A well-formed id sent by the caller (or a proxy)
 * is kept. The header is set when the response is about to go out, not when the request comes in: a
 * route that writes its whole response in one go (`answer-headers.ts`) is fastest when no header was set
 * on the response before it, and it sends the id itself.
 *
 * The access log, the HTTP side of the audit trail (issue 17), is written here rather than by
 * pino-http: inside Koa's stack it sees the route pattern the router matched (`_matchedRoute`), the
 * principal the bearer check put in `ctx.state`, and the status after problem+json — and it writes
 * only fields it names, so no header (API key, token) or body can slip in. One line per request, at
 * `level`: `{ access: 'http', requestId, method, route, status, durationMs, principalId, audience,
 * clientAddress }`. `route` is the router's pattern (`/api/v1/telemetry/intake/:vin`), never the raw
 * path: paths carry VINs and ids, and a pattern keeps the log greppable per endpoint; a path no route
 * matched is `(unmatched)`. A 429 also writes an audit line (`audit: true, event: 'limit.hit'`), at
 * most one per principal (or client address) and route per `limitHitWindowMs`, with the count of
 * those left out.
 */
import type { Context, Middleware } from 'koa';
import { type AccessLogLevel, millisecondsSince, OncePerWindow, requestIdFrom } from '../../core/audit.ts';
import type { Clock } from '../../core/clock.ts';
import type { AccessClaims } from '../../core/tokens.ts';
import type { ClientAddressOf } from './client-address.ts';
import { type TrailwireLogger, writesAt } from './logger.ts';
import { type HttpMetrics, matchedRouteOf } from './metrics.ts';
import { answerError, answerUnrouted } from './problem.ts';

/** The edge layer: the request's id, problem+json for what the layers below throw, the metrics, the access line and the storage headers. */
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

/** The request's id: the caller's when well-formed, a new UUID otherwise; kept in `ctx.state.requestId`. */
function assignRequestId(ctx: Context): string {
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

export interface AccessLogOptions {
  logger: TrailwireLogger;
  /** The level of the access lines. Default `info`. */
  level?: AccessLogLevel;
  /** Limit hits logged at most once per principal and route per this many ms. Default 60,000. */
  limitHitWindowMs?: number;
  clock: Clock;
}

/** What routes tell the access log about the caller when there is no bearer token (authenticate). */
export interface AccessLogState {
  requestId?: string;
  claims?: AccessClaims;
  /** Set by authenticate once the key is known. */
  principal?: { audience: string; id: string };
  /** Called by a streaming route (`GET /api/v1/live`) once its stream is open: writes the `stream.open` line. */
  streamOpened?: () => void;
  /** Set by a streaming route when its stream is over: why (an error code, or `client_closed`); the request's line is then its `stream.close` line. */
  streamEnd?: string;
}

/** What the access log says of one answered request. */
interface AccessFacts {
  requestId: string | undefined;
  method: string;
  /** The router's pattern; undefined when no route matched. */
  route: string | undefined;
  status: number;
  principal: { audience: string; id: string } | undefined;
  clientAddress: () => string;
}

/** The access log of one app: `begin` when a request comes in, `end` once it is answered. */
export interface AccessLog {
  begin(ctx: Context): void;
  /** `started`: the request's `performance.now()` when it came in. */
  end(ctx: Context, started: number): void;
}

export function createAccessLog(options: AccessLogOptions): AccessLog {
  const { logger } = options;
  const level = options.level ?? 'info';
  const limitHits = new OncePerWindow({ windowMs: options.limitHitWindowMs ?? 60_000, clock: options.clock });
  const factsOf = (ctx: Context): AccessFacts => {
    const state = ctx.state as AccessLogState;
    const principal = state.claims ? { audience: state.claims.aud, id: state.claims.sub } : state.principal;
    return { requestId: state.requestId, method: ctx.method, route: matchedRouteOf(ctx), status: ctx.status, principal, clientAddress: () => ctx.ip };
  };
  const fieldsOf = (facts: AccessFacts) => ({
    requestId: facts.requestId,
    method: facts.method,
    route: facts.route ?? '(unmatched)',
    status: facts.status,
    principalId: facts.principal?.id,
    audience: facts.principal?.audience,
    clientAddress: facts.clientAddress(),
  });
  const record = (facts: AccessFacts, started: number, streamEnd?: string) => {
    // The line is built only when it is written (or a limit hit is audited): on every request
    // otherwise, for nothing, when the level is off.
    const writesAccess = writesAt(logger, level);
    if (!writesAccess && facts.status !== 429) return;
    const fields = fieldsOf(facts);
    if (writesAccess && streamEnd === undefined) logger[level]({ access: 'http', ...fields, durationMs: millisecondsSince(started) }, 'request');
    else if (writesAccess) logger[level]({ access: 'http', event: 'stream.close', ...fields, endReason: streamEnd, durationMs: millisecondsSince(started) }, 'stream closed');
    if (facts.status === 429) {
      const suppressed = limitHits.admit(`${fields.principalId ?? fields.clientAddress}|${fields.route}`);
      if (suppressed !== null) logger.warn({ audit: true, event: 'limit.hit', ...fields, suppressed }, 'limit hit');
    }
  };
  return {
    begin(ctx) {
      // A stream writes two lines, as a LiveFeed stream does: one when it opens, one when it closes.
      (ctx.state as AccessLogState).streamOpened = () => logger[level]({ access: 'http', event: 'stream.open', ...fieldsOf(factsOf(ctx)) }, 'stream opened');
    },
    end(ctx, started) {
      record(factsOf(ctx), started, (ctx.state as AccessLogState).streamEnd);
    },
  };
}
