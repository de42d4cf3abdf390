/**
 * The RateLimit-* response headers (contract 7; IETF draft "RateLimit header fields"): the limit,
 * what remains of it in the current window, and the seconds until the window resets.
 */
import type { Context } from 'koa';
import type { RateLimitState } from '../../core/rate-limit.ts';

export function setRateLimitHeaders(ctx: Context, state: RateLimitState): void {
  ctx.set('RateLimit-Limit', String(state.limit));
  ctx.set('RateLimit-Remaining', String(state.remaining));
  ctx.set('RateLimit-Reset', String(state.resetSeconds));
}
