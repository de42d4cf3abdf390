/**
 * `trailwire/koa`: the HTTP adapter. `createTrailwireHandler(trailwire)` is the whole HTTP service as
 * a node:http handler, what `trailwire serve` runs and what Express, Fastify or node:http mount;
 * `createTrailwireApp(trailwire)` is the same as a Koa app, and `createTrailwireMiddleware(trailwire,
 * { prefix })` as one middleware for a Koa app you already run (docs/embedding.md). The routers and middleware it is built from are
 * exported for an app that assembles its own stack.
 */

/**
 * `createTrailwireHandler(trailwire, options)` answers `(req, res) => void` (`TrailwireHandler`),
 * `createTrailwireApp(trailwire, options)` the Koa app (`TrailwireAppOptions`: which APIs,
 * `prefix`, logger, metrics registry, body limit, readiness checks, `trustProxy`).
 * `createTrailwireMiddleware(trailwire, options)` answers it as one middleware
 * (`TrailwireMiddlewareOptions`): everything under `prefix` is Trailwire's, the rest goes on to your app.
 */
export {
  createTrailwireApp,
  createTrailwireHandler,
  createTrailwireMiddleware,
  type TrailwireAppOptions,
  type TrailwireHandler,
  type TrailwireMiddlewareOptions,
} from './app.ts';
/** `TrailwireLogger`: the pino-compatible logger the `logger` options take (pino, a child of it, `fastify.log`). */
export type { TrailwireLogger } from './logger.ts';
/**
 * The routers, each a `@koa/router` instance with paths as the specification spells them: the auth
 * API with the JWKS (`createAuthRouter`), the customer read API (`createReadRouter`), partner intake
 * (`createIntakeRouter`, under `INTAKE_PATH`, bodies up to `DEFAULT_INTAKE_BODY_LIMIT` by default),
 * and `/healthz`, `/readyz`, `/metrics`, `/openapi.json` (`createOpsRouter`; a `ReadinessCheck` each).
 * They throw `TrailwireError`s: put `problemMiddleware` above them.
 */
export { createAuthRouter } from './auth-routes.ts';
export { createReadRouter } from './read-routes.ts';
export { createIntakeRouter, DEFAULT_INTAKE_BODY_LIMIT, INTAKE_PATH } from './intake-routes.ts';
export { createOpsRouter, type ReadinessCheck } from './ops-routes.ts';
/**
 * `createLiveEventsRoute(trailwire, options)`: `GET /api/v1/live` (`LIVE_EVENTS_PATH`), the live updates
 * as Server-Sent Events, with a handle to end its streams (`LiveEventsRoute`, `LiveEventsOptions`).
 */
export { createLiveEventsRoute, LIVE_EVENTS_PATH, type LiveEventsOptions, type LiveEventsRoute } from './live-events-route.ts';
/**
 * `bearerAuth(trailwire.tokens, 'customers' | 'partners')` verifies a Bearer token of one audience and
 * puts its claims on `ctx.state` (`AuthenticatedState`); usable on routes of your own.
 */
export { bearerAuth, type AuthenticatedState } from './bearer-auth.ts';
/** `problemMiddleware(logger)` turns every error below it into RFC 9457 problem+json; `requestIdMiddleware()` sets `X-Request-Id`. */
export { problemMiddleware } from './problem.ts';
export { requestIdMiddleware } from './edge.ts';
/** `buildOpenApiDocument(options)` builds the OpenAPI 3.1 document (`OpenApiOptions`) served at `/openapi.json`. */
export { buildOpenApiDocument, type OpenApiOptions } from './openapi.ts';
/**
 * `createPagesMiddleware({ prefix, mapTilesUrl })` answers the pages for people (the live map at `/`,
 * the API reference at `/docs`, their `/assets/`) as one middleware; the app mounts it unless
 * `pages: false` (`PagesOptions`).
 */
export { createPagesMiddleware, type PagesOptions } from './pages/pages-middleware.ts';
/** `createHttpMetrics(registry?)` answers the Prometheus request metrics middleware and its registry (`HttpMetrics`); `registerDependencyMetrics` adds `trailwire_dependency_up`. */
export { createHttpMetrics, registerDependencyMetrics, type HttpMetrics } from './metrics.ts';
/** `trustedProxyList(entries)`: the `--trusted-proxies` addresses and ranges as a `BlockList` (the server's connection caps exempt them too). */
export { trustedProxyList } from './client-address.ts';
