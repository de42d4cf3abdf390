/**
 * Late registration and grants (issue 37, item 4): any partner may send to a VIN nobody registered,
 * and the store does not record which one did. With grants in force for the fleet's customer (it
 * granted partners, or `requireGrants`), registering such a VIN is refused — saying what intake
 * holds for it — unless the operator asks to adopt it; without grants it is adopted, and the
 * registration says how much it took over.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { TrailwireError } from '../../core/errors.ts';
import { createTrailwire, type Trailwire } from '../../core/trailwire.ts';
import { withCheckDigit } from '../../core/vin.ts';

const AT = Date.UTC(2026, 10, 28, 12);
let vins = 0;
const nextVin = () => withCheckDigit(`1TWAD${String(++vins).padStart(12, '0')}`);

/** A core over an in-memory store, a customer with a fleet, and a partner that customer may or may not grant. */
async function setup(options: { requireGrants?: boolean } = {}) {
  const store = await openSqliteStore({ file: ':memory:' });
  const trailwire = await createTrailwire({ store, worker: false, clock: { now: () => AT }, partnerIntake: { requireGrants: options.requireGrants ?? false } });
  const { principal: customer } = await trailwire.auth.createCustomer({ name: 'Acme' });
  const { principal: partner } = await trailwire.auth.createPartner({ name: 'Geo', product: 'gps-basic' });
  const fleet = await trailwire.admin.createFleet({ customerId: customer.id, name: 'Reefers' });
  return { store, trailwire, customer, partner, fleet };
}

/** What a partner's intake leaves for an unregistered VIN: the foreign fix of the issue (0,0 at 399 km/h) and a device. */
async function sentBeforeRegistration(trailwire: Trailwire, vin: string): Promise<void> {
  await trailwire.store.applyTelemetry({
    vin,
    at: AT,
    telemetry: {
      gps: [{ timestamp: AT - 60_000, lat: 0, long: 0, speed: 399, heading: 'N' }],
      devices: [{ kind: 'tpms', serial: 'X1', position: 'axle1-left-outer', timestamp: AT - 60_000, metrics: { pressurePsi: 100 }, state: { isWarning: false, isFault: false } }],
      cargosafe: [],
    },
  });
}

const refusal = (error: unknown) =>
  error instanceof TrailwireError && error.code === 'conflict' && /1 GPS fix, 1 device/.test(error.message) && /--adopt-unassigned-data/.test(error.message);

describe('AdminService.registerTrailer and what intake stored before it', () => {
  it('with requireGrants, refuses to adopt a VIN holding data, leaving it unassigned; adopts it when asked, saying how much', async () => {
    const { trailwire, fleet } = await setup({ requireGrants: true });
    try {
      const vin = nextVin();
      await sentBeforeRegistration(trailwire, vin);
      await assert.rejects(trailwire.admin.registerTrailer({ fleetId: fleet.id, vin }), refusal);
      assert.equal((await trailwire.store.findTrailerByVin(vin))?.fleetId, null, 'still unassigned: the customer sees none of it');

      const adopted = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, adoptUnassignedData: true });
      assert.equal(adopted.fleetId, fleet.id);
      assert.deepEqual(adopted.adopted, { gpsFixes: 1, devices: 1, lastSeenAt: AT - 60_000 });
    } finally {
      await trailwire.close();
    }
  });

  it('a customer that granted partners is held to its grants even without requireGrants', async () => {
    const { trailwire, fleet, customer, partner } = await setup();
    try {
      await trailwire.admin.addGrant({ customerId: customer.id, partnerId: partner.id });
      const vin = nextVin();
      await sentBeforeRegistration(trailwire, vin);
      await assert.rejects(trailwire.admin.registerTrailer({ fleetId: fleet.id, vin }), refusal);
    } finally {
      await trailwire.close();
    }
  });

  it('without grants in force, adopts what intake stored and says so; a VIN intake never met adopts nothing', async () => {
    const { trailwire, fleet } = await setup();
    try {
      const vin = nextVin();
      await sentBeforeRegistration(trailwire, vin);
      assert.deepEqual((await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin })).adopted, { gpsFixes: 1, devices: 1, lastSeenAt: AT - 60_000 });
      assert.deepEqual((await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: nextVin() })).adopted, { gpsFixes: 0, devices: 0, lastSeenAt: null });
    } finally {
      await trailwire.close();
    }
  });

  it('with requireGrants, a VIN intake met but holding no data is registered as any other', async () => {
    const { trailwire, fleet } = await setup({ requireGrants: true });
    try {
      const vin = nextVin();
      await trailwire.store.applyTelemetry({ vin, at: AT, telemetry: { gps: [], devices: [], cargosafe: [] } });
      assert.equal((await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin })).fleetId, fleet.id);
    } finally {
      await trailwire.close();
    }
  });
});
