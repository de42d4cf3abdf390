/**
 * The Koa app of Trailwire: request ids, problem+json errors and metrics around the auth API, the
 * data API and the operational endpoints. Either API can be left out, so an integrator can split
 * them across hosts. To put Trailwire inside a Koa app of your own, `createTrailwireMiddleware`
 * answers the same stack as one middleware, under a path prefix of your choice (`/fleet-api`) or
 * at the root beside your own routes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import KoaRouter from '@koa/router';
import Koa, { type Context, type Middleware } from 'koa';
import compose from 'koa-compose';
import type { Registry } from 'prom-client';
import type { Trailwire } from '../../core/trailwire.ts';
import { createAuthRouter } from './auth-routes.ts';
import { createHttpMetrics, registerIntakeMetrics, registerWebhookMetrics } from './metrics.ts';
import { corsMiddleware, parseCorsOrigins } from './cors.ts';
import { buildOpenApiDocument, intakeOpenApi, type OpenApiOptions } from './openapi.ts';
import { createIntakePostRoute, createIntakeRouter } from './intake-routes.ts';
import { createIntakeDoor, type IntakeDoor } from './intake-door.ts';
import { createOpsRouter, type ReadinessCheck } from './ops-routes.ts';
import { createLiveEventsRoute, type LiveEventsRoute } from './live-events-route.ts';
import { createReadRouter } from './read-routes.ts';
import { createWebhookRouter } from './webhook-routes.ts';
import { createAccessLog, edgeMiddleware } from './edge.ts';
import { type ClientAddressOf, clientAddressResolver } from './client-address.ts';
import type { AccessLogLevel } from '../../core/audit.ts';
import { createPagesMiddleware, type PagesOptions } from './pages/pages-middleware.ts';
import { defaultLogger, type TrailwireLogger } from './logger.ts';
import { PREFIX_PATTERN } from './mount-path.ts';

export interface TrailwireAppOptions {
  /** Mount the authentication API. Default true. */
  auth?: boolean;
  /** Mount the data API (read API, and intake when configured). Default true. */
  data?: boolean;
  /** Extra routers mounted with the data API (the intake router). */
  dataRouters?: KoaRouter[];
  /**
   * `GET /api/v1/live`, mounted with the data API. Pass one built with `createLiveEventsRoute` to set
   * its heartbeat and per-customer cap, and to end its streams before closing the HTTP server
   * (`endAllStreams`). Default: one with the defaults (15 s, 100), whose streams end when the core closes.
   */
  liveEvents?: LiveEventsRoute;
  /** Extra OpenAPI paths/schemas documenting `dataRouters`. */
  openapi?: Pick<OpenApiOptions, 'extraPaths' | 'extraSchemas'>;
  /** Largest intake body in bytes. Default 256 KiB. */
  intakeBodyLimitBytes?: number;
  /**
   * How long an intake refusal given before the body was read in full (429 over the partner's
   * budget, 415, 413, a large body its product cannot accept) is held before it is answered, in ms,
   * so that a flood of them is slowed to one per connection per delay (`createIntakeRouter`).
   * Default 1000; 0 answers at once.
   */
  intakeRefusalDelayMs?: number;
  /**
   * The peer is a reverse proxy: the client address is the right-most X-Forwarded-For entry, the one
   * the proxy appended (never the left-most, which the client writes). Default false.
   */
  trustProxy?: boolean;
  /**
   * The reverse proxies to trust, as addresses or CIDR ranges: the client address is the right-most
   * X-Forwarded-For entry that is not one of them (`client-address.ts`). Implies `trustProxy`. Default: none.
   */
  trustedProxies?: readonly string[];
  /**
   * Where request failures, access lines and audit lines go: any pino-compatible logger (pino, a child
   * of it, `fastify.log`). Default: pino at `info` on stderr, as `trailwire serve` logs.
   */
  logger?: TrailwireLogger;
  /**
   * The level of the access-log lines, one per request (`edge.ts`); audit lines are `info`
   * (limit hits `warn`). Default `info`.
   */
  accessLogLevel?: AccessLogLevel;
  /** Where HTTP metrics are registered and `/metrics` reads from. Default: a new registry. */
  registry?: Registry;
  /**
   * Serve `GET /metrics` on this app. Default true; false keeps it off the public port when another
   * listener serves `registry` (`startServer`'s `metrics`, `serve --metrics-port`).
   */
  metricsRoute?: boolean;
  /** Checks `/readyz` runs besides the store's. */
  readinessChecks?: Record<string, ReadinessCheck>;
  /**
   * Serve every route under this path prefix, e.g. `/fleet-api` (then `/fleet-api/api/v1/fleets`,
   * `/fleet-api/openapi.json`, ...); the OpenAPI document names it as its server URL and intake's
   * `Location` header includes it. A `/` followed by path segments, without a trailing `/`. Default:
   * none (routes at the root, as the specification spells them).
   */
  prefix?: string;
  /**
   * The pages for people (contract 12): the live fleet map at `/` and `/live`, the API reference at
   * `/docs`, their files under `/assets/` (all below `prefix`). `false` leaves them out, for example
   * when your own app answers `/`. Default: served (with `PagesOptions`' defaults) when the app
   * mounts both APIs, which the live page calls on its own origin; not served otherwise.
   */
  pages?: PagesOptions | false;
  /**
   * Origins whose pages may call authenticate, the read API and `GET /api/v1/live` from a browser
   * (`cors.ts`), each as `https://host[:port]`. Default: none (no CORS headers at all).
   */
  corsOrigins?: readonly string[];
}

/** Options of `createTrailwireMiddleware`: the app's, less `trustProxy` and `trustedProxies` (your app's `proxy` setting decides). */
export type TrailwireMiddlewareOptions = Omit<TrailwireAppOptions, 'trustProxy' | 'trustedProxies'>;

/** The whole HTTP service as a Koa app: serve it with `http.createServer(app.callback())`. */
export function createTrailwireApp(trailwire: Trailwire, options: TrailwireAppOptions = {}): Koa {
  const clientAddressOf = clientAddressResolver(options);
  const app = new TrailwireKoa({ proxy: clientAddressOf !== undefined });
  // Koa logs errors it sees itself; ours are all handled (and logged) by the edge layer.
  app.silent = true;
  // The app is all Trailwire's: nothing above it adds headers once a route has answered.
  const stack = buildStack(trailwire, options, { ownsTheApp: true, clientAddressOf });
  for (const middleware of stack.middleware) app.use(middleware);
  if (stack.intakeLayers) app.intakeDoor = createIntakeDoor(app, { prefix: stack.prefix, layers: stack.intakeLayers });
  return app;
}

/**
 * Trailwire's Koa app: its request handler (`callback()`, which `listen()` serves too) lets the intake
 * door take the intake POST (`intake-door.ts`) and hands every other request to Koa.
 */
class TrailwireKoa extends Koa {
  intakeDoor: IntakeDoor | undefined;

  override callback(): ReturnType<Koa['callback']> {
    const answer = super.callback();
    const door = this.intakeDoor;
    if (!door) return answer;
    // Koa's handler type admits HTTP/2 requests; Trailwire serves HTTP/1.1 (`node:http`).
    return (req, res) => door.serve(req as IncomingMessage, res as ServerResponse) ?? answer(req, res);
  }
}

/**
 * A node:http request handler, `(req, res) => void`: what `trailwire serve` runs, and what a host
 * mounts — `http.createServer(handler)`, Express's `app.use('/fleet-api', handler)`, a Fastify hook
 * that hands it `request.raw` and `reply.raw` (docs/embedding.md). Under Express the mount path is
 * read from `req.originalUrl`; a host that hands over whole URLs (node:http, Fastify) names it with
 * `prefix`. It must see the request before any body parser of the host: a body already read is
 * answered at once with a problem+json 500 (`body_already_read`) and a log line.
 */
export function createTrailwireHandler(trailwire: Trailwire, options: TrailwireAppOptions = {}): TrailwireHandler {
  // The app's own callback, with nothing between it and node:http: the promise it answers never
  // rejects (whatever fails is answered, and logged, by the edge layer), so a host may drop it.
  return createTrailwireApp(trailwire, options).callback();
}

/** A node:http request handler (`createTrailwireHandler`). */
export type TrailwireHandler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The same service as one middleware for a Koa app of your own. With a `prefix`, every request under
 * it is Trailwire's (an unknown path there is a problem+json 404) and every other request goes on to
 * your middleware untouched; without one, the requests whose path is a Trailwire route or page
 * (`/`, `/live`, `/docs`, `/assets/...`; `pages: false` leaves those to you) are Trailwire's and the
 * rest go on. Trailwire reads intake bodies itself: mount it before any body
 * parser, or keep the parser off its paths. Its errors never reach your error handling; yours never
 * become problem+json.
 */
export function createTrailwireMiddleware(trailwire: Trailwire, options: TrailwireMiddlewareOptions = {}): Middleware {
  const { middleware, root, prefix, servesPage } = buildStack(trailwire, options, { ownsTheApp: false });
  // Trailwire's stack ends at its router: nothing of the host app runs after it.
  const run = compose(middleware);
  const owns = prefix
    ? (ctx: Context) => ctx.path === prefix || ctx.path.startsWith(`${prefix}/`)
    : (ctx: Context) => root.match(ctx.path, ctx.method).path.length > 0 || servesPage(ctx.path);
  return (ctx, next) => (owns(ctx) ? run(ctx) : next());
}

function buildStack(
  trailwire: Trailwire,
  options: TrailwireAppOptions,
  { ownsTheApp, clientAddressOf }: { ownsTheApp: boolean; clientAddressOf?: ClientAddressOf },
): {
  middleware: Middleware[];
  root: KoaRouter;
  prefix: string;
  servesPage: (path: string) => boolean;
  /** The layers the stack runs for an intake POST, in order (the intake door's), when the app takes intake. */
  intakeLayers: Middleware[] | undefined;
} {
  const prefix = options.prefix ?? '';
  if (prefix !== '' && !PREFIX_PATTERN.test(prefix))
    throw new TypeError(`Trailwire app: \`prefix\` must look like "/fleet-api" (a leading "/", no trailing "/", no parameters), got ${JSON.stringify(prefix)}`);
  const mountAuth = options.auth ?? true;
  const mountData = options.data ?? true;
  const logger = options.logger ?? defaultLogger();
  const metrics = createHttpMetrics(options.registry);

  const routers: KoaRouter[] = [];
  if (mountAuth) routers.push(createAuthRouter(trailwire, { auditLogger: logger }));
  if (mountData)
    routers.push(
      createReadRouter(trailwire, { logger }),
      createWebhookRouter(trailwire, { auditLogger: logger }),
      (options.liveEvents ?? createLiveEventsRoute(trailwire, { logger })).router,
      ...(options.dataRouters ?? []),
    );
  if (mountData) registerWebhookMetrics(metrics.registry, trailwire.webhooks.deliverer);
  const accessLog = createAccessLog({ logger, level: options.accessLogLevel, clock: trailwire.clock });
  // The data API takes intake whenever the core has an intake queue.
  const withIntake = mountData && trailwire.intake !== undefined;
  let intakePost: Middleware | undefined;
  if (withIntake) {
    const intakeOptions = {
      bodyLimitBytes: options.intakeBodyLimitBytes,
      refusalDelayMs: options.intakeRefusalDelayMs,
      pathPrefix: prefix,
      auditLogger: logger,
      writeAtOnce: ownsTheApp,
    };
    intakePost = createIntakePostRoute(trailwire, intakeOptions);
    routers.push(createIntakeRouter(trailwire, intakeOptions, intakePost));
    registerIntakeMetrics(metrics.registry, trailwire.intake!.queue);
  }
  const intakeDocs = withIntake ? intakeOpenApi(trailwire.products.list()) : {};
  routers.push(
    createOpsRouter({
      trailwire,
      registry: metrics.registry,
      metrics: options.metricsRoute,
      openapi: (mountPath) =>
        buildOpenApiDocument({
          auth: mountAuth,
          data: mountData,
          extraPaths: { ...intakeDocs.extraPaths, ...options.openapi?.extraPaths },
          extraSchemas: { ...intakeDocs.extraSchemas, ...options.openapi?.extraSchemas },
          ...(mountPath + prefix ? { serverUrl: mountPath + prefix } : {}),
        }),
      readinessChecks: {
        ...(withIntake ? { queue: () => checkIntake(trailwire) } : {}),
        ...options.readinessChecks,
      },
    }),
  );
  // One root router, so that 404 and 405 are decided over every route at once.
  const root = new KoaRouter(prefix ? { prefix } : {});
  for (const router of routers) root.use(router.routes());
  // The live page calls both APIs on its own origin: an app serving one of them serves no pages unless asked.
  const pagesOptions = options.pages ?? (mountAuth && mountData ? {} : false);
  const pages = pagesOptions === false ? undefined : createPagesMiddleware({ ...pagesOptions, prefix });
  const edge = edgeMiddleware({ logger, metrics, clientAddressOf, accessLog });
  const cors = options.corsOrigins?.length ? [corsMiddleware(parseCorsOrigins(options.corsOrigins), prefix)] : [];
  return {
    // The router's middleware types ask for its own context additions, which it adds itself.
    middleware: [...cors, edge, ...(pages ? [pages.middleware] : []), root.routes() as Middleware, root.allowedMethods() as Middleware],
    root,
    prefix,
    servesPage: pages?.serves ?? (() => false),
    // What the stack runs for an intake POST: the pages pass it on, the router finds the intake route.
    intakeLayers: intakePost && ownsTheApp ? [...cors, edge, intakePost] : undefined,
  };
}

/** The queue answers, and the core's worker runs when it has one (a processing thread brings checks of its own). */
async function checkIntake(trailwire: Trailwire): Promise<void> {
  const { queue, worker } = trailwire.intake!;
  await queue.depth();
  if (worker && !worker.isRunning) throw new Error('the intake worker is not running');
}
