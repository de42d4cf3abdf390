/**
 * The snapshot a live stream may ask for first (issue 32): the current state of every trailer of the
 * customer's fleets (or of the fleets and trailers its filter names), read from the store page by
 * page, as the updates the stream would carry for them. The stream subscribes before it reads, so a
 * change made while the snapshot is read is sent after it (`core/live-streams.ts`); trailers in no
 * fleet are visible to no customer and are not in it, as they are in no live update.
 */
import type { LiveFilter, LiveSnapshotSource, LiveTrailerEvent } from './live-hub.ts';
import type { Clock } from './clock.ts';
import type { FleetReadStore } from './store.ts';

/** A `LiveSnapshotSource` over the store's read queries (scoped to the customer, as the read API). */
export function storeLiveSnapshot(
  store: Pick<FleetReadStore, 'listFleets' | 'listTrailers' | 'getTrailer' | 'getFleet'>,
  clock: Clock,
  /** `pageSize`: fleets and trailers read per query. Default 1,000 (10,000 trailers are 10 reads). */
  options: { pageSize?: number } = {},
): LiveSnapshotSource {
  const PAGE = options.pageSize ?? 1_000;
  return async (customerId: string, filter: LiveFilter | undefined): Promise<LiveTrailerEvent[]> => {
    const ts = clock.now();
    const out: LiveTrailerEvent[] = [];
    const seen = new Set<string>();
    const fleetIds = filter?.fleetIds ?? [];
    const trailerIds = filter?.trailerIds ?? [];
    const whole = fleetIds.length === 0 && trailerIds.length === 0;
    const fleets: Array<{ id: number; name: string }> = [];
    if (whole) {
      for (let afterId: number | undefined; ; ) {
        const page = await store.listFleets(customerId, { afterId, limit: PAGE });
        fleets.push(...page);
        if (page.length < PAGE) break;
        afterId = page.at(-1)!.id;
      }
    } else {
      for (const id of fleetIds) {
        const fleet = await store.getFleet(customerId, id);
        if (fleet) fleets.push(fleet);
      }
    }
    for (const fleet of fleets) {
      for (let afterId: string | undefined; ; ) {
        const page = await store.listTrailers(customerId, fleet.id, { afterId, limit: PAGE, activeOnly: false, staleBefore: 0 });
        for (const trailer of page) {
          seen.add(trailer.id);
          out.push({ customerId, fleet: { id: fleet.id, name: fleet.name }, trailer, ts, snapshot: true });
        }
        if (page.length < PAGE) break;
        afterId = page.at(-1)!.id;
      }
    }
    for (const id of trailerIds) {
      if (seen.has(id)) continue;
      const trailer = await store.getTrailer(customerId, id);
      if (trailer === null || trailer.fleetId === null) continue;
      const fleet = await store.getFleet(customerId, trailer.fleetId);
      if (fleet) out.push({ customerId, fleet: { id: fleet.id, name: fleet.name }, trailer, ts, snapshot: true });
    }
    return out;
  };
}
