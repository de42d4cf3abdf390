/**
 * The pages for people over HTTP (contract 12; the browser tests in test/browser drive them in
 * Chromium): `/`, `/live` and `/docs` are HTML whose every script, stylesheet and module import is
 * served from the package, under a Content-Security-Policy that allows this origin only; files go
 * gzipped with an ETag and revalidate to 304; other methods are 405 and unknown assets 404, both
 * problem+json; a prefix reaches into the HTML; `mapTilesUrl` opens `img-src` to the tile host only,
 * and a malformed one fails at start-up naming the option; `pages: false` (or an app of one API)
 * leaves `/` to the host.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { pino } from 'pino';
import { createTrailwireApp, type TrailwireAppOptions } from '../../../adapters/koa/app.ts';
import { assertProblem, serveTrailwire } from '../../support/fixtures.ts';
import { startTestApp, type TestApp } from '../../support/test-app.ts';

/** A GET with raw bytes back (fetch would undo the gzip). */
function rawGet(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) }));
    })
      .on('error', reject)
      .end();
  });
}

/** The same-origin URLs an HTML page loads (src and href), and those a JS module imports. */
const loadedBy = (html: string) => [...html.matchAll(/(?:src|href)="(\/[^"]*)"/g)].map((match) => match[1]!);
const importedBy = (js: string) => [...js.matchAll(/from '(\.[^']+)'/g)].map((match) => match[1]!);

describe('the pages', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('/ and /live serve the live page and /docs the API reference, under a same-origin-only CSP', async () => {
    for (const [path, marker] of [['/', 'live.js'], ['/live', 'live.js'], ['/docs', 'swagger-ui-bundle.js']] as const) {
      const response = await fetch(app.url + path);
      assert.equal(response.status, 200, path);
      assert.equal(response.headers.get('content-type'), 'text/html; charset=utf-8');
      const policy = response.headers.get('content-security-policy') ?? '';
      for (const directive of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "img-src 'self' data:", "frame-ancestors 'none'"])
        assert.ok(policy.split('; ').includes(directive), `${path}: ${directive} in ${policy}`);
      assert.doesNotMatch(policy, /unsafe|https?:|\*/, 'nothing inline, nothing of another origin');
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
      assert.ok((await response.text()).includes(marker), `${path} loads ${marker}`);
    }
  });

  it('every file the pages load, and every module the live page imports, is served with its type', async () => {
    const types: Record<string, RegExp> = { js: /^text\/javascript/, css: /^text\/css/, json: /^application\/json/ };
    const seen = new Set<string>();
    const visit = async (path: string): Promise<void> => {
      if (seen.has(path)) return;
      seen.add(path);
      const response = await fetch(app.url + path);
      assert.equal(response.status, 200, path);
      const extension = path.slice(path.lastIndexOf('.') + 1);
      if (types[extension]) assert.match(response.headers.get('content-type') ?? '', types[extension]!, path);
      const text = await response.text();
      if (path.endsWith('.js') && path.startsWith('/assets/live')) for (const specifier of importedBy(text)) await visit(new URL(specifier, `http://x${path}`).pathname);
    };
    for (const page of ['/', '/docs']) for (const path of loadedBy(await (await fetch(app.url + page)).text())) if (path.startsWith('/assets/')) await visit(path);
    for (const outline of ['/assets/map/countries-110m.json', '/assets/map/states-10m.json']) await visit(outline);
    for (const expected of ['/assets/vendor/leaflet.js', '/assets/live/sse.js', '/assets/live/fleet-map.js', '/assets/vendor/swagger-ui-bundle.js'])
      assert.ok(seen.has(expected), `${expected} is reached from the pages`);
    const outline = (await (await fetch(`${app.url}/assets/map/states-10m.json`)).json()) as { type: string; objects: Record<string, unknown> };
    assert.equal(outline.type, 'Topology');
    assert.ok(outline.objects.states, 'the US states outline');
  });

  it('sends files gzipped when asked, with an ETag that revalidates to 304', async () => {
    const plain = await rawGet(`${app.url}/assets/vendor/leaflet.js`);
    const zipped = await rawGet(`${app.url}/assets/vendor/leaflet.js`, { 'accept-encoding': 'gzip, deflate' });
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.match(String(zipped.headers.vary), /Accept-Encoding/i);
    assert.ok(zipped.body.length < plain.body.length / 2, `${zipped.body.length} of ${plain.body.length} bytes`);
    assert.deepEqual(gunzipSync(zipped.body), plain.body);
    const etag = String(plain.headers.etag);
    assert.equal(zipped.headers.etag, etag, 'one ETag per file, whatever the encoding');
    assert.equal(plain.headers['cache-control'], 'no-cache');
    const again = await rawGet(`${app.url}/assets/vendor/leaflet.js`, { 'if-none-match': etag });
    assert.equal(again.status, 304);
    assert.equal(again.body.length, 0);
  });

  it('counts page requests in /metrics by page, and every asset under one route', async () => {
    await fetch(`${app.url}/docs`);
    await fetch(`${app.url}/assets/live.css`);
    await fetch(`${app.url}/assets/vendor/leaflet.css`);
    const metrics = (await app.call('GET', '/metrics')).body as string;
    assert.match(metrics, /trailwire_http_requests_total\{method="GET",route="\/docs",status="200"\} \d+/);
    assert.match(metrics, /trailwire_http_requests_total\{method="GET",route="\/assets\/\*",status="200"\} \d+/);
    assert.doesNotMatch(metrics, /leaflet\.css|live\.css/, 'file names never become label values');
  });

  it('answers another method 405 and an unknown asset 404, as problem+json', async () => {
    const posted = await app.call('POST', '/');
    assertProblem(posted, 405);
    assert.equal(posted.headers.get('allow'), 'GET, HEAD');
    assertProblem(await app.call('DELETE', '/docs'), 405);
    for (const path of ['/assets/nope.js', '/assets/live.html', '/assets/../package.json', '/assets/vendor/', '/live/']) assertProblem(await app.call('GET', path), 404);
    const head = await fetch(`${app.url}/live`, { method: 'HEAD' });
    assert.equal(head.status, 200);
  });

  it('under a prefix the HTML names its files and the API below the prefix', async () => {
    const served = await serveTrailwire(app.trailwire, { prefix: '/fleet-api' });
    try {
      for (const path of ['/fleet-api', '/fleet-api/', '/fleet-api/live']) {
        const html = (await served.call('GET', path)).body as string;
        assert.match(html, /<meta name="trailwire-base" content="\/fleet-api">/, path);
        const loaded = loadedBy(html);
        assert.ok(loaded.length >= 4 && loaded.every((url) => url.startsWith('/fleet-api/')), loaded.join(' '));
        for (const url of loaded) assert.equal((await fetch(served.url + url)).status, 200, url);
      }
      assertProblem(await served.call('GET', '/'), 404);
      assertProblem(await served.call('GET', '/assets/live.js'), 404);
    } finally {
      await served.close();
    }
  });

  it('mapTilesUrl reaches the page and allows images from that tile host only; a malformed one fails at start-up', async () => {
    const tiled = await serveTrailwire(app.trailwire, { pages: { mapTilesUrl: 'https://{s}.tiles.example.com/{z}/{x}/{y}.png' } });
    try {
      const response = await fetch(`${tiled.url}/`);
      const policy = response.headers.get('content-security-policy') ?? '';
      assert.ok(policy.split('; ').includes("img-src 'self' data: https://*.tiles.example.com"), policy);
      assert.match(policy, /connect-src 'self';/, 'only images may come from the tile host');
      assert.match(await response.text(), /<meta name="trailwire-map-tiles" content="https:\/\/\{s\}\.tiles\.example\.com\/\{z\}\/\{x\}\/\{y\}\.png">/);
    } finally {
      await tiled.close();
    }
    for (const mapTilesUrl of ['tiles.example.com/{z}/{x}/{y}.png', 'https://tiles.example.com/tile.png', 'javascript:alert(1)//{z}{x}{y}', 'https://a{s}.example.com/{z}/{x}/{y}.png'])
      assert.throws(
        () => createTrailwireApp(app.trailwire, { logger: pino({ level: 'silent' }), pages: { mapTilesUrl } }),
        (error: Error) => error instanceof TypeError && /mapTilesUrl/.test(error.message),
        mapTilesUrl,
      );
  });

  it('pages: false leaves / and /docs to whoever mounts the app; an app of one API serves none unless asked', async () => {
    for (const options of [{ pages: false }, { data: false }, { auth: false }] as TrailwireAppOptions[]) {
      const served = await serveTrailwire(app.trailwire, options);
      try {
        for (const path of ['/', '/docs', '/assets/live.js']) assertProblem(await served.call('GET', path), 404);
        assert.equal((await served.call('GET', '/healthz')).status, 200);
      } finally {
        await served.close();
      }
    }
    const asked = await serveTrailwire(app.trailwire, { data: false, pages: {} });
    try {
      assert.equal((await fetch(`${asked.url}/docs`)).status, 200);
    } finally {
      await asked.close();
    }
  });
});
