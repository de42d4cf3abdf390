/**
 * A server in `power` durability: its 202s wait for the intake journal's fdatasync, and a burst of concurrent payloads, several per VIN, is
 * acknowledged, processed and readable, as in `process` durability.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../../adapters/server/index.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { assertAllProcessed } from '../../support/intake-status.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-power-'));
after(() => rmSync(directory, { recursive: true, force: true }));

it('acknowledges a concurrent burst after syncing it, and processes every payload', { timeout: 30_000 }, async () => {
  const server = await startServer({ db: join(directory, 'power.db'), durability: 'power', port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
  try {
    const partner = await server.trailwire.auth.createPartner({ name: 'Power Co', product: 'gps-basic' });
    const token = (await server.trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const ids = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const vin = withCheckDigit(`1PWRTEST${String(i % 6).padStart(9, '0')}`);
        const response = await fetch(`${server.url}/api/v1/telemetry/intake/${vin}`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ timestamp: 1767268800 + i, position: { latitude: 41, longitude: -87 }, speedKph: 80, bearingDeg: 10 }),
        });
        assert.equal(response.status, 202);
        return ((await response.json()) as { id: string }).id;
      }),
    );
    await assertAllProcessed(server.url, token, ids, 20_000);
  } finally {
    await server.close();
  }
});
