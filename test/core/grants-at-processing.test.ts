/**
 * The partner grants as of processing (`core/grants-at-processing.ts`): the accept path's rule applied
 * to a batch's payloads with the owners and grants the store holds now, and what it reads per batch.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type GrantsAtProcessing, refusedByGrants } from '../../core/grants-at-processing.ts';
import type { IntakeEntry } from '../../core/intake-queue.ts';
import type { PartnerGrant, VinOwner } from '../../core/store.ts';

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
