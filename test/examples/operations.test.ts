/**
 * docs/operations.md's online backup works as written: its `node -e` script, taken from the guide,
 * copies the file of a running server (recent commits still in the WAL included), and a core opened
 * on the copy has the customer's key, the fleet and the processed fix.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { it } from 'node:test';
import { pino } from 'pino';
import { createTrailwire } from 'trailwire/core';
import { startServer } from 'trailwire/server';
import { openSqliteStore } from 'trailwire/sqlite';
import { call, eventually, REPO_ROOT } from './run-example.ts';

const guide = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');

it('the backup script of docs/operations.md copies a running server’s file consistently', { timeout: 30_000 }, async () => {
  const script = /node -e "([^"]*\.backup\([^"]*)"/.exec(guide)?.[1];
  assert.ok(script, 'the guide has a node -e backup script');
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-backup-'));
  const db = join(dir, 'trailwire.db');
  const server = await startServer({ db, port: 0, grpcPort: 0, logger: pino({ level: 'silent' }) });
  try {
    const { trailwire } = server;
    const customer = await trailwire.auth.createCustomer({ name: 'Backed Up Co' });
    const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: 'Fleet' });
    const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: '1HGCM82633A004352' });
    const partner = await trailwire.auth.createPartner({ name: 'GPS', product: 'gps-basic' });
    const token = (await call(`${server.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': partner.apiKey } })).body.access_token;
    const accepted = await call(`${server.url}/api/v1/telemetry/intake/1HGCM82633A004352`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      json: { timestamp: 1780315200, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 },
    });
    assert.equal(accepted.status, 202);
    await eventually(async () => ((await trailwire.store.findTrailerByVin('1HGCM82633A004352'))?.telemetry ? true : undefined));

    const backup = join(dir, 'backup.db');
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', script, db, backup], { cwd: REPO_ROOT });
    assert.equal(stdout.trim(), 'backed up');

    const restored = await createTrailwire({ store: await openSqliteStore({ file: backup }) });
    try {
      const authenticated = await restored.auth.authenticate('customers', customer.apiKey, 'test');
      assert.ok(authenticated.token.accessToken, 'the customer key authenticates against the copy');
      const copy = await restored.store.findTrailerByVin('1HGCM82633A004352');
      assert.equal(copy?.id, trailer.id);
      assert.equal(copy?.fleetId, fleet.id);
      assert.deepEqual(copy?.telemetry, { timestamp: 1780315200_000, lat: 41.88, long: -87.63, speed: 55, heading: 'W' });
    } finally {
      await restored.close();
    }
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
