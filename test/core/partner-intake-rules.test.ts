/**
 * What the partner rules ask of the store and the window counter per payload (issue 27: on the
 * accept path, a store read or a counter round trip per payload is what made intake slower). Each
 * test counts the calls of a real SQLite store and a real in-memory counter, under a manual clock.
 *
 * Then the same grant rule as of processing (`refusedByGrants`): applied to a batch's payloads with
 * the owners and grants the store holds now, and what it reads per batch.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { ManualClock } from '../../core/clock.ts';
import type { IntakeEntry } from '../../core/intake-queue.ts';
import { type GrantsAtProcessing, PartnerIntakeRules, refusedByGrants } from '../../core/partner-intake-rules.ts';
import { MemoryWindowCounter, type WindowCounter } from '../../core/rate-limit.ts';
import type { PartnerGrant, TrailwireStore, VinOwner } from '../../core/store.ts';
import { uniqueVin } from '../support/fixtures.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

/** The store with its `vinOwner` reads counted. */
function countingOwnerReads(store: TrailwireStore): { store: TrailwireStore; reads: () => number } {
  let reads = 0;
  const vinOwner = store.vinOwner.bind(store);
  store.vinOwner = (vin) => {
    reads += 1;
    return vinOwner(vin);
  };
  return { store, reads: () => reads };
}

/** A counter that counts the calls made of it. */
function countingCounter(clock: ManualClock): { counter: WindowCounter; calls: () => number } {
  const inner = new MemoryWindowCounter(clock);
  let calls = 0;
  return {
    counter: {
      increment: (key, expiresAt) => ((calls += 1), inner.increment(key, expiresAt)),
      peek: (key) => ((calls += 1), inner.peek(key)),
    },
    calls: () => calls,
  };
}

async function setUp() {
  const clock = new ManualClock(T0);
  const opened = await openSqliteStore({ file: ':memory:' });
  const { store, reads } = countingOwnerReads(opened);
  const { counter, calls } = countingCounter(clock);
  const rules = new PartnerIntakeRules(store, counter, clock);
  const customer = await store.createCustomer({ id: 'customer-1', name: 'Acme', keyHash: 'h', createdAt: T0 });
  const fleet = await store.createFleet({ customerId: customer.id, name: 'North', createdAt: T0 });
  return { clock, store, reads, counterCalls: calls, rules, customer, fleet };
}

describe('PartnerIntakeRules: store reads and counts per payload', () => {
  it("reads a registered VIN's owner once, and keeps it past a minute while the change feed says nothing", async () => {
    const { clock, store, reads, rules, customer, fleet } = await setUp();
    const vin = uniqueVin();
    await store.createTrailer({ id: 'trailer-1', fleetId: fleet.id, vin, unitId: 'T-1', createdAt: T0 });
    for (let second = 0; second < 600; second += 10) {
      clock.set(T0 + second * 1000);
      assert.deepEqual(await rules.checkGrant('partner-1', vin), { known: true, customerId: customer.id });
    }
    assert.equal(reads(), 1, 'one read in ten minutes of payloads every 10 s');
    await store.close();
  });

  it('asks again about a VIN the store did not know after a minute, since processing makes it a trailer', async () => {
    const { clock, store, reads, rules } = await setUp();
    const vin = uniqueVin();
    assert.deepEqual(await rules.checkGrant('partner-1', vin), { known: false, customerId: null });
    await store.createTrailer({ id: 'trailer-1', fleetId: null, vin, unitId: null, createdAt: T0 });
    clock.advance(30_000);
    assert.deepEqual(await rules.checkGrant('partner-1', vin), { known: false, customerId: null }, 'still believed unknown');
    clock.advance(31_000);
    assert.deepEqual(await rules.checkGrant('partner-1', vin), { known: true, customerId: null });
    assert.equal(reads(), 2);
    await store.close();
  });

  it('takes an assignment from the change feed at once, without a read', async () => {
    const { store, reads, rules, customer, fleet } = await setUp();
    const vin = uniqueVin();
    const trailer = await store.createTrailer({ id: 'trailer-1', fleetId: null, vin, unitId: null, createdAt: T0 });
    assert.deepEqual(await rules.checkGrant('partner-1', vin), { known: true, customerId: null });
    const assigned = await store.assignTrailer(trailer.id, fleet.id, 'T-1');
    rules.noteTrailerChange({ seq: 1, trailer: assigned, fleet });
    assert.deepEqual(await rules.checkGrant('partner-1', vin), { known: true, customerId: customer.id });
    assert.equal(reads(), 1);
    await store.close();
  });

  it("counts a new VIN against the partner's daily cap once, and looks the count up once a day per VIN", async () => {
    const { clock, store, counterCalls, rules } = await setUp();
    const vin = uniqueVin();
    await rules.admitNewVin('partner-1', vin);
    const afterFirst = counterCalls();
    assert.ok(afterFirst >= 2, 'the first payload is looked up and counted');
    for (let i = 0; i < 10; i++) await rules.admitNewVin('partner-1', vin);
    assert.equal(counterCalls(), afterFirst, 'later payloads of the same VIN on the same day touch no counter');
    await rules.admitNewVin('partner-2', vin);
    assert.ok(counterCalls() > afterFirst, "another partner's first payload of the VIN is its own");
    const beforeNextDay = counterCalls();
    clock.advance(24 * 60 * 60 * 1000);
    await rules.admitNewVin('partner-1', vin);
    assert.ok(counterCalls() > beforeNextDay, 'a new UTC day counts again');
    await store.close();
  });

  it("still refuses past the partner's cap of new VINs", async () => {
    const clock = new ManualClock(T0);
    const store = await openSqliteStore({ file: ':memory:' });
    const rules = new PartnerIntakeRules(store, new MemoryWindowCounter(clock), clock, { newVinsPerDay: 2 });
    await rules.admitNewVin('partner-1', uniqueVin());
    const second = uniqueVin();
    await rules.admitNewVin('partner-1', second);
    await rules.admitNewVin('partner-1', second);
    await assert.rejects(rules.admitNewVin('partner-1', uniqueVin()), (error: { code?: string }) => error.code === 'rate_limited');
    await store.close();
  });
});

const entry = (seq: number, vin: string, partnerId: string): IntakeEntry => ({
  seq,
  id: `intake-${seq}`,
  partnerId,
  product: 'gps-basic',
  vin,
  payload: '{}',
  receivedAt: 0,
  attempts: 0,
});

/** A store of owners by VIN and grants, counting the owner reads. */
function storeOf(owners: Record<string, string | null>, grants: Array<[customerId: string, partnerId: string]>) {
  const reads = { owners: 0 };
  const store: GrantsAtProcessing['store'] = {
    async vinOwner(vin): Promise<VinOwner> {
      reads.owners++;
      return vin in owners ? { known: true, customerId: owners[vin]! } : { known: false, customerId: null };
    },
    async listPartnerGrants(query): Promise<PartnerGrant[]> {
      assert.deepEqual(query, {}, 'every grant, in one read');
      return grants.map(([customerId, partnerId]) => ({ customerId, partnerId, createdAt: 0 }));
    },
  };
  return { store, reads };
}

describe('partner grants as of processing', () => {
  it("refuses a payload whose VIN's owner granted other partners, and lets through the granted, the unassigned and customers without grants", async () => {
    const { store } = storeOf({ VIN_STRICT: 'strict', VIN_OPEN: 'open', VIN_UNASSIGNED: null }, [['strict', 'trusted']]);
    const refused = await refusedByGrants({ store, requireGrants: false }, [
      entry(1, 'VIN_STRICT', 'stranger'),
      entry(2, 'VIN_STRICT', 'trusted'),
      entry(3, 'VIN_OPEN', 'stranger'),
      entry(4, 'VIN_UNASSIGNED', 'stranger'),
      entry(5, 'VIN_UNKNOWN', 'stranger'),
    ]);
    assert.deepEqual([...refused.keys()], [1]);
    assert.match(refused.get(1)!, /^partner_not_granted: the customer that owns VIN VIN_STRICT .*has not granted this partner/);
  });

  it('with requireGrants, refuses every partner a customer did not grant, grants or none', async () => {
    const { store } = storeOf({ VIN_STRICT: 'strict', VIN_OPEN: 'open', VIN_UNASSIGNED: null }, [['strict', 'trusted']]);
    const refused = await refusedByGrants({ store, requireGrants: true }, [
      entry(1, 'VIN_STRICT', 'trusted'),
      entry(2, 'VIN_OPEN', 'trusted'),
      entry(3, 'VIN_UNASSIGNED', 'trusted'),
    ]);
    assert.deepEqual([...refused.keys()], [2]);
  });

  it('reads no owner while no customer restricts intake, and each VIN once otherwise', async () => {
    const open = storeOf({ VIN_A: 'open' }, []);
    assert.equal((await refusedByGrants({ store: open.store, requireGrants: false }, [entry(1, 'VIN_A', 'p'), entry(2, 'VIN_A', 'p')])).size, 0);
    assert.equal(open.reads.owners, 0);
    const strict = storeOf({ VIN_A: 'open' }, [['strict', 'trusted']]);
    await refusedByGrants({ store: strict.store, requireGrants: false }, [entry(1, 'VIN_A', 'p'), entry(2, 'VIN_A', 'p'), entry(3, 'VIN_B', 'p')]);
    assert.equal(strict.reads.owners, 2);
  });
});
