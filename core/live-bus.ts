/**
 * The live bus (contract 8 and 11): where live updates travel between the processes that publish
 * them (intake, operator changes) and the hubs that fan them out (`core/live-hub.ts`). In-process by
 * default (`MemoryLiveBus`), shared across processes by a networked bus (Redis, `adapters/redis`),
 * so a payload taken in by one process reaches subscribers of every process. A hub listens to the
 * customers it has streams of, one by one, so a process hears only the updates one of its clients
 * wants (issue 41: hearing every update of the fleet cost every process a sixth of its CPU a payload,
 * and would not scale to 100,000 updates a second over dozens of processes). A bus may keep a replay
 * window (`core/live-replay.ts`): it then gives every event a `position`, delivered in position
 * order, and answers `replayAfter(customer, position)`.
 */
import { TrailwireError } from './errors.ts';
import { type LiveReplayOptions, ReplayRing, resolveReplayOptions } from './live-replay.ts';
import type { Clock } from './clock.ts';
import { systemClock } from './clock.ts';
import type { Trailer } from './model.ts';
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

export type LiveBusListener = (event: LiveTrailerEvent) => void;

/**
 * The seam for cross-process fan-out, one customer at a time: every event published reaches every
 * current listener of its customer in every process sharing the bus (the publisher's own included),
 * with every field intact; one publisher's events arrive in publish order; a listener that throws
 * does not stop the others; a stopped listener, or a closed bus, hears nothing more; a listener of
 * one customer hears nothing of another. Every implementation passes `test/conformance/live-bus.ts`.
 */
export interface LiveBus {
  /**
   * Hands an event to every listener of its customer; resolves once the bus has accepted it. A bus
   * with a replay window sets `position` on the event its listeners receive. Rejects `unavailable` once closed.
   */
  publish(event: LiveTrailerEvent, options?: LivePublishOptions): Promise<void>;
  /**
   * Starts handing the customer's events to `listener`. Resolves once every event of the customer
   * published from then on reaches it (a networked bus has its subscription confirmed; while the
   * network is away, at once: what this process publishes still reaches it). Answers the function
   * that stops it (a second call is harmless).
   */
  listen(customerId: string, listener: LiveBusListener): Promise<() => void>;
  /** Whether the bus keeps a replay window: it positions every event and `replayAfter` can answer. */
  readonly replays: boolean;
  /**
   * The newest position the window has issued, to any customer: read once `listen` has resolved,
   * every event of that customer positioned after it reaches the listener. Null when the bus keeps
   * no window or has issued none.
   */
  newestPosition(): Promise<string | null>;
  /**
   * The customer's events published after `position`, oldest first and with their positions, or
   * null when `position` is not resumable (`core/live-replay.ts`: something after it left the
   * window, or this window never issued it) — always null on a bus without a window. It costs in
   * proportion to the customer's events it answers, not to the window (issue 37).
   */
  replayAfter(customerId: string, position: string): Promise<LiveTrailerEvent[] | null>;
  /** Stops delivery to every listener and releases the bus's resources. Idempotent. */
  close(): Promise<void>;
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
export class MemoryLiveBus implements LiveBus {
  private readonly ring: ReplayRing<LiveTrailerEvent> | null;
  private readonly listeners = new Map<string, Set<LiveBusListener>>();
  /** The `changeId`s published, with when (Map order: oldest first), forgotten with the window. */
  private readonly changesPublished = new Map<string, number>();
  private readonly clock: Clock;
  private readonly windowMs: number;
  private readonly onListenerError: (error: unknown) => void;
  private closed = false;

  constructor(options: MemoryLiveBusOptions = {}) {
    const replay = resolveReplayOptions(options.replay, 'MemoryLiveBus.replay');
    this.clock = options.clock ?? systemClock;
    this.windowMs = replay.replaySeconds * 1000;
    this.ring = replay.replaySeconds > 0 ? new ReplayRing<LiveTrailerEvent>(this.clock, replay) : null;
    this.onListenerError = options.onListenerError ?? ((error) => queueMicrotask(() => { throw error; }));
  }

  get replays(): boolean {
    return this.ring !== null;
  }

  async replayAfter(customerId: string, position: string): Promise<LiveTrailerEvent[] | null> {
    return this.ring?.after(customerId, position)?.map((entry) => entry.item) ?? null;
  }

  async newestPosition(): Promise<string | null> {
    return this.ring?.newest ?? null;
  }

  async listen(customerId: string, listener: LiveBusListener): Promise<() => void> {
    // A fresh wrapper per call, so listening with the same function twice delivers twice and each
    // stop removes exactly its own registration.
    const registration: LiveBusListener = (event) => listener(event);
    if (!this.closed) {
      let customers = this.listeners.get(customerId);
      if (!customers) this.listeners.set(customerId, (customers = new Set()));
      customers.add(registration);
    }
    return () => {
      const customers = this.listeners.get(customerId);
      if (customers?.delete(registration) && customers.size === 0) this.listeners.delete(customerId);
    };
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

  /** Positions the event (when the bus keeps a window) and calls every listener of its customer with it. */
  async publish(event: LiveTrailerEvent, options?: LivePublishOptions): Promise<void> {
    if (this.closed) throw new TrailwireError('unavailable', 'The live bus is closed.');
    // Several cores of one process may share this bus, each reading the store's change feed.
    if (options?.changeId !== undefined && this.ring && !this.firstPublished(options.changeId)) return;
    let delivered = event;
    if (this.ring) {
      const positioned = { ...event, position: '' };
      positioned.position = this.ring.append(event.customerId, positioned);
      delivered = positioned;
    }
    for (const listener of this.listeners.get(event.customerId) ?? []) {
      try {
        listener(delivered);
      } catch (error) {
        this.onListenerError(error);
      }
    }
  }

  /** Stops delivery to every listener. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
  }
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

