/**
 * The HTTP access log and the HTTP side of the audit trail (issue 17). Written from Trailwire's edge
 * layer (`edge.ts`) rather than by pino-http: it runs inside Koa's stack, so it sees the route
 * pattern the router matched (`_matchedRoute`), the principal the bearer check put in `ctx.state`,
 * and the status after problem+json — and it writes only fields it names, so no header (API key,
 * token) or body can slip in.
 *
 * One line per request, at `level`: `{ access: 'http', requestId, method, route, status, durationMs,
 * principalId, audience, clientAddress }`. `route` is the router's pattern
 * (`/api/v1/telemetry/intake/:vin`), never the raw path: paths carry VINs and ids, and a pattern keeps
 * the log greppable per endpoint; a path no route matched is `(unmatched)`. A 429 also writes an audit
 * line (`audit: true, event: 'limit.hit'`), at most one per principal (or client address) and route
 * per `limitHitWindowMs`, with the count of those left out.
 */
import type { Context } from 'koa';
import { type TrailwireLogger, writesAt } from './logger.ts';
import { type AccessLogLevel, millisecondsSince, OncePerWindow } from '../../core/audit.ts';
import type { Clock } from '../../core/clock.ts';
import type { AccessClaims } from '../../core/tokens.ts';
import { matchedRouteOf } from './metrics.ts';

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
