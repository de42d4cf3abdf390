/**
 * The Koa app of Trailwire: request ids, problem+json errors and metrics around the auth API, the
 * data API and the operational endpoints. Either API can be left out, so an integrator can split
 * them across hosts, or mount the routers (`createAuthRouter`, `createReadRouter`) in an app of
 * their own.
 */
import KoaRouter from '@koa/router';
import Koa from 'koa';
import { pino, type Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Trailwire } from '../../core/trailwire.ts';
import { createAuthRouter } from './auth-routes.ts';
import { createHttpMetrics } from './metrics.ts';
import { buildOpenApiDocument, intakeOpenApi, type OpenApiOptions } from './openapi.ts';
import { createIntakeRouter } from './intake-routes.ts';
import { createOpsRouter, type ReadinessCheck } from './ops-routes.ts';
import { problemMiddleware } from './problem.ts';
import { createReadRouter } from './read-routes.ts';
import { requestIdMiddleware } from './request-id.ts';

export interface TrailwireAppOptions {
  /** Mount the authentication API. Default true. */
  auth?: boolean;
  /** Mount the data API (read API, and intake when configured). Default true. */
  data?: boolean;
  /** Extra routers mounted with the data API (the intake router). */
  dataRouters?: KoaRouter[];
  /** Extra OpenAPI paths/schemas documenting `dataRouters`. */
  openapi?: Pick<OpenApiOptions, 'extraPaths' | 'extraSchemas'>;
  /** Whether `/readyz` requires this process's intake worker to run. Default true. */
  intakeWorkerExpected?: boolean;
  /** Largest intake body in bytes. Default 256 KiB. */
  intakeBodyLimitBytes?: number;
  /** Trust X-Forwarded-For for the client address (behind a proxy). Default false. */
  trustProxy?: boolean;
  /** Default: pino at `info`. */
  logger?: Logger;
  /** Where HTTP metrics are registered and `/metrics` reads from. Default: a new registry. */
  registry?: Registry;
  /** Checks `/readyz` runs besides the store's. */
  readinessChecks?: Record<string, ReadinessCheck>;
}

export function createTrailwireApp(trailwire: Trailwire, options: TrailwireAppOptions = {}): Koa {
  const mountAuth = options.auth ?? true;
  const mountData = options.data ?? true;
  const logger = options.logger ?? pino();
  const metrics = createHttpMetrics(options.registry);

  const app = new Koa({ proxy: options.trustProxy ?? false });
  // Koa logs errors it sees itself; ours are all handled (and logged) by problemMiddleware.
  app.silent = true;
  app.use(requestIdMiddleware());
  app.use(metrics.middleware);
  app.use(problemMiddleware(logger));

  const routers: KoaRouter[] = [];
  if (mountAuth) routers.push(createAuthRouter(trailwire));
  if (mountData) routers.push(createReadRouter(trailwire), ...(options.dataRouters ?? []));
  // The data API takes intake whenever the core has an intake queue.
  const withIntake = mountData && trailwire.intake !== undefined;
  if (withIntake) routers.push(createIntakeRouter(trailwire, { bodyLimitBytes: options.intakeBodyLimitBytes }));
  const intakeDocs = withIntake ? intakeOpenApi(trailwire.products.list()) : {};
  routers.push(
    createOpsRouter({
      trailwire,
      registry: metrics.registry,
      openapi: () =>
        buildOpenApiDocument({
          auth: mountAuth,
          data: mountData,
          extraPaths: { ...intakeDocs.extraPaths, ...options.openapi?.extraPaths },
          extraSchemas: { ...intakeDocs.extraSchemas, ...options.openapi?.extraSchemas },
        }),
      readinessChecks: {
        ...(withIntake ? { queue: () => checkIntake(trailwire, options.intakeWorkerExpected ?? true) } : {}),
        ...options.readinessChecks,
      },
    }),
  );
  // One root router, so that 404 and 405 are decided over every route at once.
  const root = new KoaRouter();
  for (const router of routers) root.use(router.routes());
  app.use(root.routes()).use(root.allowedMethods());
  return app;
}

/** The queue answers, and this process's worker runs unless it was configured to take intake only. */
async function checkIntake(trailwire: Trailwire, workerExpected: boolean): Promise<void> {
  await trailwire.intake!.queue.depth();
  if (workerExpected && !trailwire.intake!.worker.isRunning) throw new Error('the intake worker is not running');
}
