/**
 * The live-update hub behind the LiveFeed (contract 8): intake publishes one `LiveTrailerEvent` per
 * changed trailer through the live bus (`core/live-bus.ts`), and the hub fans each event of the bus
 * out to the open streams of the trailer's customer. Each stream is a `Subscriber`
 * (`core/live-subscriber.ts`: its filter, its back-pressure, its held start); a transport adapter
 * (gRPC in `adapters/grpc`, Server-Sent Events in `adapters/koa/live-events-route.ts`, both through
 * `core/live-streams.ts`) turns each stream into a `LiveSink`. The hub also answers what a stream
 * reads before its live updates: the replay after a position (the bus's window) and a snapshot
 * (`core/live-snapshot.ts`, shared between streams of one customer that ask within moments).
 */
import { TrailwireError } from './errors.ts';
import { type LiveBus, type LiveTrailerEvent, MemoryLiveBus } from './live-bus.ts';
import { comparePositions, LIVE_REPLAY_DEFAULTS, type LiveReplayOptions } from './live-replay.ts';
import { type LiveSnapshot, type LiveSnapshotSource, SharedSnapshots, type SharedSnapshotsOptions } from './live-snapshot.ts';
import { type LiveFilter, type LiveSink, type LiveSubscribeOptions, type LiveSubscription, Subscriber } from './live-subscriber.ts';
import type { Clock } from './clock.ts';
import { systemClock } from './clock.ts';
import type { Audience } from './model.ts';

export interface LiveHubOptions {
  /** Where events travel between publishers and hubs. Default: a new `MemoryLiveBus` owned by the hub. */
  bus?: LiveBus;
  /**
   * The most distinct trailers that may wait for one slow subscriber before its stream is ended
   * with `rate_limited`. Default 10,000 (a map entry each: about 1 MB for a subscriber that falls
   * that far behind; updates themselves are shared between subscribers).
   */
  maxPendingTrailers?: number;
  /** The window of the bus the hub creates when `bus` is not given (a given bus brings its own). Default: `LIVE_REPLAY_DEFAULTS`. */
  replay?: LiveReplayOptions;
  /** The clock of that bus's window. Default: the system clock. */
  clock?: Clock;
  /** Where a snapshot is read from (`createTrailwire` passes the store's). Default: none; a snapshot asked for is refused `unavailable`. */
  snapshot?: LiveSnapshotSource;
  /** How long one snapshot read serves other streams of the same customer and filter (`SharedSnapshots`). Default: `SHARED_SNAPSHOT_DEFAULTS` (2 s, 64 held). */
  sharedSnapshots?: SharedSnapshotsOptions;
}

/** Counters for metrics and the benchmark. */
export interface LiveHubStats {
  subscribers: number;
  customers: number;
  /** Pending trailers summed over all subscribers. */
  pendingTrailers: number;
  /** Subscribers whose transport is currently full. */
  congestedSubscribers: number;
}

const HUB_DEFAULTS = { maxPendingTrailers: 10_000 };
export { LIVE_REPLAY_DEFAULTS };


/** One customer's streams on this hub, and the hub's listening to that customer on the bus. */
interface CustomerStreams {
  readonly subscribers: Set<Subscriber>;
  /** Subscriptions waiting for `listening`: the entry stays while any does. */
  joining: number;
  /** Resolves once the bus hands this hub every event of the customer positioned after `newest`. */
  listening: Promise<void>;
  /** The newest position this hub's streams of the customer are covered to: the window's newest when listening began, then each event heard. */
  newest: string | null;
  stopListening: (() => void) | null;
}

/**
 * Fans events of the bus out to the subscribers of each customer. The hub listens on the bus to
 * the customers it has streams of, each from its first stream to its last: a process hears only
 * what one of its clients wants.
 */
export class LiveHub {
  private readonly bus: LiveBus;
  private readonly ownsBus: boolean;
  private readonly maxPendingTrailers: number;
  private readonly byCustomer = new Map<string, CustomerStreams>();
  private readonly snapshots: SharedSnapshots | undefined;
  private closed = false;

  constructor(options: LiveHubOptions = {}) {
    const settings = { ...HUB_DEFAULTS, ...options };
    if (!Number.isInteger(settings.maxPendingTrailers) || settings.maxPendingTrailers < 1)
      throw new TypeError(`LiveHub: \`maxPendingTrailers\` must be a positive integer, got ${settings.maxPendingTrailers}`);
    this.maxPendingTrailers = settings.maxPendingTrailers;
    this.ownsBus = options.bus === undefined;
    this.bus = options.bus ?? new MemoryLiveBus({ replay: options.replay, clock: options.clock });
    const replayAfter = this.bus.replays ? (customerId: string, position: string) => this.bus.replayAfter(customerId, position) : null;
    this.snapshots = options.snapshot && new SharedSnapshots(options.snapshot, replayAfter, options.clock ?? systemClock, options.sharedSnapshots);
  }

  /** Publishes an event through the bus (to the subscribers of every hub on it, this one included). */
  async publish(event: LiveTrailerEvent): Promise<void> {
    if (this.closed) throw new TrailwireError('unavailable', 'The live hub is closed.');
    await this.bus.publish(event);
  }

  /**
   * Starts delivering the customer's updates to `sink` (held until `start` when `options.held`).
   * The customer's first stream on this hub waits for the bus to listen to the customer (a round
   * trip on Redis); later ones join at once.
   */
  async subscribe(customerId: string, sink: LiveSink, options: LiveSubscribeOptions = {}): Promise<LiveSubscription> {
    if (this.closed) throw new TrailwireError('unavailable', 'The live hub is closed.');
    const streams = this.byCustomer.get(customerId) ?? this.listenTo(customerId);
    streams.joining++;
    try {
      await streams.listening;
    } finally {
      streams.joining--;
    }
    if (this.closed) {
      this.forgetIfUnused(customerId, streams);
      throw new TrailwireError('unavailable', 'The live hub is closed.');
    }
    const subscriber = new Subscriber(streams.newest, customerId, sink, this.maxPendingTrailers, options, (which, reason) => this.remove(which, reason));
    streams.subscribers.add(subscriber);
    return subscriber;
  }

  /** Whether the bus keeps a replay window (updates carry positions and can be resumed). */
  get replays(): boolean {
    return this.bus.replays;
  }

  /** The newest position the bus's window has issued (to any customer), or null (none yet, or no window). */
  newestPosition(): Promise<string | null> {
    return this.bus.newestPosition();
  }

  /** The customer's updates after `position` in the bus's window, or null when it is not resumable (or the bus keeps no window). */
  async replayAfter(customerId: string, position: string): Promise<LiveTrailerEvent[] | null> {
    return this.bus.replayAfter(customerId, position);
  }

  /**
   * The current state of every trailer of the customer that `filter` lets through, for a stream
   * subscribed when the hub's newest position was `positionNow` (`LiveSubscription.positionAtSubscribe`):
   * the states, the position they cover, and the customer's updates since (see `SharedSnapshots`).
   */
  async readSnapshot(customerId: string, filter: LiveFilter | undefined, positionNow: string | null): Promise<LiveSnapshot> {
    if (!this.snapshots) throw new TrailwireError('unavailable', 'This live hub has no snapshot source.');
    return this.snapshots.read(customerId, filter, positionNow);
  }

  /** Ends every stream of the customer with `reason` (for example after a key rotation). Answers how many. */
  endCustomer(customerId: string, reason: TrailwireError): number {
    const streams = this.byCustomer.get(customerId);
    if (!streams) return 0;
    const ended = [...streams.subscribers];
    for (const subscriber of ended) subscriber.end(reason);
    return ended.length;
  }

  /** How many streams the customer has open, or opening (waiting for the bus to listen): what a per-customer cap counts. */
  subscriberCount(customerId: string): number {
    const streams = this.byCustomer.get(customerId);
    return streams ? streams.subscribers.size + streams.joining : 0;
  }

  stats(): LiveHubStats {
    const stats: LiveHubStats = { subscribers: 0, customers: 0, pendingTrailers: 0, congestedSubscribers: 0 };
    for (const { subscribers } of this.byCustomer.values()) {
      if (subscribers.size > 0) stats.customers++;
      for (const subscriber of subscribers) {
        stats.subscribers++;
        stats.pendingTrailers += subscriber.pendingTrailers;
        if (!subscriber.writable) stats.congestedSubscribers++;
      }
    }
    return stats;
  }

  /**
   * Ends every stream with `reason` (default `unavailable`: the service is shutting down), stops
   * listening to the bus, and closes the bus if the hub created it. Idempotent.
   */
  async close(reason: TrailwireError = new TrailwireError('unavailable', 'The live feed is shutting down.')): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [customerId, streams] of [...this.byCustomer]) {
      for (const subscriber of [...streams.subscribers]) subscriber.end(reason);
      this.forgetIfUnused(customerId, streams);
    }
    if (this.ownsBus) await this.bus.close();
  }

  /**
   * Hands an event to this hub's subscribers only, not to the bus: for events every process learns
   * of by itself (the store's change feed, `core/trailer-changes.ts`), which the bus would repeat.
   */
  deliverHere(event: LiveTrailerEvent, changeId?: string): void {
    if (this.closed) return;
    if (!this.replays) {
      const streams = this.byCustomer.get(event.customerId);
      if (streams) this.deliver(streams, event);
      return;
    }
    // With a replay window the event must be in it, and have a position, like every other: it goes
    // through the bus, once for all processes (\`changeId\`). A bus that cannot take it now (Redis
    // away) says so through its own error hook; the trailer heals at its next change.
    this.bus.publish(event, { changeId }).catch(() => {});
  }

  /**
   * Starts listening to the customer on the bus. The newest position its streams are covered to is
   * the window's newest read once the bus listens: every event of the customer after it reaches
   * this hub, and every one before it is in the store (an event is published after its write).
   */
  private listenTo(customerId: string): CustomerStreams {
    const streams: CustomerStreams = { subscribers: new Set(), joining: 0, listening: Promise.resolve(), newest: null, stopListening: null };
    this.byCustomer.set(customerId, streams);
    streams.listening = (async () => {
      try {
        streams.stopListening = await this.bus.listen(customerId, (event) => this.deliver(streams, event));
        // A window that cannot answer now (Redis away) leaves what was heard: the updates of an outage are published again after it.
        if (this.bus.replays) advance(streams, await this.bus.newestPosition().catch(() => null));
      } catch (error) {
        if (this.byCustomer.get(customerId) === streams) this.byCustomer.delete(customerId);
        throw error;
      }
    })();
    return streams;
  }

  private deliver(streams: CustomerStreams, event: LiveTrailerEvent): void {
    advance(streams, event.position ?? null);
    for (const subscriber of streams.subscribers) subscriber.offer(event);
  }

  private remove(subscriber: Subscriber, reason: TrailwireError | null): void {
    const streams = this.byCustomer.get(subscriber.customerId);
    if (streams?.subscribers.delete(subscriber)) this.forgetIfUnused(subscriber.customerId, streams);
    if (reason) subscriber.sink.end(reason);
  }

  /** Stops listening to a customer whose last stream ended, unless one is joining. */
  private forgetIfUnused(customerId: string, streams: CustomerStreams): void {
    if (streams.subscribers.size > 0 || streams.joining > 0) return;
    streams.stopListening?.();
    streams.stopListening = null;
    if (this.byCustomer.get(customerId) === streams) this.byCustomer.delete(customerId);
  }
}

/** Moves the streams' newest position forward to `position` (never back: a late message is older than the window's newest read). */
function advance(streams: CustomerStreams, position: string | null): void {
  if (position !== null && (streams.newest === null || comparePositions(position, streams.newest) > 0)) streams.newest = position;
}


/** Where rotations are heard: an `AuthService` (this process's), or `PrincipalRotations` (every process's). */
export interface RotationSource {
  onRotation(listener: (audience: Audience, principalId: string) => void): () => void;
}

/**
 * Ends the live streams of a customer whose key is rotated, with `invalid_token` (gRPC
 * UNAUTHENTICATED): rotation is the response to a compromised key (contract 3). Answers the
 * function that undoes the wiring. `rotations` is where rotations are heard: `createTrailwire`
 * passes its `PrincipalRotations` (`core/rotation-feed.ts`), which tells of this process's
 * rotations and, through the rotation feed, of every other process's; an `AuthService` alone tells
 * only of this process's. A notice that never arrives is still caught by the streams' revocation
 * check at each heartbeat (`core/live-streams.ts`), once this process re-reads the key version from the store.
 */
export function endStreamsOnRotation(rotations: RotationSource, hub: LiveHub): () => void {
  return rotations.onRotation((audience, principalId) => {
    if (audience !== 'customers') return;
    hub.endCustomer(principalId, new TrailwireError('invalid_token', 'The customer key was rotated; authenticate again.'));
  });
}

