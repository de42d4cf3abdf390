/**
 * The Bearer check of the Koa adapter: the core's `TokenService.verify`, the same call the LiveFeed
 * makes, so HTTP, the event stream and gRPC accept and refuse the same tokens. It looks our keys up
 * by `kid` as they are now (a key rotated in by another process, of another algorithm too, verifies
 * once the ring has refreshed: issue 29), checks issuer and expiry on the injected clock, serves a
 * token verified before from its cache (one signature check per token, not per request), checks
 * revocation on every request, and the audience last: a valid token of the other audience is a 403.
 */
import type { Middleware } from 'koa';
import { TrailwireError } from '../../core/errors.ts';
import type { Audience } from '../../core/model.ts';
import { type AccessClaims, requireAudience, type TokenService } from '../../core/tokens.ts';

/** The verified claims a protected route reads from `ctx.state.claims`. */
export interface AuthenticatedState {
  claims: AccessClaims;
}

export function bearerAuth(tokens: TokenService, audience: Audience): Middleware {
  return async (ctx, next) => {
    const claims = await tokens.verify(bearerToken(ctx.req.headers.authorization));
    ctx.state.claims = claims;
    requireAudience(claims, audience);
    await next();
  };
}

function bearerToken(header: string | undefined): string {
  if (!header) throw new TrailwireError('missing_token', 'An Authorization: Bearer <token> header is required.');
  // The usual spelling skips the pattern; a token with whitespace in it is no JWT, and `verify` refuses it.
  if (header.startsWith('Bearer ') && header.length > 7) return header.slice(7);
  const match = /^Bearer ([^\s]+)$/i.exec(header);
  if (!match) throw new TrailwireError('invalid_token', 'The Authorization header must be "Bearer <token>".');
  return match[1]!;
}
