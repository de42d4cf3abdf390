/**
 * The replay window of the live feed (contract 8, "no gaps"): every live update is given a position
 * as it is published, and the last few minutes of updates are kept so that a subscriber that
 * reconnects with the last position it saw receives every update it missed, in order — or, when its
 * position has left the window, is told so (and sent a snapshot) rather than silently missing some.
 *
 * Positions are Redis stream ids, `<epoch ms>-<sequence>`, whichever window issued them: the
 * networked window of a scale-out deployment is a Redis stream (`adapters/redis/live-replay.ts`),
 * whose ids are exactly that, and the in-process `ReplayRing` below issues ids of the same form from
 * the injected clock, so the hub compares positions the same way over both (`comparePositions`).
 *
 * When a position can be resumed. A window drops its oldest updates (older than `replaySeconds`, or
 * beyond `maxEvents`), always from the oldest end. A position P is resumable exactly when nothing
 * after it was dropped: P is still held, or P is the newest position ever dropped (an idle feed whose
 * last update aged out; everything after it is still there). Any other position — older, unknown, or
 * issued by a window that no longer exists (a restarted process, a flushed Redis) — is not, and the
 * subscriber gets the explicit signal. Both windows apply this one rule, and
 * `test/conformance/live-bus.ts` holds them to it.
 */
import type { Clock } from './clock.ts';

/** `LiveHubOptions.replay`: the size of the in-process window (the Redis window takes the same). */
export interface LiveReplayOptions {
  /** How long an update stays resumable, in seconds (`serve --live-replay-seconds`). 0 keeps no window. Default 300. */
  replaySeconds?: number;
  /**
   * The most updates held, whatever their age, so that a burst cannot grow the window without bound.
   * Default 100,000 (at 500 updates/s that is 200 s; each held update is one shared reference in
   * memory, or about 0.5 KB in Redis).
   */
  maxEvents?: number;
}

export const LIVE_REPLAY_DEFAULTS = { replaySeconds: 300, maxEvents: 100_000 } as const satisfies Required<LiveReplayOptions>;

/** Checks and fills in replay options, naming the bad field after `owner`. */
export function resolveReplayOptions(options: LiveReplayOptions | undefined, owner: string): Required<LiveReplayOptions> {
  const settings = { ...LIVE_REPLAY_DEFAULTS, ...stripUndefined(options ?? {}) };
  if (!Number.isInteger(settings.replaySeconds) || settings.replaySeconds < 0)
    throw new TypeError(`${owner}: \`replaySeconds\` must be a non-negative integer, got ${settings.replaySeconds}`);
  if (!Number.isInteger(settings.maxEvents) || settings.maxEvents < 1)
    throw new TypeError(`${owner}: \`maxEvents\` must be a positive integer, got ${settings.maxEvents}`);
  return settings;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const POSITION = /^(\d{1,15})-(\d{1,15})$/;

/** Whether `value` has the form of a position (`<ms>-<seq>`); anything else is refused as invalid input. */
export function isPosition(value: unknown): value is string {
  return typeof value === 'string' && POSITION.test(value);
}

/** Orders two positions: negative when `a` comes first, 0 when equal, positive when `b` does. */
export function comparePositions(a: string, b: string): number {
  const [, aMs, aSeq] = POSITION.exec(a)!;
  const [, bMs, bSeq] = POSITION.exec(b)!;
  return Number(aMs) - Number(bMs) || Number(aSeq) - Number(bSeq);
}

/**
 * The in-process window: positions issued from the clock (never going back, as a Redis stream's
 * ids), updates held in arrival order and dropped from the oldest end on each append.
 */
export class ReplayRing<T> {
  private readonly positions: string[] = [];
  private readonly items: T[] = [];
  /** Index of the oldest held entry (entries before it are dropped; compacted now and then). */
  private head = 0;
  private lastMs = 0;
  private lastSeq = 0;
  private newestDropped: string | null = null;
  private readonly windowMs: number;

  constructor(
    private readonly clock: Clock,
    private readonly settings: Required<LiveReplayOptions>,
  ) {
    this.windowMs = settings.replaySeconds * 1000;
  }

  /** How many updates are held. */
  get size(): number {
    return this.positions.length - this.head;
  }

  /** Holds `item` and answers its position. */
  append(item: T): string {
    const now = Math.floor(this.clock.now());
    if (now > this.lastMs) {
      this.lastMs = now;
      this.lastSeq = 0;
    } else this.lastSeq++;
    const position = `${this.lastMs}-${this.lastSeq}`;
    this.positions.push(position);
    this.items.push(item);
    this.trim(now);
    return position;
  }

  /**
   * What was appended after `position`, oldest first (with their positions), or null when the
   * position is not resumable (see the module comment).
   */
  after(position: string): Array<{ position: string; item: T }> | null {
    const start = this.indexAfter(position);
    if (start === null) return null;
    const out: Array<{ position: string; item: T }> = [];
    for (let i = start; i < this.positions.length; i++) out.push({ position: this.positions[i]!, item: this.items[i]! });
    return out;
  }

  private indexAfter(position: string): number | null {
    if (position === this.newestDropped) return this.head;
    // Binary search: positions are strictly increasing.
    let low = this.head;
    let high = this.positions.length - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      const order = comparePositions(this.positions[mid]!, position);
      if (order === 0) return mid + 1;
      if (order < 0) low = mid + 1;
      else high = mid - 1;
    }
    return null;
  }

  private trim(now: number): void {
    const oldestKept = now - this.windowMs;
    while (this.size > 0 && (this.size > this.settings.maxEvents || Number(this.positions[this.head]!.split('-')[0]) < oldestKept)) {
      this.newestDropped = this.positions[this.head]!;
      (this.items as Array<T | undefined>)[this.head] = undefined;
      this.head++;
    }
    // Compact once the dropped prefix is as long as what is held: amortised O(1) per append.
    if (this.head > 1024 && this.head >= this.size) {
      this.positions.splice(0, this.head);
      this.items.splice(0, this.head);
      this.head = 0;
    }
  }
}
