/**
 * examples/embed-express and examples/embed-fastify run as their READMEs say: the host app keeps its
 * own route, body parsing, auth and error format; Trailwire answers under /fleet-api — mounted with
 * `app.use('/fleet-api', handler)` in Express, which gives it its prefix through `req.originalUrl`,
 * and handed its requests by an `onRequest` hook in Fastify, which names the prefix — with intake to
 * processed, reads, live events, OpenAPI and the map (`under-prefix.ts`); the LiveFeed answers on the
 * printed port; SIGTERM ends the process cleanly.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { call, firstHeartbeat, startExample } from './run-example.ts';
import { assertTrailwireUnderPrefix } from './under-prefix.ts';

const VIN = '1HGCM82633A004352';

for (const [name, host] of [
  ['embed-express', 'Express'],
  ['embed-fastify', 'Fastify'],
] as const)
  it(`examples/${name} serves the host app and Trailwire under /fleet-api, as its README says`, { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), `trailwire-${name}-`));
    const example = await startExample(name, { TRAILWIRE_DB: join(dir, 'dispatch.db'), DISPATCH_KEY: 'k', LOG_LEVEL: 'warn', PORT: '0', GRPC_PORT: '0' }, /^\s+livefeed\s/);
    try {
      assert.equal(example.lines[0], `Dispatch (${host}) is running`);
      const base = /^\s+http\s+(http:\/\/127\.0\.0\.1:\d+)\s+\(Trailwire under \/fleet-api\)$/.exec(example.lines[1] ?? '')?.[1];
      const livefeed = /^\s+livefeed\s+(127\.0\.0\.1:\d+)$/.exec(example.lines[2] ?? '')?.[1];
      assert.ok(base && livefeed, example.lines.join('\n'));

      // The host's own routes, its key and its error format.
      assert.deepEqual((await call(`${base}/health`)).body, { status: 'ok' });
      const onboard = (key: string) =>
        call(`${base}/dispatch/onboard`, { method: 'POST', headers: { 'x-dispatch-key': key }, json: { customer: 'Acme Freight', fleet: 'Reefers', vin: VIN, partner: 'Tracker Co', product: 'gps-basic' } });
      assert.deepEqual((await onboard('wrong')).body, { error: 'X-Dispatch-Key required' });
      const onboarded = await onboard('k');
      assert.equal(onboarded.status, 201, JSON.stringify(onboarded.body));

      const { customerToken } = await assertTrailwireUnderPrefix(base, '/fleet-api', VIN, onboarded.body);
      const outside = await call(`${base}/api/v1/fleets`);
      assert.equal(outside.status, 404, 'Trailwire answers only under its prefix');
      assert.doesNotMatch(outside.headers.get('content-type') ?? '', /problem/);
      await firstHeartbeat(livefeed, customerToken);
      assert.equal(await example.stop('SIGTERM'), 0, example.stderr());
    } finally {
      await example.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
