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
 * after it was dropped and it is no older than `replaySeconds`: P lies between the newest position
 * dropped (or, when none was, the first this window issued) and the newest it issued. Any other
 * position — older, from the future, or issued by a window that no longer exists (a restarted
 * process, a flushed Redis) — is not, and the subscriber gets the explicit signal. P need not be one
 * of the customer's own updates (a snapshot's end is the window's newest position when it was read);
 * what is replayed after it is only the customer's. Both windows apply this one rule, and
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

/** A window's entries of one key (a customer), oldest first. */
interface KeyEntries<T> {
  positions: string[];
  items: T[];
  /** Index of the oldest held entry (entries before it are dropped; compacted now and then). */
  head: number;
}

/**
 * The in-process window: positions issued from the clock (never going back, as a Redis stream's
 * ids), updates held in arrival order and dropped from the oldest end on each append. Each update
 * is held under a key (its customer) as well, so that reading what followed a position for one key
 * costs in proportion to that key's updates, not to the whole window (issue 37: 16 ms a resume at
 * 60,000 updates when one customer's resume walked every customer's updates).
 */
export class ReplayRing<T> {
  /** Every held entry's position and key, in position order: what ages out first. */
  private readonly positions: string[] = [];
  private readonly keys: string[] = [];
  private head = 0;
  private readonly byKey = new Map<string, KeyEntries<T>>();
  private lastMs = 0;
  private lastSeq = 0;
  private newestIssued: string | null = null;
  private oldestIssued: string | null = null;
  private newestDropped: string | null = null;
  private readonly windowMs: number;

  constructor(
    private readonly clock: Clock,
    private readonly settings: Required<LiveReplayOptions>,
  ) {
    this.windowMs = settings.replaySeconds * 1000;
  }

  /** The newest position issued, or null before the first. */
  get newest(): string | null {
    return this.newestIssued;
  }

  /** How many updates are held. */
  get size(): number {
    return this.positions.length - this.head;
  }

  /** Holds `item` under `key` and answers its position. */
  append(key: string, item: T): string {
    const now = Math.floor(this.clock.now());
    if (now > this.lastMs) {
      this.lastMs = now;
      this.lastSeq = 0;
    } else this.lastSeq++;
    const position = `${this.lastMs}-${this.lastSeq}`;
    this.oldestIssued ??= position;
    this.newestIssued = position;
    this.positions.push(position);
    this.keys.push(key);
    let entries = this.byKey.get(key);
    if (!entries) {
      entries = { positions: [], items: [], head: 0 };
      this.byKey.set(key, entries);
    }
    entries.positions.push(position);
    entries.items.push(item);
    this.trim(now);
    return position;
  }

  /**
   * What was appended under `key` after `position`, oldest first (with their positions), or null
   * when the position is not resumable (see the module comment).
   */
  after(key: string, position: string): Array<{ position: string; item: T }> | null {
    if (!this.resumable(position)) return null;
    const entries = this.byKey.get(key);
    if (!entries) return [];
    const out: Array<{ position: string; item: T }> = [];
    for (let i = firstAfter(entries.positions, entries.head, position); i < entries.positions.length; i++)
      out.push({ position: entries.positions[i]!, item: entries.items[i]! });
    return out;
  }

  /** Nothing after `position` was dropped, it was issued here, and it is no older than the window. */
  private resumable(position: string): boolean {
    if (!isPosition(position) || this.newestIssued === null) return false;
    const low = this.newestDropped ?? this.oldestIssued!;
    if (comparePositions(position, low) < 0 || comparePositions(position, this.newestIssued) > 0) return false;
    return positionMs(position) >= Math.floor(this.clock.now()) - this.windowMs;
  }

  private trim(now: number): void {
    const oldestKept = now - this.windowMs;
    while (this.size > 0 && (this.size > this.settings.maxEvents || positionMs(this.positions[this.head]!) < oldestKept)) {
      this.newestDropped = this.positions[this.head]!;
      const key = this.keys[this.head]!;
      this.head++;
      // The key's oldest entry is this one: both lists are in position order.
      const entries = this.byKey.get(key)!;
      (entries.items as Array<T | undefined>)[entries.head] = undefined;
      entries.head++;
      if (entries.head === entries.positions.length) this.byKey.delete(key);
      else compact(entries);
    }
    if (compactable(this.head, this.positions.length)) {
      this.positions.splice(0, this.head);
      this.keys.splice(0, this.head);
      this.head = 0;
    }
  }
}

/** Whether a list's dropped prefix is as long as what it holds: compacting then is amortised O(1) per append. */
function compactable(head: number, length: number): boolean {
  return head > 1024 && head >= length - head;
}

function compact<T>(entries: KeyEntries<T>): void {
  if (!compactable(entries.head, entries.positions.length)) return;
  entries.positions.splice(0, entries.head);
  entries.items.splice(0, entries.head);
  entries.head = 0;
}

/** The index of the first of `positions` (increasing, from `from`) after `position`. */
function firstAfter(positions: readonly string[], from: number, position: string): number {
  let low = from;
  let high = positions.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (comparePositions(positions[mid]!, position) <= 0) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** The epoch ms a position was issued at. */
export function positionMs(position: string): number {
  return Number(position.slice(0, position.indexOf('-')));
}
