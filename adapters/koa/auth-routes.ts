/**
 * The authentication API (contract 3): authenticate and rotate for both audiences, and the JWKS
 * that verifies the tokens. Mountable alone, so an integrator can serve it on its own host.
 */
import Router from '@koa/router';
import type { Audience } from '../../core/model.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { rfc3339 } from '../../core/views.ts';
import { type AuthenticatedState, bearerAuth } from './bearer-auth.ts';
import { setRateLimitHeaders } from './rate-limit-headers.ts';

const AUDIENCES: Audience[] = ['partners', 'customers'];

export function createAuthRouter(trailwire: Trailwire): Router {
  const router = new Router();
  for (const audience of AUDIENCES) {
    router.post(`/api/v1/${audience}/authenticate`, async (ctx) => {
      const { token, rateLimit } = await trailwire.auth.authenticate(audience, ctx.get('x-api-key') || undefined, ctx.ip);
      setRateLimitHeaders(ctx, rateLimit);
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { access_token: token.accessToken, token_type: token.tokenType, expires_in: token.expiresIn };
    });

    router.put(`/api/v1/${audience}/rotate`, bearerAuth(trailwire.tokens, audience), async (ctx) => {
      const { claims } = ctx.state as AuthenticatedState;
      const { apiKey, rotatedAt, rateLimit } = await trailwire.auth.rotate(claims);
      setRateLimitHeaders(ctx, rateLimit);
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { api_key: apiKey, rotated_at: rfc3339(rotatedAt) };
    });
  }

  router.get('/.well-known/jwks.json', (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = trailwire.keys.jwks();
  });
  return router;
}
