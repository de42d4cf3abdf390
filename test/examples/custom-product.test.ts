/**
 * examples/custom-product works as docs/writing-a-product.md says: it passes the product conformance
 * suite from `trailwire/testing`, loads by path next to the built-in products, and goes through a
 * server end to end — a partner key for `product:reefer`, intake (202, a 400 naming the field, and
 * a 400 at `/reportedAt` for a report dated ahead of the server's clock), processing, and the reefer
 * device and the trailer status in the customer's read API. Like a user's test, it imports only the
 * package's public entries.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { createProductRegistry, loadProductModule } from 'trailwire/core';
import { builtInProducts } from 'trailwire/products';
import { startServer } from 'trailwire/server';
import { runProductConformance } from 'trailwire/testing';
import reefer from '../../examples/custom-product/index.ts';
import { call, eventually, REPO_ROOT } from './run-example.ts';

const report = { reeferId: 'RF-2231', reportedAt: '2026-01-01T12:00:00Z', setpointC: -18, returnAirC: -16.5, fuelPercent: 64 };
const VIN = '1HGCM82633A004352';

runProductConformance(reefer, {
  invalidPayloads: [
    { payload: { ...report, fuelPercent: 120 }, path: '/fuelPercent', why: 'a fuel level above 100 %' },
    { payload: { ...report, reportedAt: 'noon' }, path: '/reportedAt', why: 'not a date-time' },
    { payload: { ...report, reeferId: 'RF 2231' }, path: '/reeferId', why: 'a space in the id' },
  ],
});

describe('the custom product example', () => {
  const stateOf = (overrides: Partial<typeof report>) => reefer.transform(VIN, { ...report, ...overrides }, 0).devices[0]!.state;

  it('yields a reefer device reading whose state follows the drift from the setpoint and the fuel level', () => {
    assert.deepEqual(stateOf({}), { isWarning: false, isFault: false });
    assert.deepEqual(stateOf({ returnAirC: -15.9 }), { isWarning: true, isFault: false });
    assert.deepEqual(stateOf({ fuelPercent: 10 }), { isWarning: true, isFault: false });
    assert.deepEqual(stateOf({ returnAirC: -12.9, fuelPercent: 10 }), { isWarning: false, isFault: true });
  });

  it('loads by path as a server would, and installs next to the built-in products', async () => {
    const loaded = await loadProductModule('./examples/custom-product/index.ts', { cwd: REPO_ROOT });
    assert.equal(loaded, reefer, 'the same module instance');
    const registry = createProductRegistry([...builtInProducts, loaded], { limitOverrides: { reefer: { requests: 20 } } });
    assert.deepEqual(registry.list().map((p) => p.name), ['gps-basic', 'tpms', 'cargosafe', 'reefer']);
    assert.deepEqual(registry.limitOf('reefer'), { requests: 20, windowSeconds: 60 });
    assert.equal(registry.transform('reefer', VIN, report, 0).devices[0]!.kind, 'reefer');
  });

  it('goes through a server end to end: intake, processing, and the customer read API', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trailwire-reefer-'));
    const server = await startServer({
      db: join(dir, 'reefer.db'),
      port: 0,
      grpcPort: 0,
      productModules: [fileURLToPath(new URL('../../examples/custom-product/index.ts', import.meta.url))],
      logger: pino({ level: 'silent' }),
    });
    try {
      const { trailwire } = server;
      assert.deepEqual(trailwire.products.list().map((p) => p.name), ['gps-basic', 'tpms', 'cargosafe', 'reefer']);
      const customer = await trailwire.auth.createCustomer({ name: 'Cold Chain Co' });
      const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Reefers' });
      const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: VIN });
      const partner = await trailwire.auth.createPartner({ name: 'Reefer Telematics', product: 'reefer' });

      const partnerToken = (await call(`${server.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': partner.apiKey } })).body.access_token;
      const send = (payload: unknown) =>
        call(`${server.url}/api/v1/telemetry/intake/${VIN}`, { method: 'POST', headers: { authorization: `Bearer ${partnerToken}` }, json: payload });

      const refused = await send({ ...report, fuelPercent: 120 });
      assert.equal(refused.status, 400);
      assert.ok(refused.body.errors.some((e: { path: string }) => e.path === '/fuelPercent'), JSON.stringify(refused.body));
      const ahead = await send({ ...report, reportedAt: new Date(Date.now() + 3_600_000).toISOString() });
      assert.equal(ahead.status, 400, 'a report dated an hour ahead');
      assert.deepEqual(ahead.body.errors.map((e: { path: string }) => e.path), ['/reportedAt']);

      // 2.5 °C off the setpoint: a warning.
      const accepted = await send({ ...report, returnAirC: -15.5 });
      assert.equal(accepted.status, 202);
      assert.equal(accepted.headers.get('ratelimit-limit'), '12', "the product's own limit");
      const status = await eventually(async () => {
        const body = (await call(server.url + accepted.headers.get('location'), { headers: { authorization: `Bearer ${partnerToken}` } })).body;
        assert.notEqual(body.status, 'failed', body.error);
        return body.status === 'processed' ? body : undefined;
      });
      assert.equal(status.product, 'reefer');

      const customerToken = (await call(`${server.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': customer.apiKey } })).body.access_token;
      const auth = { authorization: `Bearer ${customerToken}` };
      const devices = (await call(`${server.url}/api/v1/devices/${trailer.id}`, { headers: auth })).body.data;
      assert.equal(devices.length, 1);
      assert.equal(devices[0].kind, 'reefer');
      assert.equal(devices[0].serial, 'RF-2231');
      const readings = (await call(`${server.url}/api/v1/devices/telemetry/${devices[0].id}?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`, { headers: auth })).body.data;
      assert.deepEqual(readings.map((r: { metrics: unknown }) => r.metrics), [{ setpointC: -18, returnAirC: -15.5, fuelPercent: 64 }]);
      const read = (await call(`${server.url}/api/v1/trailers/${trailer.id}`, { headers: auth })).body;
      assert.deepEqual(read.status, { name: 'Warning', isWarning: true, isFault: false });
      assert.equal(read.warningDevices, 1);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
