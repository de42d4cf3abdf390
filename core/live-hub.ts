/**
 * The live-update hub behind the LiveFeed (contract 8): intake publishes one `LiveTrailerEvent` per
 * changed trailer, the hub fans each event out to the open streams of the trailer's customer, and a
 * transport adapter (gRPC in `adapters/grpc`, Server-Sent Events in `adapters/koa/live-events-route.ts`,
 * both through `core/live-streams.ts`) turns each stream into a `LiveSink`. Events travel
 * through a `LiveBus` — in-process by default (`MemoryLiveBus`), shared across processes by a
 * networked bus (Redis) — so a payload taken in by one process reaches subscribers of every process.
 *
 * Back-pressure policy. Each update carries the trailer's full current state, so a subscriber that
 * is behind needs only the latest update of each trailer, not the history. A sink's `write` answers
 * whether the transport can take more; once it answers false the hub stops writing to that
 * subscriber and keeps its pending updates coalesced: one entry per trailer, replaced in place by
 * newer updates, in the order the trailers first became pending (so the trailer that has waited
 * longest goes first). When the transport drains, pending updates are written oldest first until it
 * is full again. Updates of one trailer are therefore never reordered, and a subscriber that keeps
 * up sees every update. Memory per subscriber is bounded by the number of distinct trailers waiting
 * (`maxPendingTrailers`, default 10,000); a subscriber that exceeds it has its stream ended with
 * `rate_limited` (gRPC RESOURCE_EXHAUSTED) rather than silently losing a trailer: a dropped update
 * would leave the client with a stale trailer it cannot detect, whereas an ended stream tells it to
 * reconnect and re-read the current state from the read API. A slow subscriber never delays the
 * others: fan-out only ever calls the non-blocking `write` or touches the subscriber's own map.
 *
 * No gaps (issue 32). A bus may keep a replay window (`core/live-replay.ts`): it then gives every
 * event a `position`, delivered in position order, and answers `replayAfter(customer, position)`. Pending
 * updates are written in position order too (a trailer updated again moves to the back of the queue,
 * carrying its newest state), so the positions a subscriber receives only ever increase and "the
 * last position I saw" means "I have everything up to there": what it resumes from. A subscription
 * may be opened *held* (`LiveSubscribeOptions.held`): it queues what arrives while its stream reads a
 * snapshot or the replay, then `start(backlog, dropThrough)` writes that backlog first and drops
 * queued updates the backlog already covers (by position), so nothing falls between the two and
 * nothing is sent twice. A subscription may also be filtered to some fleets or trailers.
 */
import { TrailwireError } from './errors.ts';
import { type Channel, type ChannelListener, MemoryChannel } from './channel.ts';
import { comparePositions, LIVE_REPLAY_DEFAULTS, type LiveReplayOptions, ReplayRing, resolveReplayOptions } from './live-replay.ts';
import type { Clock } from './clock.ts';
import { systemClock } from './clock.ts';
import type { Audience, Trailer } from './model.ts';
import type { AppliedTelemetry } from './store.ts';

/** One change of one trailer, for the customer that owns the trailer's fleet. */
export interface LiveTrailerEvent {
  customerId: string;
  fleet: { id: number; name: string };
  /** The trailer's full current state after the change. */
  trailer: Trailer;
  /** When the update was created (epoch ms). */
  ts: number;
  /**
   * Where the update stands in the bus's replay window (`<ms>-<seq>`, `core/live-replay.ts`), set by
   * a bus that keeps one; a subscriber resumes after the last position it saw. Absent otherwise.
   */
  position?: string;
  /** Set on the updates of a snapshot: the trailer's current state, not a change (never on the bus). */
  snapshot?: true;
}

export type LiveBusListener = ChannelListener<LiveTrailerEvent>;

/**
 * The seam for cross-process fan-out: a `Channel` of live updates (`core/channel.ts`: every event
 * published reaches every current listener of every process sharing the bus, one publisher's events
 * in publish order, nothing after unsubscribe or close), which may keep a replay window. Every
 * implementation passes `test/conformance/channel.ts` and the replay cases of
 * `test/conformance/live-bus.ts`.
 */
export interface LiveBus extends Channel<LiveTrailerEvent> {
  /**
   * Hands an event to every listener; resolves once the bus has accepted it. A bus with a replay
   * window sets `position` on the event its listeners receive.
   */
  publish(event: LiveTrailerEvent, options?: LivePublishOptions): Promise<void>;
  /** Whether the bus keeps a replay window: it positions every event and `replayAfter` can answer. */
  readonly replays: boolean;
  /**
   * The customer's events published after `position`, oldest first and with their positions, or
   * null when `position` is not resumable (`core/live-replay.ts`: something after it left the
   * window, or this window never issued it) — always null on a bus without a window. It costs in
   * proportion to the customer's events it answers, not to the window (issue 37).
   */
  replayAfter(customerId: string, position: string): Promise<LiveTrailerEvent[] | null>;
}

export interface LivePublishOptions {
  /**
   * The change the event tells of, when every process learns of it by itself (an operator change
   * read from the store's change feed): a bus with a replay window publishes the first event of a
   * change within the window and drops the others, so that the change reaches the window, and the
   * subscribers, once. A bus without a window never sees one (`LiveHub.deliverHere`).
   */
  changeId?: string;
}

/** `MemoryLiveBus`'s options. */
export interface MemoryLiveBusOptions {
  /** The replay window (`replaySeconds: 0` keeps none). Default: `LIVE_REPLAY_DEFAULTS` (300 s, at most 100,000 events). */
  replay?: LiveReplayOptions;
  /** The clock positions are issued from and the window ages by. Default: the system clock. */
  clock?: Clock;
  /** Told of an error a listener threw. Default: re-thrown asynchronously. */
  onListenerError?: (error: unknown) => void;
}

/**
 * The in-process bus of the embedded default. Listeners are called synchronously in `publish`, one
 * after the other; a listener that throws does not stop the others (its error is reported to
 * `onListenerError`, by default re-thrown asynchronously so it is not lost).
 */
export class MemoryLiveBus extends MemoryChannel<LiveTrailerEvent> implements LiveBus {
  private readonly ring: ReplayRing<LiveTrailerEvent> | null;
  /** The `changeId`s published, with when (Map order: oldest first), forgotten with the window. */
  private readonly changesPublished = new Map<string, number>();
  private readonly clock: Clock;
  private readonly windowMs: number;

  constructor(options: MemoryLiveBusOptions = {}) {
    super('live bus', options.onListenerError);
    const replay = resolveReplayOptions(options.replay, 'MemoryLiveBus.replay');
    this.clock = options.clock ?? systemClock;
    this.windowMs = replay.replaySeconds * 1000;
    this.ring = replay.replaySeconds > 0 ? new ReplayRing<LiveTrailerEvent>(this.clock, replay) : null;
  }

  get replays(): boolean {
    return this.ring !== null;
  }

  async replayAfter(customerId: string, position: string): Promise<LiveTrailerEvent[] | null> {
    return this.ring?.after(customerId, position)?.map((entry) => entry.item) ?? null;
  }

  private firstPublished(changeId: string): boolean {
    const now = this.clock.now();
    for (const [old, at] of this.changesPublished) {
      if (at > now - this.windowMs) break;
      this.changesPublished.delete(old);
    }
    if (this.changesPublished.has(changeId)) return false;
    this.changesPublished.set(changeId, now);
    return true;
  }

  /** Positions the event (when the bus keeps a window) and calls every listener with it. */
  override async publish(event: LiveTrailerEvent, options?: LivePublishOptions): Promise<void> {
    // Several cores of one process may share this bus, each reading the store's change feed.
    if (options?.changeId !== undefined && this.ring && !this.firstPublished(options.changeId)) return;
    if (this.ring) {
      const positioned = { ...event, position: '' };
      positioned.position = this.ring.append(event.customerId, positioned);
      return super.publish(positioned);
    }
    return super.publish(event);
  }
}

/** One stream, as the hub sees it; the transport adapter implements it. */
export interface LiveSink {
  /**
   * Hands one update to the transport. Answers false when the transport's buffer is full: the hub
   * then writes nothing more to this sink until `LiveSubscription.drained()` is called.
   */
  write(event: LiveTrailerEvent): boolean;
  /** Writes a marker of the stream's start (see `LiveSignal`); answers as `write`. A sink never given a backlog with signals may leave it out. */
  signal?(signal: LiveSignal): boolean;
  /** Ends the stream with `reason` (the hub has already forgotten the subscription). */
  end(reason: TrailwireError): void;
}

/**
 * A marker a stream writes between updates: `snapshot-end` follows the last update of a snapshot
 * (`position`: resume after it to miss nothing since the snapshot, null when the bus keeps no
 * window); `resume-reset` says that the position the client resumed from had left the replay window,
 * so updates may have been missed, and that a snapshot follows in their place.
 */
export type LiveSignal = { kind: 'snapshot-end'; position: string | null } | { kind: 'resume-reset' };

/** Which of the customer's trailers a subscription is told of: those of `fleetIds` and those of `trailerIds` (either may be left out; both out: every trailer). */
export interface LiveFilter {
  fleetIds?: readonly number[];
  trailerIds?: readonly string[];
}

export interface LiveSubscribeOptions {
  filter?: LiveFilter;
  /** Queue updates without writing them until `start` is called (the stream is reading a snapshot or the replay). Default false. */
  held?: boolean;
}

/** Reads the current state of every trailer of a customer that `filter` lets through, as snapshot updates. */
export type LiveSnapshotSource = (customerId: string, filter: LiveFilter | undefined) => Promise<LiveTrailerEvent[]>;

/** The hub's handle on one subscriber, held by the transport adapter. */
export interface LiveSubscription {
  readonly customerId: string;
  /** How many trailers have an update waiting for the transport to drain. */
  readonly pendingTrailers: number;
  /** Whether the subscription still receives updates (false once unsubscribed or ended). */
  readonly active: boolean;
  /** The hub's newest position when the subscription was made (what a snapshot read after it covers), or null. */
  readonly positionAtSubscribe: string | null;
  /**
   * The position of the last update (or snapshot end) written to this stream, when nothing waits to
   * be written (else null): what a heartbeat tells the client, its own resume position and nothing
   * about other tenants' activity.
   */
  readonly caughtUpTo: string | null;
  /** Whether `event` is for this subscription (its customer and filter). */
  matches(event: LiveTrailerEvent): boolean;
  /**
   * Releases a held subscription: writes `backlog` (a replay or a snapshot, and signals) first, then
   * what was queued meanwhile, leaving out queued updates at or before `dropThrough` (the backlog
   * has them). No-op once ended.
   */
  start(backlog: ReadonlyArray<LiveTrailerEvent | LiveSignal>, dropThrough: string | null): void;
  /** The transport can take more again: pending updates are written until it is full or empty. */
  drained(): void;
  /** Stops delivery (the client went away). Idempotent; does not call `sink.end`. */
  unsubscribe(): void;
}

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

/** Fans events of the bus out to the subscribers of each customer. */
export class LiveHub {
  private readonly bus: LiveBus;
  private readonly ownsBus: boolean;
  private readonly maxPendingTrailers: number;
  private readonly byCustomer = new Map<string, Set<Subscriber>>();
  private readonly stopListening: () => void;
  private readonly snapshotSource: LiveSnapshotSource | undefined;
  private closed = false;
  /** The newest position delivered here (null until a positioned event arrives). */
  private newest: string | null = null;

  constructor(options: LiveHubOptions = {}) {
    const settings = { ...HUB_DEFAULTS, ...options };
    if (!Number.isInteger(settings.maxPendingTrailers) || settings.maxPendingTrailers < 1)
      throw new TypeError(`LiveHub: \`maxPendingTrailers\` must be a positive integer, got ${settings.maxPendingTrailers}`);
    this.maxPendingTrailers = settings.maxPendingTrailers;
    this.ownsBus = options.bus === undefined;
    this.bus = options.bus ?? new MemoryLiveBus({ replay: options.replay, clock: options.clock });
    this.snapshotSource = options.snapshot;
    this.stopListening = this.bus.subscribe((event) => this.deliver(event));
  }

  /** Publishes an event through the bus (to the subscribers of every hub on it, this one included). */
  async publish(event: LiveTrailerEvent): Promise<void> {
    if (this.closed) throw new TrailwireError('unavailable', 'The live hub is closed.');
    await this.bus.publish(event);
  }

  /** Starts delivering the customer's updates to `sink` (held until `start` when `options.held`). */
  subscribe(customerId: string, sink: LiveSink, options: LiveSubscribeOptions = {}): LiveSubscription {
    if (this.closed) throw new TrailwireError('unavailable', 'The live hub is closed.');
    const subscriber = new Subscriber(this, customerId, sink, this.maxPendingTrailers, options, (which, reason) => this.remove(which, reason));
    let subscribers = this.byCustomer.get(customerId);
    if (!subscribers) {
      subscribers = new Set();
      this.byCustomer.set(customerId, subscribers);
    }
    subscribers.add(subscriber);
    return subscriber;
  }

  /** The newest position delivered to this hub, or null (none yet, or the bus keeps no window). */
  get lastPosition(): string | null {
    return this.newest;
  }

  /** Whether the bus keeps a replay window (updates carry positions and can be resumed). */
  get replays(): boolean {
    return this.bus.replays;
  }

  /** The customer's updates after `position` in the bus's window, or null when it is not resumable (or the bus keeps no window). */
  async replayAfter(customerId: string, position: string): Promise<LiveTrailerEvent[] | null> {
    return this.bus.replayAfter(customerId, position);
  }

  /** The current state of every trailer of the customer that `filter` lets through, as snapshot updates. */
  async readSnapshot(customerId: string, filter: LiveFilter | undefined): Promise<LiveTrailerEvent[]> {
    if (!this.snapshotSource) throw new TrailwireError('unavailable', 'This live hub has no snapshot source.');
    return this.snapshotSource(customerId, filter);
  }

  /** Ends every stream of the customer with `reason` (for example after a key rotation). Answers how many. */
  endCustomer(customerId: string, reason: TrailwireError): number {
    const subscribers = this.byCustomer.get(customerId);
    if (!subscribers) return 0;
    const ended = [...subscribers];
    for (const subscriber of ended) subscriber.end(reason);
    return ended.length;
  }

  /** How many streams the customer has open. */
  subscriberCount(customerId: string): number {
    return this.byCustomer.get(customerId)?.size ?? 0;
  }

  stats(): LiveHubStats {
    const stats: LiveHubStats = { subscribers: 0, customers: this.byCustomer.size, pendingTrailers: 0, congestedSubscribers: 0 };
    for (const subscribers of this.byCustomer.values()) {
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
    this.stopListening();
    for (const subscribers of [...this.byCustomer.values()]) for (const subscriber of [...subscribers]) subscriber.end(reason);
    if (this.ownsBus) await this.bus.close();
  }

  /**
   * Hands an event to this hub's subscribers only, not to the bus: for events every process learns
   * of by itself (the store's change feed, `core/trailer-changes.ts`), which the bus would repeat.
   */
  deliverHere(event: LiveTrailerEvent, changeId?: string): void {
    if (this.closed) return;
    if (!this.replays) {
      this.deliver(event);
      return;
    }
    // With a replay window the event must be in it, and have a position, like every other: it goes
    // through the bus, once for all processes (`changeId`). A bus that cannot take it now (Redis
    // away) says so through its own error hook; the trailer heals at its next change.
    this.bus.publish(event, { changeId }).catch(() => {});
  }

  private deliver(event: LiveTrailerEvent): void {
    if (event.position !== undefined) this.newest = event.position;
    const subscribers = this.byCustomer.get(event.customerId);
    if (!subscribers) return;
    for (const subscriber of subscribers) subscriber.offer(event);
  }

  private remove(subscriber: Subscriber, reason: TrailwireError | null): void {
    const subscribers = this.byCustomer.get(subscriber.customerId);
    if (subscribers?.delete(subscriber) && subscribers.size === 0) this.byCustomer.delete(subscriber.customerId);
    if (reason) subscriber.sink.end(reason);
  }
}

/** One subscriber's delivery state: whether its transport is writable, and what waits for it. */
class Subscriber implements LiveSubscription {
  writable = true;
  active = true;
  readonly positionAtSubscribe: string | null;
  /** Latest waiting update per trailer id; Map order = position order (a re-queued trailer moves to the back). */
  private readonly pending = new Map<string, LiveTrailerEvent>();
  /** What `start` hands over, written before `pending`; `backlogAt` is the next to write. */
  private backlog: ReadonlyArray<LiveTrailerEvent | LiveSignal> = [];
  private backlogAt = 0;
  private held: boolean;
  /** The newest position written (or skipped as covered): the client has everything up to it. */
  private cursor: string | null = null;
  private readonly fleetIds: ReadonlySet<number> | null;
  private readonly trailerIds: ReadonlySet<string> | null;

  constructor(
    private readonly hub: LiveHub,
    readonly customerId: string,
    readonly sink: LiveSink,
    private readonly maxPendingTrailers: number,
    options: LiveSubscribeOptions,
    private readonly onRemove: (subscriber: Subscriber, reason: TrailwireError | null) => void,
  ) {
    this.held = options.held === true;
    this.positionAtSubscribe = hub.lastPosition;
    const { fleetIds, trailerIds } = options.filter ?? {};
    this.fleetIds = fleetIds?.length ? new Set(fleetIds) : null;
    this.trailerIds = trailerIds?.length ? new Set(trailerIds) : null;
  }

  get pendingTrailers(): number {
    return this.pending.size;
  }

  get caughtUpTo(): string | null {
    if (this.held || this.pending.size > 0 || this.backlogAt < this.backlog.length) return null;
    // Only what this stream was sent: the hub's newest position moves with every tenant's updates,
    // and a heartbeat carrying it would tell this client when and how often others' trailers change.
    return this.cursor;
  }

  matches(event: LiveTrailerEvent): boolean {
    if (event.customerId !== this.customerId) return false;
    if (this.fleetIds === null && this.trailerIds === null) return true;
    return this.fleetIds?.has(event.fleet.id) === true || this.trailerIds?.has(event.trailer.id) === true;
  }

  offer(event: LiveTrailerEvent): void {
    if (this.fleetIds !== null || this.trailerIds !== null) if (!this.matches(event)) return;
    if (this.writable && this.pending.size === 0 && !this.held && this.backlogAt === this.backlog.length) {
      this.write(event);
      return;
    }
    // A trailer updated again moves to the back with its newest state: pending updates are written
    // in position order, so the positions a client sees only increase (what makes resume exact).
    this.pending.delete(event.trailer.id);
    this.pending.set(event.trailer.id, event);
    if (this.pending.size > this.maxPendingTrailers)
      this.end(
        new TrailwireError(
          'rate_limited',
          `The subscriber fell more than ${this.maxPendingTrailers} trailers behind; reconnect and resume from the last position received.`,
        ),
      );
  }

  start(backlog: ReadonlyArray<LiveTrailerEvent | LiveSignal>, dropThrough: string | null): void {
    if (!this.active || !this.held) return;
    this.held = false;
    this.backlog = backlog;
    this.backlogAt = 0;
    if (dropThrough !== null) {
      this.cursor = dropThrough;
      for (const [trailerId, event] of this.pending)
        if (event.position !== undefined && comparePositions(event.position, dropThrough) <= 0) this.pending.delete(trailerId);
    }
    if (this.writable) this.drained();
  }

  drained(): void {
    if (!this.active || this.held) return;
    this.writable = true;
    while (this.backlogAt < this.backlog.length) {
      const item = this.backlog[this.backlogAt++]!;
      if ('kind' in item) this.signal(item);
      else this.write(item);
      if (!this.writable || !this.active) return;
    }
    if (this.backlog.length > 0) {
      this.backlog = [];
      this.backlogAt = 0;
    }
    for (const [trailerId, event] of this.pending) {
      this.pending.delete(trailerId);
      this.write(event);
      if (!this.writable || !this.active) return;
    }
  }

  unsubscribe(): void {
    this.stop(null);
  }

  end(reason: TrailwireError): void {
    this.stop(reason);
  }

  private write(event: LiveTrailerEvent): void {
    try {
      this.writable = this.sink.write(event);
      if (event.position !== undefined) this.cursor = event.position;
    } catch (error) {
      // A broken transport ends its own stream, never the fan-out loop of the others.
      this.end(new TrailwireError('internal', 'The live update could not be written.', { cause: error }));
    }
  }

  private signal(signal: LiveSignal): void {
    try {
      this.writable = this.sink.signal?.(signal) ?? true;
      if (signal.kind === 'snapshot-end' && signal.position !== null) this.cursor = signal.position;
    } catch (error) {
      this.end(new TrailwireError('internal', 'The live update could not be written.', { cause: error }));
    }
  }

  private stop(reason: TrailwireError | null): void {
    if (!this.active) return;
    this.active = false;
    this.pending.clear();
    this.backlog = [];
    this.onRemove(this, reason);
  }
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

/**
 * The live event of a telemetry write created at `ts` (epoch ms), or null when the trailer is in no
 * fleet yet (an unassigned trailer is visible to no customer, so nobody is told about it).
 */
export function liveEventOf(applied: Pick<AppliedTelemetry, 'trailer' | 'fleet'>, ts: number): LiveTrailerEvent | null {
  const { trailer, fleet } = applied;
  if (fleet === null) return null;
  return { customerId: fleet.customerId, fleet: { id: fleet.id, name: fleet.name }, trailer, ts };
}
