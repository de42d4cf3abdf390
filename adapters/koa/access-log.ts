/**
 * The HTTP access log and the HTTP side of the audit trail (issue 17). A small Koa middleware rather
 * than pino-http: it runs inside Koa's stack, so it sees the route pattern the router matched
 * (`_matchedRoute`), the principal the bearer check put in `ctx.state`, and the status after
 * problem+json — and it writes only fields it names, so no header (API key, token) or body can slip in.
 *
 * One line per request, at `level`: `{ access: 'http', requestId, method, route, status, durationMs,
 * principalId, audience, clientAddress }`. `route` is the router's pattern
 * (`/api/v1/telemetry/intake/:vin`), never the raw path: paths carry VINs and ids, and a pattern keeps
 * the log greppable per endpoint; a path no route matched is `(unmatched)`. A 429 also writes an audit
 * line (`audit: true, event: 'limit.hit'`), at most one per principal (or client address) and route
 * per `limitHitWindowMs`, with the count of those left out.
 */
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { type AccessLogLevel, millisecondsSince, OncePerWindow } from '../../core/audit.ts';
import type { Clock } from '../../core/clock.ts';
import type { AccessClaims } from '../../core/tokens.ts';

export interface AccessLogOptions {
  logger: Logger;
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

export function accessLogMiddleware(options: AccessLogOptions): Middleware {
  const { logger, clock } = options;
  const level = options.level ?? 'info';
  const limitHits = new OncePerWindow({ windowMs: options.limitHitWindowMs ?? 60_000, clock });
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const state = ctx.state as AccessLogState;
    const fieldsNow = () => {
      const principalId = state.claims?.sub ?? state.principal?.id;
      const audience = state.claims?.aud ?? state.principal?.audience;
      const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : '(unmatched)';
      return { requestId: state.requestId, method: ctx.method, route, status: ctx.status, principalId, audience, clientAddress: ctx.ip };
    };
    // A stream writes two lines, as a LiveFeed stream does: one when it opens, one when it closes.
    state.streamOpened = () => logger[level]({ access: 'http', event: 'stream.open', ...fieldsNow() }, 'stream opened');
    try {
      await next();
    } finally {
      const fields = fieldsNow();
      const { principalId, route } = fields;
      if (state.streamEnd === undefined) logger[level]({ access: 'http', ...fields, durationMs: millisecondsSince(started) }, 'request');
      else logger[level]({ access: 'http', event: 'stream.close', ...fields, endReason: state.streamEnd, durationMs: millisecondsSince(started) }, 'stream closed');
      if (ctx.status === 429) {
        const suppressed = limitHits.admit(`${principalId ?? ctx.ip}|${route}`);
        if (suppressed !== null) logger.warn({ audit: true, event: 'limit.hit', ...fields, suppressed }, 'limit hit');
      }
    }
  };
}
