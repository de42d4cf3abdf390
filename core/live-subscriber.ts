/**
 * One subscriber of the live hub (`core/live-hub.ts`): which of its customer's updates it is told
 * of (its filter), and what waits for its transport.
 *
 * Back-pressure policy. Each update carries the trailer's full current state, so a subscriber that
 * is behind needs only the latest update of each trailer, not the history. A sink's `write` answers
 * whether the transport can take more; once it answers false the hub stops writing to that
 * subscriber and keeps its pending updates coalesced: one entry per trailer, replaced in place by
 * newer updates, in the order the trailers first became pending (so the trailer that has waited
 * longest goes first). When the transport drains, pending updates are written oldest first until it
 * is full again. Updates of one trailer are therefore never reordered, and a subscriber that keeps
 * up sees every update. Memory per subscriber is bounded by the number of distinct trailers waiting
 * (`maxPendingTrailers`); a subscriber that exceeds it has its stream ended with `rate_limited`
 * (gRPC RESOURCE_EXHAUSTED) rather than silently losing a trailer: a dropped update would leave the
 * client with a stale trailer it cannot detect, whereas an ended stream tells it to reconnect and
 * resume. A slow subscriber never delays the others: fan-out only ever calls the non-blocking
 * `write` or touches the subscriber's own map.
 *
 * No gaps (issue 32). Pending updates are written in position order (a trailer updated again moves
 * to the back of the queue, carrying its newest state), so the positions a subscriber receives only
 * ever increase and "the last position I saw" means "I have everything up to there": what it
 * resumes from. A subscription may be opened *held* (`LiveSubscribeOptions.held`): it queues what
 * arrives while its stream reads a snapshot or the replay, then `start(backlog, dropThrough)` writes
 * that backlog first and drops queued updates the backlog already covers (by position), so nothing
 * falls between the two and nothing is sent twice.
 *
 * A snapshot's states sit in a backlog as one item (`LiveSnapshotStates`) and go to a sink that can
 * take them whole (`LiveSink.writeSnapshot`) in one call, answered like one update: a transport can
 * then send a snapshot shared by many streams as bytes serialized once, with one write per stream
 * (issue 37: 3,000 writes a stream made a reconnect storm cost every tenant). A sink without it is
 * handed the states one by one, as any backlog.
 */
import { TrailwireError } from './errors.ts';
import type { LiveTrailerEvent } from './live-bus.ts';
import { comparePositions } from './live-replay.ts';

/** One stream, as the hub sees it; the transport adapter implements it. */
export interface LiveSink {
  /**
   * Hands one update to the transport. Answers false when the transport's buffer is full: the hub
   * then writes nothing more to this sink until `LiveSubscription.drained()` is called.
   */
  write(event: LiveTrailerEvent): boolean;
  /** Writes a marker of the stream's start (see `LiveSignal`); answers as `write`. A sink never given a backlog with signals may leave it out. */
  signal?(signal: LiveSignal): boolean;
  /**
   * Hands a snapshot's states to the transport at once, in their order (none has a position);
   * answers as `write`. Left out, they are handed to `write` one by one.
   */
  writeSnapshot?(states: readonly LiveTrailerEvent[]): boolean;
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

/**
 * A snapshot's states in a backlog, kept together so that a sink can take them in one call; the
 * same array (of a snapshot shared between streams, `core/live-snapshot.ts`) for every stream.
 */
export interface LiveSnapshotStates {
  kind: 'snapshot';
  states: readonly LiveTrailerEvent[];
}

/** What `LiveSubscription.start` writes before the updates it queued: a replay or a snapshot, and signals. */
export type LiveBacklogItem = LiveTrailerEvent | LiveSignal | LiveSnapshotStates;

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
  start(backlog: readonly LiveBacklogItem[], dropThrough: string | null): void;
  /** The transport can take more again: pending updates are written until it is full or empty. */
  drained(): void;
  /** Stops delivery (the client went away). Idempotent; does not call `sink.end`. */
  unsubscribe(): void;
}


/** One subscriber's delivery state: whether its transport is writable, and what waits for it. Made by `LiveHub#subscribe`. */
export class Subscriber implements LiveSubscription {
  writable = true;
  active = true;
  /** Latest waiting update per trailer id; Map order = position order (a re-queued trailer moves to the back). */
  private readonly pending = new Map<string, LiveTrailerEvent>();
  /** What `start` hands over, written before `pending`; `backlogAt` is the next to write. */
  private backlog: readonly LiveBacklogItem[] = [];
  private backlogAt = 0;
  private held: boolean;
  /** The newest position written (or skipped as covered): the client has everything up to it. */
  private cursor: string | null = null;
  /**
   * What `start`'s backlog covers: an update at or before it that arrives later is not written again.
   * A replay is read from the window on another connection than the bus's messages, so it can hold
   * updates whose message has not reached this process yet (Redis: the stream entry is readable
   * before the PUBLISH of the same script call is delivered).
   */
  private coveredThrough: string | null = null;
  private readonly fleetIds: ReadonlySet<number> | null;
  private readonly trailerIds: ReadonlySet<string> | null;

  constructor(
    /** The hub's newest position now (what a snapshot read after this covers), or null. */
    readonly positionAtSubscribe: string | null,
    readonly customerId: string,
    readonly sink: LiveSink,
    private readonly maxPendingTrailers: number,
    options: LiveSubscribeOptions,
    private readonly onRemove: (subscriber: Subscriber, reason: TrailwireError | null) => void,
  ) {
    this.held = options.held === true;
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
    if (this.coveredThrough !== null && event.position !== undefined && comparePositions(event.position, this.coveredThrough) <= 0) return;
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

  start(backlog: readonly LiveBacklogItem[], dropThrough: string | null): void {
    if (!this.active || !this.held) return;
    this.held = false;
    this.backlog = this.sink.writeSnapshot ? backlog : backlog.flatMap((item): readonly LiveBacklogItem[] => ('kind' in item && item.kind === 'snapshot' ? item.states : [item]));
    this.backlogAt = 0;
    if (dropThrough !== null) {
      this.cursor = dropThrough;
      this.coveredThrough = dropThrough;
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
      if (!('kind' in item)) this.write(item);
      else if (item.kind === 'snapshot') this.writeSnapshot(item.states);
      else this.signal(item);
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

  private writeSnapshot(states: readonly LiveTrailerEvent[]): void {
    // Nothing to send: no write, as when the states were written one by one.
    if (states.length === 0) return;
    try {
      this.writable = this.sink.writeSnapshot!(states);
    } catch (error) {
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

