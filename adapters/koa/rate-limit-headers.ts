/**
 * The RateLimit-* response headers (contract 7; IETF draft "RateLimit header fields"): the limit,
 * what remains of it in the current window, and the seconds until the window resets.
 */
import type { Context } from 'koa';
import type { RateLimitState } from '../../core/rate-limit.ts';

/** The headers as name, value, name, value ..., for a response written at once (`write-now.ts`). */
export function rateLimitHeaderList(state: RateLimitState): string[] {
  return ['RateLimit-Limit', String(state.limit), 'RateLimit-Remaining', String(state.remaining), 'RateLimit-Reset', String(state.resetSeconds)];
}

export function setRateLimitHeaders(ctx: Context, state: RateLimitState): void {
  ctx.set('RateLimit-Limit', String(state.limit));
  ctx.set('RateLimit-Remaining', String(state.remaining));
  ctx.set('RateLimit-Reset', String(state.resetSeconds));
}
