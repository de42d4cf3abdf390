/**
 * Fixed-window rate limits (contract 7). Windows are aligned to clock boundaries: a 5-minute window
 * resets at :00, :05, ... — so every process sharing a counter backend agrees on the window without
 * coordination. The window maths lives here once; a backend (`WindowCounter`: memory here, Redis in
 * `adapters/redis`) only counts atomically.
 */
import type { Clock } from './clock.ts';
import { TrailwireError, type RateLimitState } from './errors.ts';

// The state a limit answers is defined beside the error that carries it, so the arrow points one way.
export type { RateLimitState } from './errors.ts';

/** The counting primitive a limiter backend implements. */
export interface WindowCounter {
  /**
   * Adds one to `key` and answers the new count. The count may be forgotten once `expiresAt`
   * (epoch ms, the end of the window the key belongs to) has passed.
   */
  increment(key: string, expiresAt: number): Promise<number>;
  /** The current count of `key` (0 when absent) without changing it. */
  peek(key: string): Promise<number>;
  /**
   * The part of each limit this process may grant right now, in (0, 1]. Absent: 1, the counts are
   * the whole deployment's. A counter that counts alone while the shared one is down answers 1/N,
   * N being the processes last seen sharing it (`FailoverWindowCounter`).
   */
  share?(): number;
}


export interface FixedWindowLimiterOptions {
  /** Names the limit in counter keys and messages, e.g. `authenticate`. */
  name: string;
  /** Requests allowed per window; a positive integer. */
  limit: number;
  /** The window length in seconds; a positive integer. */
  windowSeconds: number;
  counter: WindowCounter;
  clock: Clock;
}

/** Subjects whose counter key a limiter keeps for its current window, at most. */
const MAX_CACHED_KEYS = 100_000;

export class FixedWindowLimiter {
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
  private readonly counter: WindowCounter;
  private readonly clock: Clock;
  /** The keys of the window last counted in, by subject (`keyOf`). */
  private keys = { windowStart: Number.NaN, bySubject: new Map<string, string>() };

  constructor(options: FixedWindowLimiterOptions) {
    if (!options.name) throw new TypeError('FixedWindowLimiter: `name` is required');
    if (!Number.isInteger(options.limit) || options.limit < 1)
      throw new TypeError(`FixedWindowLimiter ${options.name}: \`limit\` must be a positive integer, got ${options.limit}`);
    if (!Number.isInteger(options.windowSeconds) || options.windowSeconds < 1)
      throw new TypeError(
        `FixedWindowLimiter ${options.name}: \`windowSeconds\` must be a positive integer, got ${options.windowSeconds}`,
      );
    this.name = options.name;
    this.limit = options.limit;
    this.windowMs = options.windowSeconds * 1000;
    this.counter = options.counter;
    this.clock = options.clock;
  }

  /**
   * Counts one request of `subject` in the window of `at` (default: now) and says whether it is
   * within the limit. A caller that records when it received the request passes that time, so the
   * request counts in the window its recorded time says.
   */
  async consume(subject: string, at: number = this.clock.now()): Promise<RateLimitState> {
    const window = this.windowOf(at);
    const count = await this.counter.increment(this.keyOf(subject, window.start), window.end);
    const limit = this.limitNow();
    return this.stateOf(count, window.end, count <= limit, limit);
  }

  /** The state of `subject` in the window of `at` (default: now) without counting a request: allowed while the window has room. */
  async peek(subject: string, at: number = this.clock.now()): Promise<RateLimitState> {
    const window = this.windowOf(at);
    const count = await this.counter.peek(this.keyOf(subject, window.start));
    const limit = this.limitNow();
    return this.stateOf(count, window.end, count < limit, limit);
  }

  /** Consumes (in the window of `at`, default now) and throws `rate_limited` (carrying the state) when over the limit. */
  async enforce(subject: string, at: number = this.clock.now()): Promise<RateLimitState> {
    const state = await this.consume(subject, at);
    if (!state.allowed) throw this.limitedError(state);
    return state;
  }

  limitedError(state: RateLimitState): TrailwireError {
    return new TrailwireError(
      'rate_limited',
      `The ${this.name} limit of ${state.limit} per ${this.windowMs / 1000} s is exhausted; retry in ${state.resetSeconds} s.`,
      { rateLimit: state },
    );
  }

  private windowOf(at: number): { start: number; end: number } {
    const start = Math.floor(at / this.windowMs) * this.windowMs;
    return { start, end: start + this.windowMs };
  }

  /**
   * The counter key of `subject` in the window starting at `windowStart`, built once per subject and
   * window: a subject's requests then hand the counter the same string, whose hash is kept with it,
   * rather than a new one to join, flatten and hash each time (the intake path counts two windows
   * per request).
   */
  private keyOf(subject: string, windowStart: number): string {
    if (this.keys.windowStart !== windowStart) this.keys = { windowStart, bySubject: new Map() };
    let key = this.keys.bySubject.get(subject);
    if (key === undefined) {
      key = `${this.name}:${subject}:${windowStart}`;
      // Bounded: a day-long window peeked for many subjects (new VINs) must not grow without end.
      if (this.keys.bySubject.size >= MAX_CACHED_KEYS) this.keys.bySubject.clear();
      this.keys.bySubject.set(subject, key);
    }
    return key;
  }

  /**
   * The limit this process applies now: the configured one, or its share while it counts alone —
   * rounded down so that the processes together never grant more than the limit, but at least one
   * request a window, so that a small limit split many ways does not refuse everything.
   */
  private limitNow(): number {
    const share = this.counter.share?.() ?? 1;
    return share >= 1 ? this.limit : Math.max(1, Math.floor(this.limit * share));
  }

  private stateOf(count: number, windowEnd: number, allowed: boolean, limit: number): RateLimitState {
    return {
      allowed,
      limit,
      remaining: Math.max(0, limit - count),
      resetSeconds: Math.max(1, Math.ceil((windowEnd - this.clock.now()) / 1000)),
    };
  }
}

/**
 * The in-process counter of the embedded default. Counts are grouped by the window end they expire
 * at, and whole groups are dropped once their window is over, so memory holds only live windows.
 */
export class MemoryWindowCounter implements WindowCounter {
  private readonly windows = new Map<number, Map<string, number>>();
  /** The earliest window end held: nothing expires before it, so most calls skip the sweep. */
  private nextExpiry = Number.POSITIVE_INFINITY;

  constructor(private readonly clock: Clock) {}

  async increment(key: string, expiresAt: number): Promise<number> {
    this.dropExpired();
    let counts = this.windows.get(expiresAt);
    if (!counts) {
      counts = new Map();
      this.windows.set(expiresAt, counts);
      if (expiresAt < this.nextExpiry) this.nextExpiry = expiresAt;
    }
    const count = (counts.get(key) ?? 0) + 1;
    counts.set(key, count);
    return count;
  }

  async peek(key: string): Promise<number> {
    this.dropExpired();
    // A key names its window (the limiter puts the window's start in it), so at most one group holds it.
    for (const counts of this.windows.values()) {
      const count = counts.get(key);
      if (count !== undefined) return count;
    }
    return 0;
  }

  private dropExpired(): void {
    const now = this.clock.now();
    if (now < this.nextExpiry) return;
    this.nextExpiry = Number.POSITIVE_INFINITY;
    for (const expiresAt of [...this.windows.keys()]) {
      if (expiresAt <= now) this.windows.delete(expiresAt);
      else if (expiresAt < this.nextExpiry) this.nextExpiry = expiresAt;
    }
  }
}

export interface FailoverWindowCounterOptions {
  /** The counter every process shares (Redis). Required. */
  shared: WindowCounter;
  clock: Clock;
  /**
   * How many processes share the limits, as last seen (at least 1): while the shared counter is down
   * each process grants its 1/N part of every limit. Default: always 1.
   */
  processes?: () => number;
  /** While the shared counter is down, one request at most this often tries it again (ms). Default 1000. */
  retryIntervalMs?: number;
  /**
   * Told once when the shared counter stops answering (with the error) and once when it answers
   * again — not per request, so a log line or a metric follows the outage, not the traffic.
   */
  onChange?: (up: boolean, error?: unknown) => void;
}

export const DEFAULT_FAILOVER_RETRY_INTERVAL_MS = 1000;

/**
 * A shared counter with a per-process fallback (contract 6 and 11: a limit backend being down is
 * not a refusal). While the shared counter answers, it counts. When it fails, the request is
 * counted in this process's own windows instead (the same keys, so the same windows), and `share()`
 * tells the limiter to grant this process only its 1/N part of each limit, so that N processes
 * together still hold the limit. Every `retryIntervalMs` one request tries the shared counter again
 * (one, so that a counter that hangs until its timeout delays one request, not all); when it
 * answers, counting is shared again. What was counted locally during the outage is not carried over:
 * for the rest of that window a subject may get up to its local part more than the limit, which is
 * the price of not refusing while the counter is away.
 */
export class FailoverWindowCounter implements WindowCounter {
  private readonly shared: WindowCounter;
  private readonly local: MemoryWindowCounter;
  private readonly clock: Clock;
  private readonly processes: () => number;
  private readonly retryIntervalMs: number;
  private readonly onChange: (up: boolean, error?: unknown) => void;
  private up = true;
  /** While down: when the next request may try the shared counter. */
  private nextTry = 0;

  constructor(options: FailoverWindowCounterOptions) {
    if (typeof options?.shared?.increment !== 'function') throw new TypeError('FailoverWindowCounter: `shared` must be a WindowCounter');
    const retryIntervalMs = options.retryIntervalMs ?? DEFAULT_FAILOVER_RETRY_INTERVAL_MS;
    if (!Number.isInteger(retryIntervalMs) || retryIntervalMs < 1)
      throw new TypeError(`FailoverWindowCounter: \`retryIntervalMs\` must be a positive integer, got ${retryIntervalMs}`);
    this.shared = options.shared;
    this.clock = options.clock;
    this.local = new MemoryWindowCounter(options.clock);
    this.processes = options.processes ?? (() => 1);
    this.retryIntervalMs = retryIntervalMs;
    this.onChange = options.onChange ?? (() => {});
  }

  /** Whether the shared counter answered the last time it was asked. */
  get sharedUp(): boolean {
    return this.up;
  }

  async increment(key: string, expiresAt: number): Promise<number> {
    const attempt = this.attempt();
    if (attempt !== 'local') {
      try {
        const count = await this.shared.increment(key, expiresAt);
        // Only a try made while down ends the outage: a slow call started before it is no news.
        if (attempt === 'probe') this.markUp();
        return count;
      } catch (error) {
        this.markDown(error);
      }
    }
    return this.local.increment(key, expiresAt);
  }

  async peek(key: string): Promise<number> {
    const attempt = this.attempt();
    if (attempt !== 'local') {
      try {
        const count = await this.shared.peek(key);
        // Only a try made while down ends the outage: a slow call started before it is no news.
        if (attempt === 'probe') this.markUp();
        return count;
      } catch (error) {
        this.markDown(error);
      }
    }
    return this.local.peek(key);
  }

  share(): number {
    if (this.up) return 1;
    const processes = this.processes();
    return Number.isFinite(processes) && processes > 1 ? 1 / Math.floor(processes) : 1;
  }

  /** Up: the shared counter. Down: a probe of it once per retry interval (moving the next try on first), else local. */
  private attempt(): 'shared' | 'probe' | 'local' {
    if (this.up) return 'shared';
    const now = this.clock.now();
    if (now < this.nextTry) return 'local';
    this.nextTry = now + this.retryIntervalMs;
    return 'probe';
  }

  private markDown(error: unknown): void {
    this.nextTry = this.clock.now() + this.retryIntervalMs;
    if (!this.up) return;
    this.up = false;
    this.onChange(false, error);
  }

  private markUp(): void {
    if (this.up) return;
    this.up = true;
    this.onChange(true);
  }
}
