/**
 * docs/writing-a-product.md works as written. The guide's `axle-load` module (§2) and its test (§5)
 * are taken verbatim from the guide's code blocks into a scratch folder inside the package (so that
 * `trailwire/...` resolves as it does for the guide's reader), the guide's test runs, and the product
 * is installed on a server as §6 says and driven through the calls of §7, checking what the guide
 * shows them answering. Edit the guide and this test follows.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Product } from 'trailwire/core';
import { startServer } from 'trailwire/server';
import { call, eventually } from './run-example.ts';

const guide = readFileSync(new URL('../../docs/writing-a-product.md', import.meta.url), 'utf8');
const blocks = (language: string) => [...guide.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1]!);
const only = (language: string, marker: string): string => {
  const found = blocks(language).filter((block) => block.includes(marker));
  assert.equal(found.length, 1, `exactly one ${language} block of the guide contains ${JSON.stringify(marker)}`);
  return found[0]!;
};

// The scratch folder is inside the package (self-reference needs that) and named so that no test
// runner or later glob picks its files up; it is removed when the suite ends.
const scratch = new URL(`./.guide-${process.pid}-${Date.now()}/`, import.meta.url);
mkdirSync(new URL('products/axle-load/', scratch), { recursive: true });
after(() => rmSync(scratch, { recursive: true, force: true }));
const modulePath = new URL('products/axle-load/index.ts', scratch);
writeFileSync(modulePath, only('ts', 'export default defineProduct<AxleLoadPayload>'));
// §5's test file, as the reader saves it next to the module (its imports are relative to it).
writeFileSync(new URL('products/axle-load/axle-load.guide-test.ts', scratch), only('ts', 'runProductConformance(axleLoad'));

const axleLoad = ((await import(modulePath.href)) as { default: Product }).default;
await import(new URL('products/axle-load/axle-load.guide-test.ts', scratch).href);

describe('docs/writing-a-product.md, end to end', () => {
  it('§6 installs the product and §7 answers as the guide shows', { timeout: 30_000 }, async () => {
    const install = only('ts', 'productModules:');
    const limits = /core: \{ productLimits: (\{.*\}) \}/.exec(install)?.[1];
    assert.equal(limits, "{ 'axle-load': { requests: 60 } }", 'the override this test applies is the guide’s');
    const intake = only('sh', '/api/v1/telemetry/intake/1HGCM82633A004352');
    const body = /-d '(\{.*\})'/.exec(intake)?.[1];
    assert.ok(body, 'the guide sends a JSON body');
    const vin = '1HGCM82633A004352';

    const dir = mkdtempSync(join(tmpdir(), 'trailwire-guide-'));
    const server = await startServer({
      db: join(dir, 'trailwire.db'),
      port: 0,
      grpcPort: 0,
      logger: pino({ level: 'silent' }),
      productModules: [modulePath.pathname],
      core: { productLimits: { 'axle-load': { requests: 60 } } },
    });
    try {
      const { trailwire } = server;
      assert.equal(trailwire.products.list().at(-1), axleLoad, 'the module the guide wrote, loaded by path');
      const { apiKey } = await trailwire.auth.createPartner({ name: 'Scale Co', product: 'axle-load' });
      const customer = await trailwire.auth.createCustomer({ name: 'Haulage Co' });
      const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Flatbeds' });
      const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });

      const partnerToken = (await call(`${server.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } })).body.access_token;
      const send = (json: unknown) => call(`${server.url}/api/v1/telemetry/intake/${vin}`, { method: 'POST', headers: { authorization: `Bearer ${partnerToken}` }, json });
      const accepted = await send(JSON.parse(body));
      assert.equal(accepted.status, 202);
      assert.equal(accepted.body.status, 'queued');
      assert.equal(accepted.headers.get('location'), `/api/v1/telemetry/intake/status/${accepted.body.id}`);
      assert.equal(accepted.headers.get('ratelimit-limit'), '60');
      const status = await eventually(async () => {
        const answer = (await call(server.url + accepted.headers.get('location'), { headers: { authorization: `Bearer ${partnerToken}` } })).body;
        assert.notEqual(answer.status, 'failed', answer.error);
        return answer.status === 'processed' ? answer : undefined;
      });
      assert.equal(status.product, 'axle-load');

      const refused = await send({ ...JSON.parse(body), axles: [{ axle: 1, loadKg: 25000 }] });
      assert.equal(refused.status, 400);
      assert.deepEqual(refused.body.errors, [{ path: '/axles/0/loadKg', message: 'must be at most 20000' }]);

      const token = (await call(`${server.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': customer.apiKey } })).body.access_token;
      const auth = { authorization: `Bearer ${token}` };
      const devices = (await call(`${server.url}/api/v1/devices/${trailer.id}`, { headers: auth })).body.data;
      assert.equal(devices.length, 1);
      const [device] = devices;
      assert.deepEqual(
        { kind: device.kind, serial: device.serial, position: device.position, status: device.status, lastSeen: device.lastSeen },
        { kind: 'axle-load', serial: 'SC-1/1', position: 'axle-1', status: { name: 'Warning', isWarning: true, isFault: false }, lastSeen: '2026-01-01T12:00:00.000Z' },
      );
      // The guide's rule: inactive once the latest reading is more than 7 days in the past.
      assert.equal(device.active, Date.parse('2026-01-01T12:00:00Z') >= Date.now() - 7 * 86_400_000);
      const readings = (await call(`${server.url}/api/v1/devices/telemetry/${device.id}?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`, { headers: auth })).body.data;
      assert.deepEqual(readings.map((r: { timestamp: string; metrics: unknown }) => [r.timestamp, r.metrics]), [['2026-01-01T12:00:00.000Z', { loadKg: 9500 }]]);
      const read = (await call(`${server.url}/api/v1/trailers/${trailer.id}`, { headers: auth })).body;
      assert.deepEqual(read.status, { name: 'Warning', isWarning: true, isFault: false });
      assert.equal(read.warningDevices, 1);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
