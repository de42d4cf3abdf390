/**
 * Operator changes on the LiveFeed (contract 8), with a real server and real gRPC streams: a device
 * deactivated, a trailer switched off, a trailer assigned to a fleet — made through the server's own
 * core and by a `trailwire` command in another process on the same SQLite file — each reaches the
 * owning customer's subscribers as a live update with the trailer's new state.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { startServer, type RunningServer } from '../../../adapters/server/index.ts';
import { subscribeLiveFeed, type LiveFeedSubscription, type LiveUpdate } from '../../../simulator/client/live-feed-client.ts';
import { REPO_ROOT, TS_LOADER } from '../../support/cli.ts';
import { applyTelemetry, mintToken, tpmsReading, uniqueVin } from '../../support/fixtures.ts';
import { until } from '../../support/until.ts';

const WARNING = { isWarning: true, isFault: false };

describe('LiveFeed: operator changes reach the subscribers', () => {
  let dir: string;
  let db: string;
  let server: RunningServer;
  let customerId: string;
  let fleetId: number;
  let updates: LiveUpdate[];
  let subscription: LiveFeedSubscription;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-operator-changes-'));
    db = join(dir, 'tw.db');
    server = await startServer({ db, port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }), core: { operatorChanges: { pollMs: 100 } } });
    customerId = (await server.trailwire.auth.createCustomer({ name: 'Operated Co' })).principal.id;
    fleetId = (await server.trailwire.admin.createFleet({ customerId, name: 'F' })).id;
    updates = [];
    let heartbeats = 0;
    subscription = subscribeLiveFeed(
      { target: `127.0.0.1:${server.grpcPort}`, token: () => mintToken(server.trailwire, 'customers', customerId) },
      { onUpdate: (update) => updates.push(update), onHeartbeat: () => heartbeats++ },
    );
    // The first heartbeat comes once the server has subscribed the stream to the hub.
    await until(() => heartbeats > 0, 'the first heartbeat');
  });
  after(async () => {
    subscription.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A trailer of the fleet with one warning tire sensor: status Warning. Answers it and the device id. */
  async function warningTrailer() {
    const vin = uniqueVin();
    const trailer = await server.trailwire.admin.registerTrailer({ fleetId, vin });
    await applyTelemetry(server.trailwire, vin, { devices: [tpmsReading('S-1', Date.now() - 60_000, WARNING)] });
    const devices = await server.trailwire.reads.listDevices(customerId, trailer.id, {});
    assert.equal((await server.trailwire.reads.getTrailer(customerId, trailer.id)).status.name, 'Warning');
    return { trailer, deviceId: devices.data[0]!.id };
  }

  const updatesOf = (trailerId: string) => updates.filter((update) => update.trailer.id === trailerId);

  it('a device deactivated through the server\'s core: the trailer turns OK on the stream', async () => {
    const { trailer, deviceId } = await warningTrailer();
    await server.trailwire.admin.setDeviceActive(deviceId, false);
    await until(() => updatesOf(trailer.id).some((update) => update.trailer.status?.name === 'OK'), 'an update with status OK');
    const last = updatesOf(trailer.id).at(-1)!;
    assert.equal(last.fleetId, fleetId);
    assert.equal(last.trailer.warningDevices, 0);
  });

  it('a device deactivated by `trailwire devices deactivate` in another process reaches the stream', async () => {
    const { trailer, deviceId } = await warningTrailer();
    const seen = updatesOf(trailer.id).length;
    await promisify(execFile)(process.execPath, [...TS_LOADER, 'bin/trailwire.ts', 'devices', 'deactivate', deviceId, '--db', db, '--json'], { cwd: REPO_ROOT });
    await until(() => updatesOf(trailer.id).slice(seen).some((update) => update.trailer.status?.name === 'OK'), 'a new update with status OK');
  });

  it('a trailer assigned to the fleet, and one switched off, by another process reach the stream', async () => {
    const vin = uniqueVin();
    // Intake met the VIN first: an unassigned trailer, visible to nobody.
    const unassigned = await applyTelemetry(server.trailwire, vin, { devices: [tpmsReading('S-9', Date.now() - 60_000)] });
    const cli = (...args: string[]) =>
      promisify(execFile)(process.execPath, [...TS_LOADER, 'bin/trailwire.ts', ...args, '--db', db, '--json'], { cwd: REPO_ROOT });
    await cli('trailers', 'create', '--fleet', String(fleetId), '--vin', vin);
    await until(() => updatesOf(unassigned.id).length > 0, 'an update of the trailer');
    assert.equal(updatesOf(unassigned.id)[0]!.fleetId, fleetId);
    const seen = updatesOf(unassigned.id).length;
    await cli('trailers', 'deactivate', unassigned.id);
    await until(() => updatesOf(unassigned.id).length > seen, 'a new update of the trailer');
  });
});
