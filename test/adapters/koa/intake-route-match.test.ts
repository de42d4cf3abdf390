/**
 * The intake POST reaches its route without the router's dispatch (`intakePostDispatch` in app.ts):
 * what a partner relies on is that it matches exactly as the router's pattern
 * (`/api/v1/telemetry/intake/:VIN`) does — a percent-encoded VIN decoded, a trailing `/` taken, a
 * path below the VIN a 404, another method a 405 naming POST — under a prefix too, and that metrics
 * and the access log name the route's pattern, never the raw path.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { withCheckDigit } from '../../../core/vin.ts';
import { logLines } from '../../support/log-lines.ts';
import { startTestApp, type TestApp } from '../../support/test-app.ts';

const VIN = withCheckDigit('1MATCH0TST0000001');

for (const prefix of ['', '/fleet-api'])
  describe(`the intake POST's route${prefix ? ` under ${prefix}` : ''}`, () => {
    let app: TestApp;
    let token: string;
    let timestamp = 0;
    const { lines, stream } = logLines();

    before(async () => {
      app = await startTestApp({ app: { prefix, logger: pino({ level: 'info' }, stream), intakeRefusalDelayMs: 0 } });
      const { apiKey } = await app.trailwire.auth.createPartner({ name: 'Partner', product: 'gps-basic' });
      token = (await app.call('POST', `${prefix}/api/v1/partners/authenticate`, { apiKey })).body.access_token;
      timestamp = Math.floor(app.clock.now() / 1000) - 600;
    });
    after(() => app.close());

    const post = (path: string, method = 'POST') =>
      app.call(method, `${prefix}/api/v1/telemetry/intake/${path}`, {
        token,
        ...(method === 'POST' ? { body: { timestamp: timestamp++, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 } } : {}),
      });

    it('matches as the router pattern does', async () => {
      const encoded = `${VIN.slice(0, 16)}%${VIN.charCodeAt(16).toString(16)}`;
      for (const path of [VIN, encoded, `${VIN}/`]) assert.equal((await post(path)).status, 202, path);
      const below = await post(`${VIN}/more`);
      assert.equal(below.status, 404);
      assert.equal(below.headers.get('content-type'), 'application/problem+json');
      const get = await post(VIN, 'GET');
      assert.equal(get.status, 405);
      assert.equal(get.headers.get('allow'), 'POST');
      assert.equal((await post('%E0%A4%A', 'POST')).status, 400, 'malformed percent-encoding: a VIN the core refuses');
    });

    it('is counted and logged under the route pattern', async () => {
      const route = `${prefix}/api/v1/telemetry/intake/:VIN`;
      const accepted = lines.filter((line) => line.access === 'http' && line.status === 202);
      assert.ok(accepted.length >= 3);
      assert.ok(accepted.every((line) => line.route === route), JSON.stringify(accepted[0]));
      const metrics = await app.call('GET', `${prefix}/metrics`);
      assert.match(String(metrics.body), new RegExp(`trailwire_http_requests_total\\{method="POST",route="${route.replace(/\//g, '\\/')}",status="202"\\} [3-9]`));
    });
  });
