/**
 * The customers' webhooks over HTTP (contract 14): register, list, read, delete an endpoint, list
 * its deliveries, send it a test event. Behind a customer token and the customer's read limit, like
 * the read API; each handler is one call into the core's `WebhookService`. Registrations and
 * deletions are audit lines (ids and the URL's origin, never the secret).
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { TrailwireError } from '../../core/errors.ts';
import type { QueryParams } from '../../core/read-service.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { type AuthenticatedState, bearerAuth } from './bearer-auth.ts';
import { isJsonBody, readBody } from './intake-routes.ts';
import type { TrailwireLogger } from './logger.ts';
import { readLimit } from './read-routes.ts';

/** The largest registration body: a URL of 2,048 characters and 100 fleet ids fit many times over. */
const BODY_LIMIT_BYTES = 16 * 1024;

export interface WebhookRouterOptions {
  /** Where the audit lines go (`audit: true`). Default: none. */
  auditLogger?: TrailwireLogger;
}

export function createWebhookRouter(trailwire: Trailwire, options: WebhookRouterOptions = {}): Router {
  const router = new Router();
  const webhooks = trailwire.webhooks.service;
  const guard = [bearerAuth(trailwire.tokens, 'customers'), readLimit(trailwire)];
  const customer = (ctx: Context) => (ctx.state as AuthenticatedState).claims.sub;
  const id = (ctx: Context) => (ctx.params as { id: string }).id;
  const audit = (ctx: Context, event: string, fields: Record<string, unknown>) =>
    options.auditLogger?.info({ audit: true, event, requestId: ctx.state.requestId, clientAddress: ctx.ip, customerId: customer(ctx), ...fields }, event);

  router.post('/api/v1/webhooks', ...guard, async (ctx) => {
    if (!isJsonBody(ctx)) throw new TrailwireError('unsupported_media_type', 'The body must be JSON with Content-Type: application/json.');
    const raw = await readBody(ctx.req, BODY_LIMIT_BYTES, () => undefined);
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      throw new TrailwireError('validation_failed', 'The body is not valid JSON.', { errors: [{ path: '', message: 'is not valid JSON' }] });
    }
    const created = await webhooks.create(customer(ctx), body);
    audit(ctx, 'webhook.created', { webhookId: created.id, origin: new URL(created.url).origin });
    ctx.status = 201;
    ctx.set('Location', `${ctx.path}/${created.id}`);
    // The secret is in this answer only.
    ctx.set('Cache-Control', 'no-store');
    ctx.body = created;
  });
  router.get('/api/v1/webhooks', ...guard, async (ctx) => {
    ctx.body = await webhooks.list(customer(ctx), ctx.query as QueryParams);
  });
  router.get('/api/v1/webhooks/:id', ...guard, async (ctx) => {
    ctx.body = await webhooks.get(customer(ctx), id(ctx));
  });
  router.delete('/api/v1/webhooks/:id', ...guard, async (ctx) => {
    await webhooks.delete(customer(ctx), id(ctx));
    audit(ctx, 'webhook.deleted', { webhookId: id(ctx) });
    ctx.status = 204;
  });
  router.get('/api/v1/webhooks/:id/deliveries', ...guard, async (ctx) => {
    ctx.body = await webhooks.deliveries(customer(ctx), id(ctx), ctx.query as QueryParams);
  });
  router.post('/api/v1/webhooks/:id/test', ...guard, async (ctx) => {
    const result = await webhooks.test(customer(ctx), id(ctx));
    audit(ctx, 'webhook.tested', { webhookId: id(ctx), delivered: result.delivered, status: result.status });
    ctx.body = result;
  });
  return router;
}
