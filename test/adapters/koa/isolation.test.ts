/**
 * Customer isolation over HTTP (contract 5, issue "Bad input"): customer B, with data of its own,
 * sees nothing of customer A through any read endpoint — A's records answer exactly like records
 * that do not exist — and trailers that intake created for unknown VINs are visible to nobody until
 * the operator assigns them.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  applyTelemetry,
  assertProblem,
  cargosafeReading,
  gpsFix,
  seedFleet,
  tpmsReading,
  uniqueVin,
  type SeededFleet,
} from '../../support/fixtures.ts';
import { customerWithToken, startTestApp, type CallResult, type TestApp } from '../../support/test-app.ts';

const MINUTE = 60_000;

/** Every by-id endpoint of the read API, addressed at the records of `seeded`. */
function addressedPaths(seeded: SeededFleet): string[] {
  const paths = [`/api/v1/fleets/${seeded.fleet.id}`, `/api/v1/trailers/${seeded.fleet.id}`];
  for (const { trailer, deviceIds, cargosafeIds } of seeded.trailers) {
    paths.push(
      `/api/v1/trailers/${trailer.id}`,
      `/api/v1/trailers/telemetry/gps/${trailer.id}`,
      `/api/v1/devices/${trailer.id}`,
    );
    for (const device of deviceIds) paths.push(`/api/v1/devices/details/${device}`, `/api/v1/devices/telemetry/${device}`);
    for (const unit of cargosafeIds) paths.push(`/api/v1/cargosafe/${unit}`, `/api/v1/cargosafe/telemetry/${unit}`);
  }
  return paths;
}

/** The same path with its id replaced by one that exists nowhere (same kind: digits stay digits). */
function withUnknownId(path: string): string {
  const id = path.slice(path.lastIndexOf('/') + 1);
  return path.slice(0, -id.length) + (/^\d+$/.test(id) ? '2000000000' : randomUUID());
}

/** Every id-like value in a response body, however deep. */
function idsIn(body: unknown): Set<string> {
  const found = new Set<string>();
  const visit = (value: unknown) => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (value && typeof value === 'object') {
      for (const [key, inner] of Object.entries(value)) {
        if ((key === 'id' || (key.endsWith('Id') && key !== 'requestId')) && inner !== null) found.add(String(inner));
        visit(inner);
      }
    }
  };
  visit(body);
  return found;
}

describe('customer isolation', () => {
  let app: TestApp;
  let alice: { id: string; apiKey: string; token: string };
  let bob: { id: string; apiKey: string; token: string };
  let aliceFleet: SeededFleet;
  let bobFleet: SeededFleet;
  const as = (who: { token: string }) => (path: string) => app.call('GET', path, { token: who.token });

  before(async () => {
    app = await startTestApp();
    alice = await customerWithToken(app, 'Alice Haulage');
    bob = await customerWithToken(app, 'Bob Freight');
    aliceFleet = await seedFleet(app.trailwire, alice.id, { name: 'Alice fleet', trailers: 2 });
    bobFleet = await seedFleet(app.trailwire, bob.id, { name: 'Bob fleet', trailers: 2 });
  });
  after(() => app.close());

  it('each customer reaches every one of its own records', async () => {
    for (const [who, seeded] of [
      [alice, aliceFleet],
      [bob, bobFleet],
    ] as const) {
      for (const path of addressedPaths(seeded)) assert.equal((await as(who)(path)).status, 200, path);
    }
  });

  it('B gets 404 for every one of A\'s fleets, trailers, devices, cargosafe units and telemetry, like for ids that do not exist', async () => {
    for (const path of addressedPaths(aliceFleet)) {
      const response = await as(bob)(path);
      assertProblem(response, 404);
      const unknownPath = withUnknownId(path);
      const missing = await as(bob)(unknownPath);
      assertProblem(missing, 404);
      // Indistinguishable from a record that does not exist, but for the id echoed in the detail.
      const idOf = (p: string) => p.slice(p.lastIndexOf('/') + 1);
      assert.equal(response.body.type, missing.body.type, path);
      assert.equal(response.body.detail.replace(idOf(path), '<id>'), missing.body.detail.replace(idOf(unknownPath), '<id>'), path);
      assert.equal(idsIn(response.body).size, 0);
    }
  });

  it('B gets 404, not 400 or data, for A\'s records with any query parameters', async () => {
    const [trailer] = aliceFleet.trailers;
    for (const path of [
      `/api/v1/trailers/${aliceFleet.fleet.id}?take=500&activeOnly=true`,
      `/api/v1/trailers/${aliceFleet.fleet.id}?take=0`,
      `/api/v1/devices/${trailer!.trailer.id}?activeOnly=maybe`,
      `/api/v1/trailers/telemetry/gps/${trailer!.trailer.id}?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z&take=500`,
      `/api/v1/devices/telemetry/${trailer!.deviceIds[0]}?from=2000-01-01T00:00:00Z&to=2100-01-01T00:00:00Z`,
      `/api/v1/cargosafe/telemetry/${trailer!.cargosafeIds[0]}?from=bogus`,
    ]) {
      assertProblem(await as(bob)(path), 404);
    }
  });

  it('A\'s records never appear in B\'s lists', async () => {
    const aliceIds = new Set<string>([String(aliceFleet.fleet.id)]);
    for (const { trailer, deviceIds, cargosafeIds } of aliceFleet.trailers) {
      [trailer.id, ...deviceIds, ...cargosafeIds].forEach((id) => aliceIds.add(id));
    }
    const bobLists = ['/api/v1/fleets?take=500', '/api/v1/cargosafe?take=500', `/api/v1/trailers/${bobFleet.fleet.id}?take=500`];
    for (const { trailer } of bobFleet.trailers) bobLists.push(`/api/v1/devices/${trailer.id}?take=500`);
    for (const path of bobLists) {
      const response = await as(bob)(path);
      assert.equal(response.status, 200);
      assert.ok(response.body.data.length > 0, `${path} lists B's own records`);
      for (const id of idsIn(response.body)) assert.ok(!aliceIds.has(id), `${path} leaks ${id}`);
    }
    assert.deepEqual(
      (await as(bob)('/api/v1/fleets')).body.data.map((fleet: { id: number }) => fleet.id),
      [bobFleet.fleet.id],
    );
    assert.deepEqual(
      (await as(bob)('/api/v1/cargosafe')).body.data.map((unit: { id: string }) => unit.id).sort(),
      bobFleet.trailers.flatMap((trailer) => trailer.cargosafeIds).sort(),
    );
  });

  it('A\'s paging token is not a token of B\'s list', async () => {
    // Enough fleets and units for Alice to get a next token.
    await app.trailwire.admin.createFleet({ customerId: alice.id, name: 'Alice spare' });
    const aliceFleetsNext = (await as(alice)('/api/v1/fleets?take=1')).body.next as string;
    const aliceUnitsNext = (await as(alice)('/api/v1/cargosafe?take=1')).body.next as string;
    assert.ok(aliceFleetsNext && aliceUnitsNext);
    assertProblem(await as(bob)(`/api/v1/fleets?take=1&next=${encodeURIComponent(aliceFleetsNext)}`), 400, '/next');
    assertProblem(await as(bob)(`/api/v1/cargosafe?take=1&next=${encodeURIComponent(aliceUnitsNext)}`), 400, '/next');
  });

  it('a trailer created for an unknown VIN is visible to nobody until the operator assigns it', async () => {
    const vin = uniqueVin();
    const now = app.clock.now();
    const unassigned = await applyTelemetry(app.trailwire, vin, {
      gps: [gpsFix(now - 2 * MINUTE), gpsFix(now - MINUTE)],
      devices: [tpmsReading('ORPHAN-TPMS', now - MINUTE, { isWarning: true, isFault: false })],
      cargosafe: [cargosafeReading('ORPHAN-CS', now - MINUTE)],
    });
    assert.equal(unassigned.fleetId, null);
    const devices = await app.trailwire.store.listDevices(alice.id, unassigned.id, { limit: 10, activeOnly: false, staleBefore: 0 });
    assert.deepEqual(devices, [], 'the store itself hides it from a customer');
    // Its device and unit ids are not known to any customer; look them up as the operator would.
    const db = (app.trailwire.store as unknown as { db: { prepare(sql: string): { get(...args: unknown[]): { id: string } } } }).db;
    const deviceId = db.prepare('SELECT id FROM devices WHERE trailer_id = ?').get(unassigned.id).id;
    const unitId = db.prepare('SELECT id FROM cargosafe_units WHERE trailer_id = ?').get(unassigned.id).id;
    const orphanPaths = [
      `/api/v1/trailers/${unassigned.id}`,
      `/api/v1/trailers/telemetry/gps/${unassigned.id}`,
      `/api/v1/devices/${unassigned.id}`,
      `/api/v1/devices/details/${deviceId}`,
      `/api/v1/devices/telemetry/${deviceId}`,
      `/api/v1/cargosafe/${unitId}`,
      `/api/v1/cargosafe/telemetry/${unitId}`,
    ];
    for (const who of [alice, bob]) {
      for (const path of orphanPaths) assertProblem(await as(who)(path), 404);
      const units: CallResult = await as(who)('/api/v1/cargosafe?take=500');
      assert.ok(!idsIn(units.body).has(unitId));
    }

    // Assigned to Alice's fleet, with its history; still nothing for Bob.
    const assigned = await app.trailwire.admin.registerTrailer({ fleetId: aliceFleet.fleet.id, vin, unitId: 'ADOPTED' });
    assert.equal(assigned.id, unassigned.id);
    for (const path of orphanPaths) {
      assert.equal((await as(alice)(path)).status, 200, path);
      assertProblem(await as(bob)(path), 404);
    }
    assert.equal((await as(alice)(`/api/v1/trailers/telemetry/gps/${unassigned.id}`)).body.data.length, 2);
    assert.equal((await as(alice)(`/api/v1/trailers/${unassigned.id}`)).body.status.name, 'Warning');
    assert.ok(idsIn((await as(alice)('/api/v1/cargosafe?take=500')).body).has(unitId), 'the unit joins its new owner\'s list');
    assert.ok(!idsIn((await as(bob)('/api/v1/cargosafe?take=500')).body).has(unitId));
    assert.ok(
      idsIn((await as(alice)(`/api/v1/trailers/${aliceFleet.fleet.id}?take=500`)).body).has(unassigned.id),
      'the trailer joins the fleet list',
    );
  });
});
