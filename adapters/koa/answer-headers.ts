/**
 * An answer's headers, kept as a list (name, value, name, value, ...): the RateLimit-* headers
 * (contract 7), and a JSON answer with its list, written either through Koa, as any route answers,
 * or at once, with every header in one `writeHead`.
 *
 * At once is for the hot path of a server Trailwire owns: Koa sets each header through
 * `res.setHeader`, where Node validates, lower-cases and stores it, then lays the stored headers out
 * again when it writes the response. For the intake 202 (seven headers) that cost about 45,000 of the
 * HTTP thread's 280,000 instructions per request — more than the rest of Trailwire's accept path
 * together (`npm run bench -- accept-path`). The response carries the request id itself (which is why
 * `edge.ts` sets the request id header only when a response goes out), and the layers above still see its
 * status (`ctx.status`) for metrics and the access log.
 *
 * Not at once inside an app of your own (`createTrailwireMiddleware`): there a middleware of yours may
 * add headers after Trailwire returns, and a response already written would not carry them.
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { RateLimitState } from '../../core/rate-limit.ts';

export function answerJson(ctx: Context, status: number, body: unknown, headers: string[], atOnce: boolean): void {
  if (!atOnce) {
    ctx.status = status;
    setHeaderList(ctx, headers);
    ctx.body = body;
    return;
  }
  // Koa writes nothing more for this request (its documented way out, which a streaming route takes too).
  ctx.respond = false;
  writeJsonAtOnce(ctx.res, status, body, headers, (ctx.state as { requestId?: string }).requestId);
}

/**
 * Writes a JSON answer in one `writeHead` with every header it needs: `headers`, the body's type and
 * length, the request id, and what the edge layer gives every answer (`edge.ts`: no cache may keep
 * it, no browser may sniff it), which it cannot add to a response already written.
 */
export function writeJsonAtOnce(res: ServerResponse, status: number, body: unknown, headers: string[], requestId: string | undefined): void {
  const json = JSON.stringify(body);
  headers.push('Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(Buffer.byteLength(json)), 'Cache-Control', 'no-store', 'X-Content-Type-Options', 'nosniff');
  if (requestId !== undefined) headers.push('X-Request-Id', requestId);
  res.writeHead(status, headers);
  res.end(json);
}

/** Sets headers given as name, value, name, value, ... on a response Koa will write. */
export function setHeaderList(ctx: Context, headers: readonly string[]): void {
  for (let i = 0; i < headers.length; i += 2) ctx.set(headers[i]!, headers[i + 1]!);
}

/**
 * The RateLimit-* headers (IETF draft "RateLimit header fields") as a list: the limit, what remains
 * of it in the current window, and the seconds until the window resets.
 */
export function rateLimitHeaderList(state: RateLimitState): string[] {
  return ['RateLimit-Limit', String(state.limit), 'RateLimit-Remaining', String(state.remaining), 'RateLimit-Reset', String(state.resetSeconds)];
}

/** Sets the RateLimit-* headers on a response Koa will write. */
export function setRateLimitHeaders(ctx: Context, state: RateLimitState): void {
  setHeaderList(ctx, rateLimitHeaderList(state));
}
