/**
 * Operational endpoints, unauthenticated (contract 1): liveness, readiness, Prometheus metrics and
 * the OpenAPI document.
 */
import Router from '@koa/router';
import type { Registry } from 'prom-client';
import { TrailwireError } from '../../core/errors.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { mountPathOf } from './mount-path.ts';

/** How many mount paths' documents are kept at once. */
const MOUNT_PATHS_REMEMBERED = 8;

/** A readiness check: resolves when its part can serve, throws (or rejects) otherwise. */
export type ReadinessCheck = () => Promise<void>;

export function createOpsRouter(options: {
  trailwire: Trailwire;
  registry: Registry;
  /** The OpenAPI document, for the path a host mounted Trailwire at (`mount-path.ts`; '' at the root). */
  openapi: (mountPath: string) => object;
  readinessChecks?: Record<string, ReadinessCheck>;
  /** Serve `GET /metrics` here. Default true; false when another listener serves the registry. */
  metrics?: boolean;
}): Router {
  const router = new Router();
  const checks: Record<string, ReadinessCheck> = { store: () => options.trailwire.store.ping(), ...options.readinessChecks };
  // One document per mount path, built once: a host mounts Trailwire at one or two places, but a
  // mount path taken from a host route's parameter could vary per request, so the memo stays small.
  const documents = new Map<string, object>();
  const documentFor = (mountPath: string): object => {
    let document = documents.get(mountPath);
    if (!document) {
      if (documents.size >= MOUNT_PATHS_REMEMBERED) documents.clear();
      documents.set(mountPath, (document = options.openapi(mountPath)));
    }
    return document;
  };

  router.get('/healthz', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const failing: string[] = [];
    await Promise.all(
      Object.entries(checks).map(async ([name, check]) => {
        try {
          await check();
        } catch {
          failing.push(name);
        }
      }),
    );
    if (failing.length > 0) throw new TrailwireError('unavailable', `Not ready: ${failing.sort().join(', ')}.`);
    ctx.body = { status: 'ready', checks: Object.keys(checks).sort() };
  });
  if (options.metrics ?? true)
    router.get('/metrics', async (ctx) => {
      ctx.type = options.registry.contentType;
      ctx.body = await options.registry.metrics();
    });
  router.get('/openapi.json', (ctx) => {
    ctx.body = documentFor(mountPathOf(ctx));
  });
  return router;
}
