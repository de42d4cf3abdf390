/**
 * CORS for a customer's own web app on another origin (contract 12, issue 31): with
 * `corsOrigins` (`serve --cors-origin <origin>`, repeatable; off by default) a page on one of those
 * origins may call authenticate, the customer read API and the event stream `GET /api/v1/live`.
 * Intake and key rotation stay server-to-server: no CORS headers there, so a browser refuses them.
 *
 * A preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin to one of those
 * paths answers 204 with the methods and headers it may send (`Authorization`, `X-API-KEY`,
 * `Content-Type`, `Last-Event-ID`); every answer to such an origin, refusals included, names it in
 * `Access-Control-Allow-Origin` and exposes the RateLimit, `Retry-After`, `X-Request-Id` and `Location`
 * headers, so its code can read a 429 and quote a request id. No credentials (cookies) are involved:
 * tokens travel in `Authorization`.
 */
import type { Middleware } from 'koa';
import { TrailwireError } from '../../core/errors.ts';

/** The methods a browser may use, by path (below the app's prefix). */
function corsMethodsOf(path: string): string | undefined {
  if (/^\/api\/v1\/(customers|partners)\/authenticate$/.test(path)) return 'POST';
  if (/^\/api\/v1\/telemetry\//.test(path) || /\/rotate$/.test(path)) return undefined;
  if (/^\/api\/v1\/(fleets|trailers|devices|cargosafe|live)(\/|$)/.test(path)) return 'GET';
  return undefined;
}

const ALLOWED_HEADERS = 'Authorization, X-API-KEY, Content-Type, Last-Event-ID';
const EXPOSED_HEADERS = 'RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After, X-Request-Id, Location';
/** How long a browser may cache a preflight's answer (seconds). */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * The host of an origin as a browser sends it: DNS labels (letters, digits, `-`, `_`), an IPv4
 * address, or a bracketed IPv6 address. WHATWG URL parsing lets `*` and other characters through a
 * host (`https://*.example.com` parses), but no browser sends them in `Origin`: such an entry would
 * never match, silently.
 */
const ORIGIN_HOST = /^(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])$/;

/**
 * Checks `--cors-origin` values: each an origin as browsers send it (`https://app.example.com`,
 * `http://localhost:3000`: a scheme, a host and an optional port; no path, no `*`: each origin is
 * listed, no pattern is matched). Throws a `validation_failed` naming the bad value.
 */
export function parseCorsOrigins(values: readonly string[]): string[] {
  return values.map((value) => {
    if (value.includes('*'))
      throw new TrailwireError(
        'validation_failed',
        `--cors-origin ${JSON.stringify(value)}: wildcards are not supported; list each origin (https://app.example.com), repeating --cors-origin`,
      );
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.origin !== value.replace(/\/$/, '') || !ORIGIN_HOST.test(url.hostname))
      throw new TrailwireError('validation_failed', `--cors-origin ${JSON.stringify(value)}: expected an origin such as https://app.example.com (scheme, host and port only)`);
    return url.origin;
  });
}

/** The CORS middleware for `origins` (already checked); `prefix` is the app's path prefix. */
export function corsMiddleware(origins: readonly string[], prefix = ''): Middleware {
  const allowed = new Set(origins);
  return async (ctx, next) => {
    const origin = ctx.get('Origin');
    const path = prefix && ctx.path.startsWith(prefix) ? ctx.path.slice(prefix.length) : ctx.path;
    const methods = origin && allowed.has(origin) ? corsMethodsOf(path) : undefined;
    if (origin) ctx.vary('Origin');
    if (methods === undefined) return next();
    ctx.set('Access-Control-Allow-Origin', origin);
    if (ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
      ctx.set('Access-Control-Allow-Methods', methods);
      ctx.set('Access-Control-Allow-Headers', ALLOWED_HEADERS);
      ctx.set('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE_SECONDS));
      ctx.status = 204;
      return;
    }
    ctx.set('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    await next();
    // A layer below may have replaced the headers (a problem answer): set them again if still possible.
    if (!ctx.headerSent) {
      ctx.set('Access-Control-Allow-Origin', origin);
      ctx.set('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    }
  };
}
