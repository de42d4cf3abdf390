/**
 * The authentication API (contract 3): authenticate and rotate for both audiences, and the JWKS
 * that verifies the tokens. Mountable alone, so an integrator can serve it on its own host.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { TrailwireLogger } from './logger.ts';
import { isTrailwireError } from '../../core/errors.ts';
import type { Audience } from '../../core/model.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { rfc3339 } from '../../core/views.ts';
import { type AuthenticatedState, bearerAuth } from './bearer-auth.ts';
import { setRateLimitHeaders } from './answer-headers.ts';

const AUDIENCES: Audience[] = ['partners', 'customers'];

export interface AuthRouterOptions {
  /**
   * Where the audit lines go (`audit: true`): every authenticate, ok or failed, with the client
   * address, and every key rotation. Ids and error codes only, never a key or a token. Default: none.
   */
  auditLogger?: TrailwireLogger;
}

export function createAuthRouter(trailwire: Trailwire, options: AuthRouterOptions = {}): Router {
  const audit = (ctx: Context, event: string, fields: Record<string, unknown>) =>
    options.auditLogger?.info({ audit: true, event, requestId: ctx.state.requestId, clientAddress: ctx.ip, ...fields }, event);
  const router = new Router();
  for (const audience of AUDIENCES) {
    router.post(`/api/v1/${audience}/authenticate`, async (ctx) => {
      let authenticated;
      try {
        authenticated = await trailwire.auth.authenticate(audience, ctx.get('x-api-key') || undefined, ctx.ip);
      } catch (error) {
        // A refused attempt over a limit is a limit hit, logged sampled by the access log: a flood stays one line.
        if (!(isTrailwireError(error) && error.code === 'rate_limited'))
          audit(ctx, 'authenticate', { audience, outcome: 'failed', reason: isTrailwireError(error) ? error.code : 'internal' });
        throw error;
      }
      const { token, principal, rateLimit } = authenticated;
      ctx.state.principal = principal;
      audit(ctx, 'authenticate', { audience, outcome: 'ok', principalId: principal.id });
      setRateLimitHeaders(ctx, rateLimit);
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { access_token: token.accessToken, token_type: token.tokenType, expires_in: token.expiresIn };
    });

    router.put(`/api/v1/${audience}/rotate`, bearerAuth(trailwire.tokens, audience), async (ctx) => {
      const { claims } = ctx.state as AuthenticatedState;
      const { apiKey, rotatedAt, rateLimit } = await trailwire.auth.rotate(claims);
      audit(ctx, 'api-key.rotated', { audience, principalId: claims.sub });
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
