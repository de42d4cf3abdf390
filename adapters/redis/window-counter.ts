/**
 * The Redis backend of the fixed-window limits (contract 7 and 11): a `WindowCounter` that every
 * Trailwire process shares, so that a limit holds across all of them. It only counts: the window maths
 * (alignment, key per window, what is allowed) stays in the core's `FixedWindowLimiter`. Each increment
 * is one round trip running a small Lua script, so that the count and its expiry are set atomically:
 * no request can see a key that counts but never expires.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { TrailwireError } from '../../core/errors.ts';
import type { WindowCounter } from '../../core/rate-limit.ts';

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
 * INCR, and on the first count PEXPIREAT at the end of the window: the window's key then disappears
 * by itself once the window is over. Later increments leave the expiry alone (the limiter always
 * passes the same end for the same key).
 */
const INCREMENT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIREAT', KEYS[1], ARGV[1])
end
return count
`;
const INCREMENT_SHA = createHash('sha1').update(INCREMENT_SCRIPT).digest('hex');

export class RedisWindowCounter implements WindowCounter {
  private readonly redis: Redis;
  private readonly keyPrefix: string;

  constructor(options: RedisWindowCounterOptions) {
    if (typeof options !== 'object' || options === null) throw badOption('options', 'must be an object');
    if (typeof options.redis?.evalsha !== 'function') throw badOption('redis', 'must be an ioredis client');
    const keyPrefix = options.keyPrefix ?? DEFAULT_REDIS_WINDOW_COUNTER_OPTIONS.keyPrefix;
    if (typeof keyPrefix !== 'string') throw badOption('keyPrefix', 'must be a string');
    this.redis = options.redis;
    this.keyPrefix = keyPrefix;
  }

  /** Adds one to `key` and answers the new count; the key expires at `expiresAt` (epoch ms). */
  async increment(key: string, expiresAt: number): Promise<number> {
    const args = [1, this.keyPrefix + key, Math.ceil(expiresAt)] as const;
    try {
      return Number(await this.redis.evalsha(INCREMENT_SHA, ...args));
    } catch (error) {
      // The server's script cache is empty (a restart, SCRIPT FLUSH, another node): EVAL loads it again.
      if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error;
      return Number(await this.redis.eval(INCREMENT_SCRIPT, ...args));
    }
  }

  /** The current count of `key` (0 when absent or expired) without changing it. */
  async peek(key: string): Promise<number> {
    const count = await this.redis.get(this.keyPrefix + key);
    return count === null ? 0 : Number(count);
  }
}

function badOption(field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `RedisWindowCounterOptions.${field} ${message}`, {
    errors: [{ path: field, message }],
  });
}
