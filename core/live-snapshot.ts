/**
 * The snapshot a live stream may ask for first (issue 32): the current state of every trailer of the
 * customer's fleets (or of the fleets and trailers its filter names), read from the store page by
 * page, as the updates the stream would carry for them. The stream subscribes before it reads, so a
 * change made while the snapshot is read is sent after it (`core/live-streams.ts`); trailers in no
 * fleet are visible to no customer and are not in it, as they are in no live update.
 */
import type { LiveTrailerEvent } from './live-bus.ts';
import type { LiveFilter } from './live-subscriber.ts';
import type { Clock } from './clock.ts';
import type { FleetReadStore } from './store.ts';

/** Reads the current state of every trailer of a customer that `filter` lets through, as snapshot updates. */
export type LiveSnapshotSource = (customerId: string, filter: LiveFilter | undefined) => Promise<LiveTrailerEvent[]>;

/** A `LiveSnapshotSource` over the store's read queries (scoped to the customer, as the read API). */
export function storeLiveSnapshot(
  store: Pick<FleetReadStore, 'listFleets' | 'listTrailers' | 'getTrailer'>,
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
    // The customer's own fleets, read once: a filter's fleet ids are looked up in it, so an id the
    // customer does not own costs a set lookup, not a query (issue 37: 1,000 foreign ids a connect).
    const owned = new Map<number, { id: number; name: string }>();
    for (let afterId: number | undefined; ; ) {
      const page = await store.listFleets(customerId, { afterId, limit: PAGE });
      for (const fleet of page) owned.set(fleet.id, { id: fleet.id, name: fleet.name });
      if (page.length < PAGE) break;
      afterId = page.at(-1)!.id;
    }
    const fleets = whole ? [...owned.values()] : [...new Set(fleetIds)].flatMap((id) => owned.get(id) ?? []);
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
    for (const id of new Set(trailerIds)) {
      if (seen.has(id)) continue;
      const trailer = await store.getTrailer(customerId, id);
      const fleet = trailer?.fleetId == null ? undefined : owned.get(trailer.fleetId);
      if (trailer && fleet) out.push({ customerId, fleet, trailer, ts, snapshot: true });
    }
    return out;
  };
}

/** A snapshot as a stream sends it: the states, the position they cover, and the customer's updates since. */
export interface LiveSnapshot {
  /** The current state of each trailer, as snapshot updates. */
  states: readonly LiveTrailerEvent[];
  /** The window's position the states cover (everything up to it is in them), or null without a window. */
  position: string | null;
  /** The customer's updates after `position` (a shared snapshot read a moment ago), oldest first. */
  since: readonly LiveTrailerEvent[];
}

export interface SharedSnapshotsOptions {
  /** How long a snapshot read for one stream serves others of the same customer and filter, in ms. Default 2,000. */
  shareMs?: number;
  /** The most snapshots held at once (oldest dropped first). Default 64. */
  maxShared?: number;
}

export const SHARED_SNAPSHOT_DEFAULTS = { shareMs: 2_000, maxShared: 64 } as const;

/**
 * One snapshot read serves every stream of the same customer and filter that asks within `shareMs`
 * (issue 37: a 3,000-trailer snapshot cost ~18 ms of the event loop a connect, and a reconnect storm
 * at 100/s saturated the process). A later stream gets the same states (the same objects, so each
 * transport encodes them once) with the position they cover, plus the customer's updates since from
 * the replay window — so it misses nothing, exactly as if it had read the store itself. When the
 * hub's newest position is still the one the states cover (null included: nothing delivered since
 * the process started), nothing came between and no replay is asked. Without a window (updates
 * carry no position, so one that came between cannot be told), or when the window no longer holds
 * that position, the snapshot is read afresh. Concurrent asks share the read in flight.
 */
export class SharedSnapshots {
  private readonly held = new Map<string, { at: number; position: string | null; states: Promise<LiveTrailerEvent[]> }>();
  private readonly shareMs: number;
  private readonly maxShared: number;

  constructor(
    private readonly source: LiveSnapshotSource,
    /** The bus's replay (`LiveBus.replayAfter`), or null when the bus keeps no window: then every read is afresh. */
    private readonly replayAfter: ((customerId: string, position: string) => Promise<LiveTrailerEvent[] | null>) | null,
    private readonly clock: Clock,
    options: SharedSnapshotsOptions = {},
  ) {
    const settings = { ...SHARED_SNAPSHOT_DEFAULTS, ...options };
    for (const [name, value] of Object.entries(settings))
      if (!Number.isInteger(value) || value < 0) throw new TypeError(`SharedSnapshots: \`${name}\` must be a non-negative integer, got ${value}`);
    this.shareMs = settings.shareMs;
    this.maxShared = settings.maxShared;
  }

  /**
   * The snapshot of the customer's trailers that `filter` lets through, for a stream subscribed when
   * the window's newest position was `positionNow` (null: no window, or nothing published yet).
   */
  async read(customerId: string, filter: LiveFilter | undefined, positionNow: string | null): Promise<LiveSnapshot> {
    const now = this.clock.now();
    for (const [key, entry] of this.held) {
      if (entry.at > now - this.shareMs && this.held.size <= this.maxShared) break;
      this.held.delete(key);
    }
    const key = `${customerId}\n${filter?.fleetIds?.join(',') ?? ''}\n${filter?.trailerIds?.join(',') ?? ''}`;
    const shared = this.held.get(key);
    if (shared && this.replayAfter) {
      // Nothing delivered since the shared read's position: no replay to ask (a round trip on Redis).
      const nothingSince = shared.position === positionNow;
      const since = nothingSince ? [] : shared.position === null ? null : await this.replayAfter(customerId, shared.position).catch(() => null);
      const states = await shared.states.catch(() => null);
      if (since !== null && states !== null) return { states, position: shared.position, since };
    }
    const states = this.source(customerId, filter);
    if (this.replayAfter && this.shareMs > 0 && this.maxShared > 0) {
      this.held.delete(key);
      this.held.set(key, { at: now, position: positionNow, states });
      // A failed read is not shared: the next stream reads again.
      states.catch(() => this.held.get(key)?.states === states && this.held.delete(key));
    }
    return { states: await states, position: positionNow, since: [] };
  }
}
