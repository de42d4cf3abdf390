/**
 * The Bearer check of the Koa adapter. koa-jwt verifies a token the first time it is seen (our keys
 * by `kid`, our algorithms and issuer, the injected clock) and the core's token cache serves it after
 * that, so a client that reuses its token pays one signature check, not one per request. Revocation
 * (a key rotated after the token was minted) is checked on every request, and the audience last:
 * a valid token of the other audience is a 403.
 */
import type { Middleware } from 'koa';
import koaJwt from 'koa-jwt';
import type { Audience } from '../../core/model.ts';
import { type AccessClaims, requireAudience, type TokenService } from '../../core/tokens.ts';

/** The verified claims a protected route reads from `ctx.state.claims`. */
export interface AuthenticatedState {
  claims: AccessClaims;
}

export function bearerAuth(tokens: TokenService, audience: Audience): Middleware {
  // Object.assign keeps verifyOptions' clockTimestamp getter live (a spread would freeze it).
  const verifyWithKoaJwt = koaJwt(
    Object.assign(tokens.verifyOptions(), {
      secret: (header: { kid?: string }) => Promise.resolve(tokens.keyForHeader(header)),
      key: 'claims',
      debug: true,
      isRevoked: async (_ctx: unknown, decoded: object) => {
        await tokens.assertNotRevoked(tokens.checkClaims(decoded));
        return false;
      },
    }) as unknown as koaJwt.Options,
  );
  const noop = async () => {};

  return async (ctx, next) => {
    const token = bearerToken(ctx.req.headers.authorization ?? '');
    const cached = token === undefined ? undefined : tokens.cachedClaims(token);
    if (cached) {
      await tokens.assertNotRevoked(cached);
      ctx.state.claims = cached;
    } else {
      await verifyWithKoaJwt(ctx, noop);
      if (token !== undefined) tokens.remember(token, ctx.state.claims as AccessClaims);
    }
    requireAudience(ctx.state.claims as AccessClaims, audience);
    await next();
  };
}

function bearerToken(header: string): string | undefined {
  // The usual spelling skips the pattern: a token with whitespace in it is in no cache, and the
  // full check (koa-jwt's) refuses it.
  if (header.startsWith('Bearer ') && header.length > 7) return header.slice(7);
  const match = /^Bearer ([^\s]+)$/i.exec(header);
  return match?.[1];
}
