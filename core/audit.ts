/**
 * What the access log and the audit trail share across transports (issue 17), without a logger in
 * the core: a request's id, the levels an access line may be written at, and the sampling of limit hits — a client
 * flooding a limit must not flood the log, so a limit hit is logged at most once per key (principal
 * or client address, and route) per window, the next line saying how many were left out.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from './clock.ts';

const ACCEPTABLE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * A request's id, the same rule on every transport: the one the caller (or a proxy) sent when it is
 * well-formed — so a caller can quote its own — and a new UUID otherwise.
 */
export function requestIdFrom(incoming: unknown): string {
  return typeof incoming === 'string' && ACCEPTABLE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** The pino levels an access-log line can be written at (`--access-log-level`). */
export const ACCESS_LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type AccessLogLevel = (typeof ACCESS_LOG_LEVELS)[number];

/** Milliseconds, to 0.1 ms, since `started` (a `performance.now()`): an access line's `durationMs`. */
export function millisecondsSince(started: number): number {
  return Math.round((performance.now() - started) * 10) / 10;
}

export interface OncePerWindowOptions {
  /** The window, in ms. Required. */
  windowMs: number;
  clock: Clock;
  /** Keys remembered at most; the oldest is forgotten first (a flood of distinct keys stays bounded). Default 10,000. */
  maxKeys?: number;
}

/** Lets the first event of each key through per window, and counts the ones it holds back. */
export class OncePerWindow {
  private readonly seen = new Map<string, { windowStart: number; suppressed: number }>();
  private readonly maxKeys: number;

  constructor(private readonly options: OncePerWindowOptions) {
    if (!(options.windowMs > 0)) throw new TypeError(`OncePerWindow: \`windowMs\` must be a positive number, got ${options.windowMs}`);
    this.maxKeys = options.maxKeys ?? 10_000;
  }

  /**
   * Whether an event of `key` should be logged now: answers the number of events held back since the
   * last one logged (0 or more), or null when this one is held back.
   */
  admit(key: string): number | null {
    const now = this.options.clock.now();
    const entry = this.seen.get(key);
    if (entry && now - entry.windowStart < this.options.windowMs) {
      entry.suppressed += 1;
      return null;
    }
    const suppressed = entry?.suppressed ?? 0;
    this.seen.delete(key);
    if (this.seen.size >= this.maxKeys) this.seen.delete(this.seen.keys().next().value!);
    this.seen.set(key, { windowStart: now, suppressed: 0 });
    return suppressed;
  }
}
