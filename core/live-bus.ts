/**
 * The live bus (contract 8 and 11): where live updates travel between the processes that publish
 * them (intake, operator changes) and the hubs that fan them out (`core/live-hub.ts`). In-process by
 * default (`MemoryLiveBus`), shared across processes by a networked bus (Redis, `adapters/redis`),
 * so a payload taken in by one process reaches subscribers of every process. A bus may keep a replay
 * window (`core/live-replay.ts`): it then gives every event a `position`, delivered in position
 * order, and answers `replayAfter(customer, position)`.
 */
import { type Channel, type ChannelListener, MemoryChannel } from './channel.ts';
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


/**
 * The live event of a telemetry write created at `ts` (epoch ms), or null when the trailer is in no
 * fleet yet (an unassigned trailer is visible to no customer, so nobody is told about it).
 */
export function liveEventOf(applied: Pick<AppliedTelemetry, 'trailer' | 'fleet'>, ts: number): LiveTrailerEvent | null {
  const { trailer, fleet } = applied;
  if (fleet === null) return null;
  return { customerId: fleet.customerId, fleet: { id: fleet.id, name: fleet.name }, trailer, ts };
}

