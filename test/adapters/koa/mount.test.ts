/**
 * Mounting Trailwire inside a Koa app of someone else's: `createTrailwireMiddleware` under a prefix
 * owns exactly that prefix (its 404s are problem+json, intake's Location and the OpenAPI server URL
 * carry the prefix) and leaves every other request to the host untouched; without a prefix it takes
 * only its own routes. A bad prefix fails at start-up, naming the option.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Koa from 'koa';
import { pino } from 'pino';
import { createTrailwireApp, createTrailwireMiddleware } from '../../../adapters/koa/app.ts';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { openSqliteIntakeQueue } from '../../../adapters/sqlite/intake-queue.ts';
import { createTrailwire, type Trailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { assertProblem, uniqueVin } from '../../support/fixtures.ts';

const silent = pino({ level: 'silent' });

/** A host app: its own header middleware, Trailwire mounted, then its own routes (one of which fails). */
function hostApp(trailwire: Trailwire, prefix?: string): Koa {
  const app = new Koa();
  app.use(async (ctx, next) => {
    await next();
    ctx.set('X-Host', 'yes');
  });
  // The host's own error handling, which Trailwire's errors must never reach.
  app.use(async (ctx, next) => {
    try {
      await next();
    } catch {
      ctx.status = 500;
      ctx.type = 'text/plain';
      ctx.body = 'host error page';
    }
  });
  app.use(createTrailwireMiddleware(trailwire, { logger: silent, ...(prefix ? { prefix } : {}) }));
  app.use(async (ctx, next) => {
    if (ctx.path === '/health') ctx.body = { host: 'up' };
    else if (ctx.path === '/boom') throw new Error('host failure');
    else await next();
  });
  return app;
}

async function listen(app: Koa): Promise<{ url: string; server: Server }> {
  const server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function call(url: string, method = 'GET', headers: Record<string, string> = {}, body?: unknown) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const json = (response.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : text;
  return { status: response.status, headers: response.headers, body: json };
}

describe('createTrailwireMiddleware', () => {
  let dir: string;
  let trailwire: Trailwire;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-mount-'));
    const store = await openSqliteStore({ file: join(dir, 'mount.db') });
    trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: openSqliteIntakeQueue(store.db) });
  });
  after(async () => {
    await trailwire.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('under a prefix: serves Trailwire there, and leaves the host its own paths, headers and errors', async () => {
    const { url, server } = await listen(hostApp(trailwire, '/fleet-api'));
    try {
      const health = await call(`${url}/fleet-api/healthz`);
      assert.equal(health.status, 200);
      assert.deepEqual(health.body, { status: 'ok' });
      assert.equal(health.headers.get('x-host'), 'yes', 'the host middleware above the mount wraps Trailwire too');
      assert.ok(health.headers.get('x-request-id'), 'Trailwire sets its request id');

      const own = await call(`${url}/health`);
      assert.deepEqual(own.body, { host: 'up' });
      assert.equal(own.headers.get('x-request-id'), null, 'the host path never ran through Trailwire');

      assertProblem(await call(`${url}/fleet-api/no-such-thing`), 404);
      assertProblem(await call(`${url}/fleet-api/api/v1/fleets`), 401);
      const outside = await call(`${url}/api/v1/fleets`);
      assert.equal(outside.status, 404, 'the unprefixed path is the host’s, which has no such route');
      assert.doesNotMatch(outside.headers.get('content-type') ?? '', /problem/);
      const hostFailure = await call(`${url}/boom`);
      assert.equal(hostFailure.status, 500);
      assert.equal(hostFailure.body, 'host error page', 'a host error is handled by the host, not turned into problem+json');
    } finally {
      server.close();
    }
  });

  it('under a prefix: authenticates, reads and takes intake, and Location and the OpenAPI server URL carry the prefix', async () => {
    const { url, server } = await listen(hostApp(trailwire, '/fleet-api'));
    try {
      const customer = await trailwire.auth.createCustomer({ name: 'Mounted Co' });
      const token = (await call(`${url}/fleet-api/api/v1/customers/authenticate`, 'POST', { 'x-api-key': customer.apiKey })).body.access_token;
      const fleets = await call(`${url}/fleet-api/api/v1/fleets`, 'GET', { authorization: `Bearer ${token}` });
      assert.equal(fleets.status, 200);
      assert.deepEqual(fleets.body, { data: [] });

      const partner = await trailwire.auth.createPartner({ name: 'GPS', product: 'gps-basic' });
      const partnerToken = (await call(`${url}/fleet-api/api/v1/partners/authenticate`, 'POST', { 'x-api-key': partner.apiKey })).body.access_token;
      const fix = { timestamp: 1780315200, position: { latitude: 41.5, longitude: -87.25 }, speedKph: 100, bearingDeg: 90 };
      const accepted = await call(`${url}/fleet-api/api/v1/telemetry/intake/${uniqueVin()}`, 'POST', { authorization: `Bearer ${partnerToken}` }, fix);
      assert.equal(accepted.status, 202);
      assert.equal(accepted.headers.get('x-host'), 'yes', 'inside a host app the 202 goes through Koa, so the host still adds its headers');
      assert.ok(accepted.headers.get('x-request-id'));
      assert.equal(accepted.headers.get('ratelimit-limit'), '120');
      const location = accepted.headers.get('location') ?? '';
      assert.equal(location, `/fleet-api/api/v1/telemetry/intake/status/${accepted.body.id}`);
      const status = await call(url + location, 'GET', { authorization: `Bearer ${partnerToken}` });
      assert.equal(status.status, 200);
      assert.equal(status.body.id, accepted.body.id);

      const document = (await call(`${url}/fleet-api/openapi.json`)).body;
      assert.deepEqual(document.servers.map((s: { url: string }) => s.url), ['/fleet-api']);
      assert.ok(document.paths['/api/v1/fleets'], 'paths stay as the specification spells them, below the server URL');
    } finally {
      server.close();
    }
  });

  it('without a prefix: takes its own routes at the root and passes every other request on', async () => {
    const { url, server } = await listen(hostApp(trailwire));
    try {
      assert.equal((await call(`${url}/healthz`)).status, 200);
      assertProblem(await call(`${url}/api/v1/fleets`), 401);
      assertProblem(await call(`${url}/api/v1/fleets`, 'DELETE'), 405);
      assert.deepEqual((await call(`${url}/health`)).body, { host: 'up' });
      const unknown = await call(`${url}/somewhere-else`);
      assert.equal(unknown.status, 404);
      assert.equal(unknown.headers.get('x-request-id'), null, 'a path Trailwire does not route never runs through it');
      assert.equal((await call(`${url}/boom`)).body, 'host error page');
    } finally {
      server.close();
    }
  });

  it('createTrailwireApp takes a prefix too, and documents exactly the routes it serves below it', async () => {
    const app = createTrailwireApp(trailwire, { logger: silent, prefix: '/v/trailwire' });
    const { url, server } = await listen(app);
    try {
      assert.equal((await call(`${url}/v/trailwire/healthz`)).status, 200);
      assertProblem(await call(`${url}/healthz`), 404);
      const document = (await call(`${url}/v/trailwire/openapi.json`)).body;
      const documented = Object.entries(document.paths as Record<string, object>).flatMap(([path, item]) =>
        Object.keys(item).map((method) => `${method.toUpperCase()} ${document.servers[0].url}${path}`),
      );
      const mounted = (app.middleware as (Koa.Middleware & { router?: { stack: { path: string; methods: string[] }[] } })[]).flatMap((middleware) =>
        (middleware.router?.stack ?? []).flatMap((layer) =>
          layer.methods.filter((method) => method !== 'HEAD').map((method) => `${method} ${layer.path.replace(/:(\w+)/g, '{$1}')}`),
        ),
      );
      assert.ok(mounted.length >= 19 && mounted.every((route) => route.includes(' /v/trailwire/')), mounted.join(', '));
      assert.deepEqual([...new Set(documented)].sort(), [...new Set(mounted)].sort());
    } finally {
      server.close();
    }
  });

  it('refuses a malformed prefix at start-up, naming the option', () => {
    for (const prefix of ['fleet-api', '/fleet-api/', '/', '/:customer', '/fleet api', '//x'])
      assert.throws(() => createTrailwireMiddleware(trailwire, { logger: silent, prefix }), (error: Error) => {
        assert.ok(error instanceof TypeError);
        assert.match(error.message, /`prefix` must look like "\/fleet-api"/);
        return true;
      }, prefix);
  });
});
