/**
 * The Redis backend of the fixed-window limits (contract 7 and 11): a `WindowCounter` that every
 * Trailwire process shares, so that a limit holds across all of them. It only counts: the window maths
 * (alignment, key per window, what is allowed) stays in the core's `FixedWindowLimiter`. The
 * increments asked for in one event-loop turn (every limit of the requests that turn read) go in one
 * round trip running a small Lua script over all their keys, so that each count and its expiry are set
 * atomically — no request can see a key that counts but never expires — and a busy server makes one
 * call a turn instead of one or two a request. The peeks of a turn (a partner's new VINs, whether
 * each was counted today) go in one MGET likewise (issue 41).
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { TrailwireError } from '../../core/errors.ts';
import type { WindowCounter } from '../../core/rate-limit.ts';
import { TurnLookup } from '../../core/turn-lookup.ts';

export interface RedisWindowCounterOptions {
  /** A connected ioredis client; the counter does not close it. Required. */
  redis: Redis;
  /** Prepended to every counter key, so that several deployments can share one Redis. Default `'trailwire:window:'`. */
  keyPrefix?: string;
}

export const DEFAULT_REDIS_WINDOW_COUNTER_OPTIONS = {
  keyPrefix: 'trailwire:window:',
} as const satisfies Omit<Required<RedisWindowCounterOptions>, 'redis'>;

/**
 * For each key in order, INCR, and on the first count PEXPIREAT at the end of its window (the ARGV of
 * the same position): the window's key then disappears by itself once the window is over. Later
 * increments leave the expiry alone (the limiter always passes the same end for the same key). A key
 * given twice counts twice. Answers the new counts, in order.
 */
const INCREMENT_SCRIPT = `
local counts = {}
for i, key in ipairs(KEYS) do
  local count = redis.call('INCR', key)
  if count == 1 then
    redis.call('PEXPIREAT', key, ARGV[i])
  end
  counts[i] = count
end
return counts
`;
const INCREMENT_SHA = createHash('sha1').update(INCREMENT_SCRIPT).digest('hex');

interface PendingIncrement {
  key: string;
  expiresAt: number;
  resolve: (count: number) => void;
  reject: (error: unknown) => void;
}

export class RedisWindowCounter implements WindowCounter {
  private readonly redis: Redis;
  private readonly keyPrefix: string;
  /** Increments of this turn, sent together once it ends. */
  private pending: PendingIncrement[] = [];
  /** Counts asked for this turn, read together once it ends (keys with the prefix). */
  private readonly counts = new TurnLookup<string, number>(
    async (keys) => {
      const values = await this.redis.mget(...keys);
      return new Map(keys.map((key, i) => [key, values[i] === null || values[i] === undefined ? 0 : Number(values[i])]));
    },
    () => 0,
  );

  constructor(options: RedisWindowCounterOptions) {
    if (typeof options !== 'object' || options === null) throw badOption('options', 'must be an object');
    if (typeof options.redis?.evalsha !== 'function') throw badOption('redis', 'must be an ioredis client');
    const keyPrefix = options.keyPrefix ?? DEFAULT_REDIS_WINDOW_COUNTER_OPTIONS.keyPrefix;
    if (typeof keyPrefix !== 'string') throw badOption('keyPrefix', 'must be a string');
    this.redis = options.redis;
    this.keyPrefix = keyPrefix;
  }

  /** Adds one to `key` and answers the new count; the key expires at `expiresAt` (epoch ms). */
  increment(key: string, expiresAt: number): Promise<number> {
    return new Promise((resolve, reject) => {
      if (this.pending.length === 0) setImmediate(() => void this.sendPending());
      this.pending.push({ key: this.keyPrefix + key, expiresAt: Math.ceil(expiresAt), resolve, reject });
    });
  }

  /** One script call for every increment asked for since the last one. */
  private async sendPending(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    const keysThenExpiries: (string | number)[] = [...batch.map((item) => item.key), ...batch.map((item) => item.expiresAt)];
    let counts: unknown;
    try {
      try {
        counts = await this.redis.evalsha(INCREMENT_SHA, batch.length, ...keysThenExpiries);
      } catch (error) {
        // The server's script cache is empty (a restart, SCRIPT FLUSH, another node): EVAL loads it again.
        if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error;
        counts = await this.redis.eval(INCREMENT_SCRIPT, batch.length, ...keysThenExpiries);
      }
    } catch (error) {
      for (const item of batch) item.reject(error);
      return;
    }
    batch.forEach((item, i) => item.resolve(Number((counts as unknown[])[i])));
  }

  /** The current count of `key` (0 when absent or expired) without changing it. */
  peek(key: string): Promise<number> {
    return this.counts.get(this.keyPrefix + key);
  }
}

function badOption(field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `RedisWindowCounterOptions.${field} ${message}`, {
    errors: [{ path: field, message }],
  });
}
