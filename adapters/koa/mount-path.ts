/**
 * Where a host mounted Trailwire, read from the request: koa-mount's `ctx.mountPath`, or the part of
 * Express's (and Connect's) `req.originalUrl` that the host cut off `req.url` before handing the
 * request on. Trailwire routes on the path it is handed, so routing needs none of this; what it
 * writes for the client to follow — intake's `Location`, the OpenAPI document's server URL, the
 * pages' links to their assets — is prefixed with it, so that the obvious mount
 * (`app.use('/fleet-api', handler)`) works without telling Trailwire the prefix a second time.
 */
import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';

/** A path prefix: one or more `/segment`s of unreserved URL characters (nothing to escape in a header, a URL or HTML). */
export const PREFIX_PATTERN = /^(\/[A-Za-z0-9._~-]+)+$/;

/**
 * The path the host mounted Trailwire at (`/fleet-api`), or '' at the root. A mount path that is not
 * a plain prefix counts as none: it is written into headers and HTML, and a host route's parameter in
 * it carries whatever the client sent.
 */
export function mountPathOf(ctx: Context): string {
  const mounted = (ctx as Context & { mountPath?: unknown }).mountPath;
  const path = typeof mounted === 'string' ? mounted : cutOffPath(ctx.req);
  return path !== '' && PREFIX_PATTERN.test(path) ? path : '';
}

/** What Express or Connect cut off `req.url` (both keep the whole URL in `req.originalUrl`); '' when nothing was. */
function cutOffPath(req: IncomingMessage & { originalUrl?: unknown }): string {
  const { originalUrl, url } = req;
  if (typeof originalUrl !== 'string' || url === undefined || originalUrl === url) return '';
  const whole = pathOf(originalUrl);
  const rest = pathOf(url);
  // `/fleet-api` itself reaches a handler mounted there as `/`.
  if (rest === '/' && !whole.endsWith('/')) return whole;
  return whole.endsWith(rest) ? whole.slice(0, whole.length - rest.length) : '';
}

function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}
