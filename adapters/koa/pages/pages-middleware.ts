/**
 * The pages for people (contract 12): `GET /` and `/live`, the live fleet map; `GET /docs`, the
 * browsable API reference of `/openapi.json`; and the files they load under `/assets/`. Everything
 * is served from the package itself under a strict Content-Security-Policy that allows scripts,
 * styles and requests of this origin only (and the operator's tile server's images, when one is
 * configured), so a page can neither load nor send anything elsewhere.
 *
 * It is plain middleware rather than a router: the pages are not part of the API that `/openapi.json`
 * documents route by route.
 */
import type { Context, Middleware } from 'koa';
import { TrailwireError } from '../../../core/errors.ts';
import { mountPathOf } from '../mount-path.ts';
import { type PageFile, pageFileTable, preparePageFile } from './page-files.ts';

/** Options of the pages (`TrailwireAppOptions.pages`). */
export interface PagesOptions {
  /**
   * A raster tile URL template the live map draws under its outlines, in Leaflet's syntax:
   * `https://tiles.example.com/{z}/{x}/{y}.png` (`{s}` for subdomains, `{r}` for retina). The page's
   * Content-Security-Policy then allows images from that host. Default: none — the map draws the
   * country and state outlines shipped in the package and no request leaves the machine.
   */
  mapTilesUrl?: string;
}

/** The HTML pages, by path below the prefix. */
const HTML_PAGES: Record<string, 'live' | 'docs'> = { '': 'live', '/': 'live', '/live': 'live', '/docs': 'docs' };
const LONGEST_PAGE_PATH = Math.max(...Object.keys(HTML_PAGES).map((path) => path.length));
const ASSETS_PATH = '/assets/';

/** The pages as one middleware; `serves(path)` says whether a request path is one of them. */
export function createPagesMiddleware(options: PagesOptions & { prefix: string }): { middleware: Middleware; serves: (path: string) => boolean } {
  const { prefix } = options;
  const tiles = options.mapTilesUrl === undefined ? undefined : parseTileTemplate(options.mapTilesUrl);
  const { html, assets } = pageFileTable();
  const headers = securityHeaders(tiles?.imageSource);
  // Each file is read and gzipped once, on its first request; later ones share the result. A page
  // links its assets below the path it is served at, the host's mount path included (`mount-path.ts`),
  // so pages are prepared per mount path: one or two in practice, but one taken from a host route's
  // parameter could vary per request, so past a few the prepared pages are let go and made again.
  const preparedAssets = new Map<string, Promise<PageFile>>();
  const preparedPages = new Map<string, Promise<PageFile>>();
  const fileOf = (path: string, mountPath: string): Promise<PageFile> => {
    const page = HTML_PAGES[path];
    const [prepared, key] = page ? [preparedPages, `${mountPath}${prefix}|${page}`] : [preparedAssets, path];
    let file = prepared.get(key);
    if (!file) {
      if (page && preparedPages.size >= PAGES_REMEMBERED) preparedPages.clear();
      const base = mountPath + prefix;
      file = page ? preparePageFile(html[page], (text) => fillPlaceholders(text, { base, mapTiles: tiles?.template ?? '' })) : preparePageFile(assets.get(path)!);
      // A failed read (a file removed under a running server) is tried again next time.
      file.catch(() => prepared.delete(key));
      prepared.set(key, file);
    }
    return file;
  };
  /** The path below the prefix, or undefined outside it. */
  const below = (path: string): string | undefined => {
    if (prefix === '') return path;
    if (path === prefix || path.startsWith(`${prefix}/`)) return path.slice(prefix.length);
    return undefined;
  };
  const serves = (path: string) => {
    const own = below(path);
    if (own === undefined) return false;
    // Every API request asks this first: a path is looked up only when it can be a page or an asset.
    if (own.startsWith(ASSETS_PATH)) return assets.has(own);
    return own.length <= LONGEST_PAGE_PATH && Object.hasOwn(HTML_PAGES, own);
  };

  const servePage = async (ctx: Context): Promise<void> => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.set('Allow', 'GET, HEAD');
      throw new TrailwireError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}.`);
    }
    const own = below(ctx.path)!;
    // The route template /metrics counts requests by, as the router would set it: one per page, one for every asset.
    (ctx as Context & { _matchedRoute?: string })._matchedRoute = Object.hasOwn(HTML_PAGES, own) ? ctx.path : `${prefix}/assets/*`;
    send(ctx, await fileOf(own, mountPathOf(ctx)), headers);
  };
  // Not async: an API request passes on with `next`'s own promise, not another around it.
  const middleware: Middleware = (ctx, next) => (serves(ctx.path) ? servePage(ctx) : next());
  return { middleware, serves };
}

/** How many prepared pages are kept at once: both pages under several mount paths. */
const PAGES_REMEMBERED = 16;

function send(ctx: Context, file: PageFile, headers: Record<string, string>): void {
  ctx.set(headers);
  ctx.set('ETag', file.etag);
  // Revalidated on every load (a 304 costs a round trip, not the bytes), so an upgrade shows at once.
  ctx.set('Cache-Control', 'no-cache');
  ctx.vary('Accept-Encoding');
  if (ctx.get('if-none-match') === file.etag) {
    ctx.status = 304;
    return;
  }
  ctx.type = file.type;
  if (ctx.acceptsEncodings('gzip', 'identity') === 'gzip') {
    ctx.set('Content-Encoding', 'gzip');
    ctx.body = file.gzip;
  } else ctx.body = file.body;
}

/**
 * Only this origin's scripts, styles, fonts and connections; images of this origin, `data:` URIs
 * (Swagger UI's icons) and the tile server; no frames, no plugins, no `<base>` rewriting.
 */
function securityHeaders(tileImageSource: string | undefined): Record<string, string> {
  const policy = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self' data:${tileImageSource ? ` ${tileImageSource}` : ''}`,
    "connect-src 'self'",
    "font-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return {
    'Content-Security-Policy': policy,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Resource-Policy': 'same-origin',
  };
}

/** A tile URL template, checked, and the CSP source that allows its images. */
function parseTileTemplate(template: string): { template: string; imageSource: string } {
  const match = /^(https?):\/\/([A-Za-z0-9.{}-]+(?::\d+)?)\/\S*$/.exec(template);
  if (!match || !['{z}', '{x}', '{y}'].every((part) => template.includes(part)))
    throw new TypeError(
      `Trailwire pages: \`mapTilesUrl\` (serve --map-tiles) must be an http(s) URL template with {z}, {x} and {y}, such as "https://tiles.example.com/{z}/{x}/{y}.png", got ${JSON.stringify(template)}`,
    );
  // `{s}` (a subdomain the map picks) becomes the wildcard CSP allows at the start of a host.
  const host = match[2]!.replace(/^\{s\}\./, '*.');
  if (host.includes('{')) throw new TypeError(`Trailwire pages: \`mapTilesUrl\` may use {s} only as the first label of its host, got ${JSON.stringify(template)}`);
  return { template, imageSource: `${match[1]}://${host}` };
}

/** An HTML template with its placeholders filled: `%BASE%` (the path prefix) and `%MAP_TILES%`. */
function fillPlaceholders(html: string, values: { base: string; mapTiles: string }): string {
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return html.replaceAll('%BASE%', escape(values.base)).replaceAll('%MAP_TILES%', escape(values.mapTiles));
}
