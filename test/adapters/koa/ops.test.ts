/**
 * The operational side of the HTTP service (contract 1 and 6): liveness and readiness, Prometheus
 * metrics, the OpenAPI document covering every mounted route (checked by walking the app's router),
 * request ids, 404/405 problems, and a 500 that tells the caller nothing of the internals while the
 * log keeps them under the same request id.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type Koa from 'koa';
import { pino } from 'pino';
import { createTrailwireApp, type TrailwireAppOptions } from '../../../adapters/koa/app.ts';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { ManualClock } from '../../../core/clock.ts';
import type { TrailwireStore } from '../../../core/store.ts';
import { createTrailwire, type Trailwire } from '../../../core/trailwire.ts';
import { assertProblem, mintToken, seedFleet, serveTrailwire, uniqueVin } from '../../support/fixtures.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** `METHOD /path/{param}` of every route the app's router serves (HEAD is implied by GET). */
function mountedRoutes(app: Koa): Set<string> {
  const routes = new Set<string>();
  for (const middleware of app.middleware as (Koa.Middleware & { router?: { stack: { path: string; methods: string[] }[] } })[]) {
    for (const layer of middleware.router?.stack ?? []) {
      const path = layer.path.replace(/:(\w+)/g, '{$1}');
      for (const method of layer.methods) if (method !== 'HEAD') routes.add(`${method} ${path}`);
    }
  }
  return routes;
}

/** `METHOD /path` of every operation the OpenAPI document describes. */
function documentedRoutes(document: { paths: Record<string, Record<string, unknown>> }): Set<string> {
  const routes = new Set<string>();
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of Object.keys(item)) routes.add(`${method.toUpperCase()} ${path}`);
  }
  return routes;
}

describe('ops endpoints', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app.close());

  it('GET /healthz and /readyz answer 200 without auth', async () => {
    const health = await app.call('GET', '/healthz');
    assert.equal(health.status, 200);
    assert.deepEqual(health.body, { status: 'ok' });
    assert.equal(health.headers.get('cache-control'), 'no-store');
    const ready = await app.call('GET', '/readyz');
    assert.equal(ready.status, 200);
    assert.equal(ready.body.status, 'ready');
    assert.ok(ready.body.checks.includes('store'));
  });

  it('GET /metrics serves Prometheus text counting requests by route template, never by raw id', async () => {
    const customer = await customerWithToken(app, 'Metered');
    const seeded = await seedFleet(app.trailwire, customer.id, { trailers: 1 });
    const trailerId = seeded.trailers[0]!.trailer.id;
    await app.call('GET', `/api/v1/trailers/${trailerId}`, { token: customer.token });
    await app.call('GET', '/api/v1/no-such-thing');
    const metrics = await app.call('GET', '/metrics');
    assert.equal(metrics.status, 200);
    assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(metrics.body, /# TYPE trailwire_http_requests_total counter/);
    assert.match(metrics.body, /trailwire_http_requests_total\{method="GET",route="\/api\/v1\/trailers\/:fleetOrTrailer",status="200"\} 1/);
    assert.match(metrics.body, /trailwire_http_requests_total\{method="POST",route="\/api\/v1\/customers\/authenticate",status="200"\} \d+/);
    assert.match(metrics.body, /trailwire_http_request_duration_seconds_bucket/);
    assert.ok(!metrics.body.includes(trailerId), 'ids must not become label values');
    assert.ok(!metrics.body.includes('no-such-thing'), 'unmatched paths must not become label values');
  });

  it('GET /metrics reports the intake queue depth, so an operator sees whether processing keeps up', async () => {
    const partner = await partnerWithToken(app, 'gps-basic', 'Deep');
    const depth = async () => Number(/^trailwire_intake_queue_depth (\d+)$/m.exec((await app.call('GET', '/metrics')).body)?.[1]);
    await app.trailwire.intake!.worker!.drainDue();
    assert.equal(await depth(), 0);
    await app.trailwire.intake!.worker!.stop();
    try {
      for (const seconds of [0, 1])
        assert.equal(
          (await app.call('POST', `/api/v1/telemetry/intake/${uniqueVin()}`, { token: partner.token, body: { timestamp: 1780315200 + seconds, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 80, bearingDeg: 90 } })).status,
          202,
        );
      assert.equal(await depth(), 2);
    } finally {
      await app.trailwire.intake!.worker!.start();
    }
    await app.trailwire.intake!.worker!.drainDue();
    assert.equal(await depth(), 0);
  });

  it('GET /openapi.json is OpenAPI 3.1.0 and documents exactly the routes the router serves', async () => {
    const response = await app.call('GET', '/openapi.json');
    assert.equal(response.status, 200);
    assert.equal(response.body.openapi, '3.1.0');
    const koa = createTrailwireApp(app.trailwire, { logger: pino({ level: 'silent' }) });
    const mounted = mountedRoutes(koa);
    // The walk must see the whole service, or the comparison proves nothing.
    assert.ok(mounted.size >= 19, `only ${[...mounted].join(', ')}`);
    for (const route of ['GET /api/v1/fleets/{fleet}', 'PUT /api/v1/customers/rotate', 'GET /.well-known/jwks.json', 'GET /openapi.json'])
      assert.ok(mounted.has(route), route);
    assert.deepEqual([...documentedRoutes(response.body)].sort(), [...mounted].sort());

    // Each read operation documents its problems, and every path parameter is declared.
    for (const [path, item] of Object.entries(response.body.paths as Record<string, Record<string, any>>)) {
      for (const operation of Object.values(item)) {
        const declared = (operation.parameters ?? []).filter((p: { in: string }) => p.in === 'path').map((p: { name: string }) => p.name);
        const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]);
        assert.deepEqual(declared.sort(), inPath.sort(), path);
        if (path.startsWith('/api/v1/') && !path.endsWith('/authenticate'))
          for (const status of ['401', '403', '429']) assert.ok(operation.responses[status], `${path} documents ${status}`);
      }
    }
    assert.deepEqual(response.body.components.schemas.Problem.required, ['type', 'title', 'status', 'detail']);
  });

  it('an app mounting one API serves and documents only that one', async () => {
    for (const [options, present, absent] of [
      [{ data: false }, '/api/v1/customers/authenticate', '/api/v1/fleets'],
      [{ auth: false }, '/api/v1/fleets', '/api/v1/customers/authenticate'],
    ] as [TrailwireAppOptions, string, string][]) {
      const served = await serveTrailwire(app.trailwire, options);
      try {
        const document = (await served.call('GET', '/openapi.json')).body;
        assert.ok(document.paths[present], present);
        assert.equal(document.paths[absent], undefined, absent);
        const koa = createTrailwireApp(app.trailwire, { logger: pino({ level: 'silent' }), ...options });
        assert.deepEqual([...documentedRoutes(document)].sort(), [...mountedRoutes(koa)].sort());
        const method = absent.endsWith('authenticate') ? 'POST' : 'GET';
        assertProblem(await served.call(method, absent), 404);
        assert.equal((await served.call('GET', '/healthz')).status, 200);
      } finally {
        await served.close();
      }
    }
  });

  it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
    const kept = await app.call('GET', '/healthz', { headers: { 'x-request-id': 'edge-7f3a.42:retry_1' } });
    assert.equal(kept.headers.get('x-request-id'), 'edge-7f3a.42:retry_1');
    const generated = await app.call('GET', '/healthz');
    assert.match(generated.headers.get('x-request-id') ?? '', UUID);
    assert.notEqual(generated.headers.get('x-request-id'), (await app.call('GET', '/healthz')).headers.get('x-request-id'));
    for (const garbage of ['has spaces', '<script>alert(1)</script>', 'x'.repeat(65), 'a"b', '']) {
      const replaced = await app.call('GET', '/healthz', { headers: { 'x-request-id': garbage } });
      assert.match(replaced.headers.get('x-request-id') ?? '', UUID, JSON.stringify(garbage));
    }
    // A problem body carries the same id as the header.
    const problem = await app.call('GET', '/api/v1/fleets', { headers: { 'x-request-id': 'ticket-123' } });
    assertProblem(problem, 401);
    assert.equal(problem.headers.get('x-request-id'), 'ticket-123');
    assert.equal(problem.body.requestId, 'ticket-123');
  });

  it('answers an unknown path with a 404 problem and a wrong method with a 405 problem and Allow', async () => {
    for (const path of ['/nope', '/api/v1', '/api/v2/fleets', '/api/v1/trailers/telemetry/gps/']) {
      const response = await app.call('GET', path);
      assertProblem(response, 404);
      assert.equal(response.body.type, 'https://trailwire.dev/problems/not-found');
      assert.ok(response.headers.get('x-request-id'));
    }
    // A method the router does not know, on a path it does not know: still no such resource.
    const unknownBoth = await app.call('PROPFIND', '/nope');
    assertProblem(unknownBoth, 404);
    assert.equal(unknownBoth.headers.get('allow'), null);
    for (const [method, path, allowed] of [
      ['POST', '/api/v1/fleets', 'GET'],
      ['DELETE', '/api/v1/trailers/abc', 'GET'],
      ['GET', '/api/v1/customers/authenticate', 'POST'],
      ['POST', '/api/v1/partners/rotate', 'PUT'],
      ['PUT', '/healthz', 'GET'],
      ['PROPFIND', '/api/v1/fleets', 'GET'],
      // Intake paths, the busiest, answer a wrong method as every other route does.
      ['PUT', '/api/v1/telemetry/intake/1HGCM82633A004352', 'POST'],
      ['DELETE', '/api/v1/telemetry/intake/status/abc', 'GET'],
    ] as const) {
      const response = await app.call(method, path);
      assertProblem(response, 405);
      assert.equal(response.body.type, 'https://trailwire.dev/problems/method-not-allowed');
      const allow = (response.headers.get('allow') ?? '').split(/,\s*/);
      assert.ok(allow.includes(allowed), `${method} ${path}: Allow ${allow}`);
      assert.ok(!allow.includes(method), `${method} ${path}: Allow ${allow}`);
      assert.equal(new Set(allow).size, allow.length, `${method} ${path}: no method twice in Allow ${allow}`);
    }
  });
});

describe('failures', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-ops-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** A Trailwire over a real store whose `listFleets` throws like a broken database would. */
  async function withFailingStore(): Promise<{ trailwire: Trailwire; store: TrailwireStore }> {
    const real = await openSqliteStore({ file: join(dir, `failing-${Date.now()}-${Math.random()}.db`) });
    const store = new Proxy(real, {
      get(target, property) {
        if (property === 'listFleets')
          return async () => {
            const error = new Error('SQLITE_CORRUPT: database disk image is malformed (SELECT * FROM fleets WHERE customer_id = ?)');
            Object.assign(error, { code: 'SQLITE_CORRUPT', file: '/srv/trailwire/data/trailwire.db' });
            throw error;
          };
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const trailwire = await createTrailwire({ store, clock: new ManualClock(Date.UTC(2026, 5, 1, 12)) });
    return { trailwire, store };
  }

  it('an unexpected error is a 500 problem with the request id and no internals; the log has them', async () => {
    const { trailwire } = await withFailingStore();
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const served = await serveTrailwire(trailwire, { logger });
    try {
      const { principal } = await trailwire.auth.createCustomer({ name: 'Unlucky' });
      const token = await mintToken(trailwire, 'customers', principal.id);
      for (const headers of [{}, { 'x-request-id': 'support-ticket-42' }] as Record<string, string>[]) {
        const response = await served.call('GET', '/api/v1/fleets', { token, headers });
        assertProblem(response, 500);
        assert.equal(response.body.type, 'https://trailwire.dev/problems/internal');
        const requestId = response.headers.get('x-request-id');
        assert.ok(requestId);
        if ('x-request-id' in headers) assert.equal(requestId, 'support-ticket-42');
        assert.equal(response.body.requestId, requestId);
        assert.deepEqual(Object.keys(response.body).sort(), ['detail', 'requestId', 'status', 'title', 'type']);
        const text = JSON.stringify(response.body);
        for (const secret of ['SQLITE', 'SELECT', 'trailwire.db', 'malformed', 'at ', '.ts'])
          assert.ok(!text.includes(secret), `the body reveals ${secret}: ${text}`);
        for (const [name, value] of response.headers) assert.ok(!/SQLITE|SELECT/.test(value), `header ${name} reveals internals`);

        const logged = lines.map((line) => JSON.parse(line)).find((entry) => entry.requestId === requestId);
        assert.ok(logged, 'the error is logged under the request id');
        assert.match(logged.err.message, /SQLITE_CORRUPT/);
        assert.match(logged.err.stack, /Error: SQLITE_CORRUPT/);
      }
      // Only the broken call fails; the rest of the service answers.
      assert.equal((await served.call('GET', '/api/v1/cargosafe', { token })).status, 200);
    } finally {
      await served.close();
      await trailwire.close();
    }
  });

  it('/readyz is a 503 problem once the store is closed', async () => {
    const { trailwire } = await withFailingStore();
    const served = await serveTrailwire(trailwire);
    try {
      assert.equal((await served.call('GET', '/readyz')).status, 200);
      await trailwire.store.close();
      const response = await served.call('GET', '/readyz');
      assertProblem(response, 503);
      assert.equal(response.body.type, 'https://trailwire.dev/problems/unavailable');
      assert.match(response.body.detail, /store/);
      assert.match(response.headers.get('retry-after') ?? '', /^[1-9]\d*$/, 'every 503 says when to come back');
      assert.equal((await served.call('GET', '/healthz')).status, 200, 'the process itself is still up');
    } finally {
      await served.close();
      await trailwire.close();
    }
  });

  it('/readyz names a failing readiness check of another part', async () => {
    const { trailwire } = await withFailingStore();
    const served = await serveTrailwire(trailwire, {
      readinessChecks: {
        queue: async () => {
          throw new Error('queue stopped');
        },
      },
    });
    try {
      const response = await served.call('GET', '/readyz');
      assertProblem(response, 503);
      assert.equal(response.body.detail, 'Not ready: queue.');
    } finally {
      await served.close();
      await trailwire.close();
    }
  });
});
