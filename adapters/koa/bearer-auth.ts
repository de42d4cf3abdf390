/**
 * The Bearer check of the Koa adapter. koa-jwt verifies a token the first time it is seen, by the
 * core's rules (`TokenService.verificationKeyFor`: the key of the token's `kid` as the ring holds it
 * now, for that key's own algorithm only; `verifyOptions`: the issuer and the injected clock), and the
 * core's token cache serves it after that, so a client that reuses its token pays one signature check,
 * not one per request. The rules are read at each check, never copied at start: a rotation to another
 * algorithm (`keys rotate --algorithm ES256`) verifies on HTTP as on the event stream and the LiveFeed
 * (which call `TokenService.verify`) once the ring has refreshed (issue 29). Revocation (a key rotated
 * after the token was minted) is checked on every request, and the audience last: a valid token of
 * the other audience is a 403.
 */
import type { Middleware } from 'koa';
import koaJwt from 'koa-jwt';
import { isTrailwireError, TrailwireError } from '../../core/errors.ts';
import type { Audience } from '../../core/model.ts';
import { type AccessClaims, assertCanonicalSignature, describeJwtError, requireAudience, type TokenService } from '../../core/tokens.ts';

/** The verified claims a protected route reads from `ctx.state.claims`. */
export interface AuthenticatedState {
  claims: AccessClaims;
}

export function bearerAuth(tokens: TokenService, audience: Audience): Middleware {
  // Object.assign onto verifyOptions' own object keeps its clock getter live (a spread would freeze it).
  const verifyWithKoaJwt = koaJwt(
    Object.assign(tokens.verifyOptions(), {
      secret: (header: { kid?: string; alg?: string }) => Promise.resolve(tokens.verificationKeyFor(header)),
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
    const token = bearerToken(ctx.req.headers.authorization);
    const cached = tokens.cachedClaims(token);
    if (cached) {
      await tokens.assertNotRevoked(cached);
      ctx.state.claims = cached;
    } else {
      // koa-jwt decodes a signature whatever its spelling: the core's rule comes first.
      assertCanonicalSignature(token);
      try {
        await verifyWithKoaJwt(ctx, noop);
      } catch (error) {
        throw refusalOf(error);
      }
      tokens.remember(token, ctx.state.claims as AccessClaims);
    }
    requireAudience(ctx.state.claims as AccessClaims, audience);
    await next();
  };
}

/** The token of an Authorization header in the usual spelling (`Bearer <token>`), without a pattern; undefined otherwise. */
export function usualBearerToken(header: string | undefined): string | undefined {
  return header !== undefined && header.startsWith('Bearer ') && header.length > 7 ? header.slice(7) : undefined;
}

function bearerToken(header: string | undefined): string {
  if (!header) throw new TrailwireError('missing_token', 'An Authorization: Bearer <token> header is required.');
  // The usual spelling skips the pattern; a token with whitespace in it is no JWT.
  const usual = usualBearerToken(header);
  if (usual !== undefined) return usual;
  const match = /^Bearer ([^\s]+)$/i.exec(header);
  if (!match) throw new TrailwireError('invalid_token', 'The Authorization header must be "Bearer <token>".');
  return match[1]!;
}

/** koa-jwt throws a 401 whose `originalError` is jsonwebtoken's error, or the core's (an unknown `kid`, a revoked key). */
function refusalOf(error: unknown): TrailwireError {
  const original = (error as { originalError?: unknown } | null)?.originalError;
  if (isTrailwireError(original)) return original;
  if (isTrailwireError(error)) return error;
  return new TrailwireError('invalid_token', describeJwtError(original ?? error), { cause: original ?? error });
}
