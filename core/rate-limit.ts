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

export class FixedWindowLimiter {
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
  private readonly counter: WindowCounter;
  private readonly clock: Clock;

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
    return this.stateOf(count, window.end, count <= this.limit);
  }

  /** The state of `subject` in the window of `at` (default: now) without counting a request: allowed while the window has room. */
  async peek(subject: string, at: number = this.clock.now()): Promise<RateLimitState> {
    const window = this.windowOf(at);
    const count = await this.counter.peek(this.keyOf(subject, window.start));
    return this.stateOf(count, window.end, count < this.limit);
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
      `The ${this.name} limit of ${this.limit} per ${this.windowMs / 1000} s is exhausted; retry in ${state.resetSeconds} s.`,
      { rateLimit: state },
    );
  }

  private windowOf(at: number): { start: number; end: number } {
    const start = Math.floor(at / this.windowMs) * this.windowMs;
    return { start, end: start + this.windowMs };
  }

  private keyOf(subject: string, windowStart: number): string {
    return `${this.name}:${subject}:${windowStart}`;
  }

  private stateOf(count: number, windowEnd: number, allowed: boolean): RateLimitState {
    return {
      allowed,
      limit: this.limit,
      remaining: Math.max(0, this.limit - count),
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
