/**
 * Issue 37's late registration under grants, for any store and intake: a partner sends a fix to a VIN
 * nobody has registered (202, as contract 4 allows), the operator then registers the VIN to a customer
 * that takes intake only from partners it granted and did not grant this one, and only then is the
 * payload processed. The fix must not reach the customer's trailer, GPS history or live state, and
 * the partner's status must say why; once the customer grants the partner, the operator's re-queue
 * processes it.
 */
import assert from 'node:assert/strict';
import type { AccessClaims } from '../../core/tokens.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { uniqueVin } from './fixtures.ts';

export interface LateRegistrationSetup {
  /** A core whose customers take intake only from partners they granted (`partnerIntake.requireGrants`), its intake not processing yet. */
  trailwire: Trailwire;
  /** Lets processing run until the payload `id` is processed or dead-lettered. */
  process(id: string): Promise<void>;
  /** The live updates published so far. */
  published(): readonly LiveTrailerEvent[];
}

export async function assertLateRegistrationRefused({ trailwire, process, published }: LateRegistrationSetup): Promise<void> {
  const { principal: partner } = await trailwire.auth.createPartner({ name: 'Stranger GPS', product: 'gps-basic' });
  const { principal: customer } = await trailwire.auth.createCustomer({ name: 'Strict' });
  const claims = { aud: 'partners', sub: partner.id, scope: 'product:gps-basic', ver: 1 } as unknown as AccessClaims;
  const vin = uniqueVin();
  const body = { timestamp: Math.floor(trailwire.clock.now() / 1000), position: { latitude: 0, longitude: 0 }, speedKph: 399, bearingDeg: 0 };
  const { record } = await trailwire.intake!.service.accept({ claims, vin, body, rawBody: JSON.stringify(body) });
  assert.equal(record.status, 'queued', 'accepted: the VIN had no owner');

  const fleet = await trailwire.admin.createFleet({ customerId: customer.id, name: 'Registered later' });
  const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
  await process(record.id);

  const status = await trailwire.intake!.queue.get(record.id);
  assert.equal(status?.status, 'failed', 'dead-lettered, not processed');
  assert.match(status?.error ?? '', /^partner_not_granted: .*has not granted this partner/, 'the partner reads why in its status');
  assert.equal((await trailwire.store.getTrailer(customer.id, trailer.id))?.telemetry ?? null, null, "the customer's trailer shows no fix");
  assert.deepEqual(await trailwire.store.listGps(customer.id, trailer.id, { from: 0, to: Number.MAX_SAFE_INTEGER, limit: 10 }), [], 'nor its GPS history');
  assert.equal(published().filter((event) => event.trailer.vin === vin).length, 0, 'nor its live state');

  // The operator's way out: the customer grants the partner, the dead letter is re-queued.
  await trailwire.admin.addGrant({ customerId: customer.id, partnerId: partner.id });
  assert.equal(await trailwire.intake!.queue.requeue(record.id, trailwire.clock.now()), true);
  await process(record.id);
  assert.equal((await trailwire.intake!.queue.get(record.id))?.status, 'processed');
  assert.equal((await trailwire.store.listGps(customer.id, trailer.id, { from: 0, to: Number.MAX_SAFE_INTEGER, limit: 10 })).length, 1, 'granted: written');
}
