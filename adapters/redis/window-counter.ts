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
 * For each key in order, INCRBY its count of the turn (the ARGV at 2i - 1), and on the key's first
 * count PEXPIREAT at the end of its window (the ARGV at 2i): the window's key then disappears by
 * itself once the window is over. Later increments leave the expiry alone (the limiter always passes
 * the same end for the same key). Answers the new counts, in order.
 */
const INCREMENT_SCRIPT = `
local counts = {}
for i, key in ipairs(KEYS) do
  local by = tonumber(ARGV[2 * i - 1])
  local count = redis.call('INCRBY', key, by)
  if count == by then
    redis.call('PEXPIREAT', key, ARGV[2 * i])
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

  /**
   * One script call for every increment asked for since the last one. A key asked for several times
   * (every request of a turn counts in its partner's budget, one key) goes once, raised by how many
   * times, and each caller gets its own count, in the order asked: one Redis call per key and turn,
   * not per request (issue 41: half of the INCRs of a partner's turn of 23 requests).
   */
  private async sendPending(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    const byKey = new Map<string, { expiresAt: number; items: PendingIncrement[] }>();
    for (const item of batch) {
      const group = byKey.get(item.key);
      if (group) group.items.push(item);
      else byKey.set(item.key, { expiresAt: item.expiresAt, items: [item] });
    }
    const groups = [...byKey.values()];
    const keysThenArgs: (string | number)[] = [...byKey.keys(), ...groups.flatMap((group) => [group.items.length, group.expiresAt])];
    let counts: unknown;
    try {
      try {
        counts = await this.redis.evalsha(INCREMENT_SHA, groups.length, ...keysThenArgs);
      } catch (error) {
        // The server's script cache is empty (a restart, SCRIPT FLUSH, another node): EVAL loads it again.
        if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error;
        counts = await this.redis.eval(INCREMENT_SCRIPT, groups.length, ...keysThenArgs);
      }
    } catch (error) {
      for (const item of batch) item.reject(error);
      return;
    }
    groups.forEach((group, i) => {
      // The key's count before this turn's increments, then one more for each caller in turn.
      const before = Number((counts as unknown[])[i]) - group.items.length;
      group.items.forEach((item, j) => item.resolve(before + j + 1));
    });
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
