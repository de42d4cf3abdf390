/**
 * The files the pages are made of, each named by the URL path it is served under: the page's own
 * HTML, JavaScript and CSS (in `public/` beside this file, shipped in the package as they are: no
 * bundler), and the libraries and map outlines they use, read from the installed npm packages
 * (Leaflet, topojson-client, us-atlas, world-atlas, swagger-ui-dist). Package files are found with
 * Node's resolution at run time, so the same table works from a checkout, from `dist/`, and from the
 * installed `trailwire` package.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';

const gzipAsync = promisify(gzip);

/** A file ready to send: its bytes, their gzip, an ETag and a content type. */
export interface PageFile {
  type: string;
  body: Buffer;
  gzip: Buffer;
  etag: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
};

const require = createRequire(import.meta.url);

/**
 * A file of an installed package (`leaflet/dist/leaflet.js`). None of these packages has an
 * `exports` map, so a file path resolves as it is.
 */
const packageFile = (specifier: string): string => require.resolve(specifier);

/** `public/` beside the sources: found from `adapters/koa/pages/` in a checkout and from `dist/adapters/koa/pages/` in the build. */
function publicDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (let dir = here; dir !== dirname(dir); dir = dirname(dir)) {
    const candidate = join(dir, 'adapters/koa/pages/public');
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`Trailwire pages: adapters/koa/pages/public not found above ${here}`);
}

/** The HTML pages (templates, filled in by the middleware) and the assets, by URL path below the pages' root. */
export function pageFileTable(): { html: { live: string; docs: string }; assets: Map<string, string> } {
  const own = publicDir();
  const ownAssets = ['live.css', 'docs.css', 'live.js', 'docs.js', 'live/api.js', 'live/sse.js', 'live/live-stream.js', 'live/fleet-map.js', 'live/fleet-list.js', 'live/fix-age.js'];
  return {
    html: { live: join(own, 'live.html'), docs: join(own, 'docs.html') },
    assets: new Map<string, string>([
      ...ownAssets.map((file): [string, string] => [`/assets/${file}`, join(own, file)]),
      ['/assets/vendor/leaflet.js', packageFile('leaflet/dist/leaflet.js')],
      ['/assets/vendor/leaflet.css', packageFile('leaflet/dist/leaflet.css')],
      ['/assets/vendor/topojson-client.js', packageFile('topojson-client/dist/topojson-client.min.js')],
      ['/assets/vendor/swagger-ui-bundle.js', packageFile('swagger-ui-dist/swagger-ui-bundle.js')],
      ['/assets/vendor/swagger-ui.css', packageFile('swagger-ui-dist/swagger-ui.css')],
      ['/assets/map/countries-110m.json', packageFile('world-atlas/countries-110m.json')],
      ['/assets/map/states-10m.json', packageFile('us-atlas/states-10m.json')],
    ]),
  };
}

/**
 * Reads a file and prepares it for sending; `transform` rewrites its text first (an HTML template).
 * The gzip runs on libuv's pool: Swagger UI's 1.7 MB bundle would otherwise hold up every other
 * request for a moment.
 */
export async function preparePageFile(path: string, transform?: (text: string) => string): Promise<PageFile> {
  const body = transform === undefined ? readFileSync(path) : Buffer.from(transform(readFileSync(path, 'utf8')));
  const extension = path.slice(path.lastIndexOf('.'));
  return {
    type: TYPES[extension] ?? 'application/octet-stream',
    body,
    gzip: await gzipAsync(body, { level: 9 }),
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  };
}
