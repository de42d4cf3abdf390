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
 */
import { TrailwireError } from './errors.ts';
import { MemoryChannel } from './memory-channel.ts';
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
}

export type LiveBusListener = (event: LiveTrailerEvent) => void;

/**
 * The seam for cross-process fan-out. Every implementation passes `test/conformance/live-bus.ts`:
 * each event published reaches every current listener (of every process sharing the bus), events
 * of one publisher arrive in publish order, and an unsubscribed or closed bus delivers nothing more.
 */
export interface LiveBus {
  /** Hands an event to every listener; resolves once the bus has accepted it. */
  publish(event: LiveTrailerEvent): Promise<void>;
  /** Adds a listener; answers the function that removes it. */
  subscribe(listener: LiveBusListener): () => void;
  /** Stops delivery to every listener and releases the bus's resources. */
  close(): Promise<void>;
}

/**
 * The in-process bus of the embedded default. Listeners are called synchronously in `publish`, one
 * after the other; a listener that throws does not stop the others (its error is reported to
 * `onListenerError`, by default re-thrown asynchronously so it is not lost).
 */
export class MemoryLiveBus extends MemoryChannel<LiveTrailerEvent> implements LiveBus {
  constructor(onListenerError?: (error: unknown) => void) {
    super('live bus', onListenerError);
  }
}

/** One stream, as the hub sees it; the transport adapter implements it. */
export interface LiveSink {
  /**
   * Hands one update to the transport. Answers false when the transport's buffer is full: the hub
   * then writes nothing more to this sink until `LiveSubscription.drained()` is called.
   */
  write(event: LiveTrailerEvent): boolean;
  /** Ends the stream with `reason` (the hub has already forgotten the subscription). */
  end(reason: TrailwireError): void;
}

/** The hub's handle on one subscriber, held by the transport adapter. */
export interface LiveSubscription {
  readonly customerId: string;
  /** How many trailers have an update waiting for the transport to drain. */
  readonly pendingTrailers: number;
  /** Whether the subscription still receives updates (false once unsubscribed or ended). */
  readonly active: boolean;
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

/** Fans events of the bus out to the subscribers of each customer. */
export class LiveHub {
  private readonly bus: LiveBus;
  private readonly ownsBus: boolean;
  private readonly maxPendingTrailers: number;
  private readonly byCustomer = new Map<string, Set<Subscriber>>();
  private readonly stopListening: () => void;
  private closed = false;

  constructor(options: LiveHubOptions = {}) {
    const settings = { ...HUB_DEFAULTS, ...options };
    if (!Number.isInteger(settings.maxPendingTrailers) || settings.maxPendingTrailers < 1)
      throw new TypeError(`LiveHub: \`maxPendingTrailers\` must be a positive integer, got ${settings.maxPendingTrailers}`);
    this.maxPendingTrailers = settings.maxPendingTrailers;
    this.ownsBus = options.bus === undefined;
    this.bus = options.bus ?? new MemoryLiveBus();
    this.stopListening = this.bus.subscribe((event) => this.deliver(event));
  }

  /** Publishes an event through the bus (to the subscribers of every hub on it, this one included). */
  async publish(event: LiveTrailerEvent): Promise<void> {
    if (this.closed) throw new TrailwireError('unavailable', 'The live hub is closed.');
    await this.bus.publish(event);
  }

  /** Starts delivering the customer's updates to `sink`. */
  subscribe(customerId: string, sink: LiveSink): LiveSubscription {
    if (this.closed) throw new TrailwireError('unavailable', 'The live hub is closed.');
    const subscriber = new Subscriber(customerId, sink, this.maxPendingTrailers, (which, reason) => this.remove(which, reason));
    let subscribers = this.byCustomer.get(customerId);
    if (!subscribers) {
      subscribers = new Set();
      this.byCustomer.set(customerId, subscribers);
    }
    subscribers.add(subscriber);
    return subscriber;
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
  deliverHere(event: LiveTrailerEvent): void {
    if (!this.closed) this.deliver(event);
  }

  private deliver(event: LiveTrailerEvent): void {
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
  /** Latest waiting update per trailer id; Map order = the order the trailers became pending. */
  private readonly pending = new Map<string, LiveTrailerEvent>();

  constructor(
    readonly customerId: string,
    readonly sink: LiveSink,
    private readonly maxPendingTrailers: number,
    private readonly onRemove: (subscriber: Subscriber, reason: TrailwireError | null) => void,
  ) {}

  get pendingTrailers(): number {
    return this.pending.size;
  }

  offer(event: LiveTrailerEvent): void {
    if (this.writable && this.pending.size === 0) {
      this.write(event);
      return;
    }
    // Replacing an existing key keeps its position: the trailer keeps its place in the queue.
    this.pending.set(event.trailer.id, event);
    if (this.pending.size > this.maxPendingTrailers)
      this.end(
        new TrailwireError(
          'rate_limited',
          `The subscriber fell more than ${this.maxPendingTrailers} trailers behind; reconnect and re-read the current state.`,
        ),
      );
  }

  drained(): void {
    if (!this.active) return;
    this.writable = true;
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
    } catch (error) {
      // A broken transport ends its own stream, never the fan-out loop of the others.
      this.end(new TrailwireError('internal', 'The live update could not be written.', { cause: error }));
    }
  }

  private stop(reason: TrailwireError | null): void {
    if (!this.active) return;
    this.active = false;
    this.pending.clear();
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
