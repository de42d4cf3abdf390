/**
 * The partner grants checked again when a payload is processed (contract 4, issue 37): a payload
 * accepted while its VIN had no owner (open to any partner of the product) may be processed after an
 * operator registered the VIN to a customer that takes intake only from the partners it granted — or
 * after that customer withdrew the partner's grant. Its data must not land in that customer's
 * trailer, history and live state: the worker dead-letters it (`failed`) with the reason below, which
 * the partner reads in its status, and which an operator can re-queue after a grant
 * (`trailwire queue retry <id>`). The rule is the accept path's (`takesIntakeFrom`).
 *
 * As the store holds it at processing, never cached: ownership changes by an operator's registration,
 * which a cache here would hear of too late. Per batch, one read of the grants (few: a list); the
 * VINs' owners only when some customer restricts intake (it granted a partner, or `requireGrants`),
 * asked side by side (one statement a batch on PostgreSQL, whose store answers a turn's owners together).
 * On SQLite these reads run inside the batch's write transaction, so a registration commits wholly
 * before or after the batch; on PostgreSQL they run on the pool, and a registration that commits in
 * the few milliseconds between them and the batch's write is seen by the VIN's next payload only.
 */
import type { IntakeEntry } from './intake-queue.ts';
import { takesIntakeFrom } from './partner-intake-rules.ts';
import type { PartnerPolicyStore } from './store.ts';

export interface GrantsAtProcessing {
  /** Where the owners and grants are read, as of processing. */
  store: Pick<PartnerPolicyStore, 'vinOwner' | 'listPartnerGrants'>;
  /** As the accept path's (`serve --require-grants`): every customer takes intake only from partners it granted. */
  requireGrants: boolean;
}

/** The reason a payload is dead-lettered with, by `seq`, for each entry whose VIN's owner does not take intake from its partner. */
export async function refusedByGrants(grants: GrantsAtProcessing, entries: readonly IntakeEntry[]): Promise<Map<number, string>> {
  const refused = new Map<number, string>();
  const granted = new Map<string, Set<string>>();
  for (const { customerId, partnerId } of await grants.store.listPartnerGrants({})) {
    let partners = granted.get(customerId);
    if (partners === undefined) granted.set(customerId, (partners = new Set()));
    partners.add(partnerId);
  }
  // No customer restricts intake: every partner may write every VIN, whoever owns it.
  if (granted.size === 0 && !grants.requireGrants) return refused;
  const vins = [...new Set(entries.map((entry) => entry.vin))];
  const owners = new Map(await Promise.all(vins.map(async (vin) => [vin, (await grants.store.vinOwner(vin)).customerId] as const)));
  for (const entry of entries) {
    const customerId = owners.get(entry.vin);
    if (customerId == null || takesIntakeFrom(granted.get(customerId) ?? NO_GRANTS, entry.partnerId, grants.requireGrants)) continue;
    refused.set(
      entry.seq,
      `partner_not_granted: the customer that owns VIN ${entry.vin} (registered after this payload was accepted, or since it withdrew the grant) ` +
        'has not granted this partner intake for its trailers; nothing of this payload was written',
    );
  }
  return refused;
}

const NO_GRANTS: ReadonlySet<string> = new Set();
