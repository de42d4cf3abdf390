/**
 * The RateLimit-* response headers (contract 7; IETF draft "RateLimit header fields"): the limit,
 * what remains of it in the current window, and the seconds until the window resets.
 */
import type { Context } from 'koa';
import type { RateLimitState } from '../../core/rate-limit.ts';
import { setHeaderList } from './answer-json.ts';

/** The headers as name, value, name, value, ... (`answer-json.ts` writes such a list at once). */
export function rateLimitHeaderList(state: RateLimitState): string[] {
  return ['RateLimit-Limit', String(state.limit), 'RateLimit-Remaining', String(state.remaining), 'RateLimit-Reset', String(state.resetSeconds)];
}

export function setRateLimitHeaders(ctx: Context, state: RateLimitState): void {
  setHeaderList(ctx, rateLimitHeaderList(state));
}
