/**
 * `trailwire/koa`: the HTTP adapter. `createTrailwireApp(trailwire)` is the whole HTTP service;
 * the routers and middleware are exported for mounting Trailwire inside a Koa app of your own.
 */
export { createTrailwireApp, type TrailwireAppOptions } from './app.ts';
export { createAuthRouter } from './auth-routes.ts';
export { createReadRouter } from './read-routes.ts';
export { createOpsRouter, type ReadinessCheck } from './ops-routes.ts';
export { bearerAuth, type AuthenticatedState } from './bearer-auth.ts';
export { problemMiddleware, sendProblem, toTrailwireError } from './problem.ts';
export { requestIdMiddleware } from './request-id.ts';
export { setRateLimitHeaders } from './rate-limit-headers.ts';
export { buildOpenApiDocument, type OpenApiOptions } from './openapi.ts';
export { createHttpMetrics, type HttpMetrics } from './metrics.ts';
