/**
 * Which Trailwire processes share one Redis, as Redis last saw them: each process writes a heartbeat
 * (its id, scored with the time) into one sorted set every `intervalMs`, drops the entries not
 * renewed for three intervals, and reads how many remain. The count is what a process divides each
 * limit by while Redis is down and it counts alone (`FailoverWindowCounter` of `core/rate-limit.ts`),
 * so it must be known *before* the outage: it is the last count seen, kept while Redis is away.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

export interface RedisProcessRegistryOptions {
  /** A connected ioredis client; the registry does not close it. Required. */
  redis: Redis;
  /** The sorted set's key; every process of one deployment uses the same one. Default `'trailwire:processes'`. */
  key?: string;
  /** How often this process renews its entry and re-reads the count (ms). Default 5000. */
  intervalMs?: number;
  /** Told when a heartbeat fails (Redis away); the count keeps its last value. Default: ignored. */
  onError?: (error: unknown) => void;
}

export const DEFAULT_REDIS_PROCESS_REGISTRY_OPTIONS = {
  key: 'trailwire:processes',
  intervalMs: 5000,
} as const satisfies Pick<Required<RedisProcessRegistryOptions>, 'key' | 'intervalMs'>;

/** An entry not renewed for this many intervals belongs to a process that is gone. */
const STALE_AFTER_INTERVALS = 3;

export class RedisProcessRegistry {
  /** This process's entry in the set. */
  readonly id = randomUUID();
  private readonly redis: Redis;
  private readonly key: string;
  private readonly intervalMs: number;
  private readonly onError: (error: unknown) => void;
  private timer: NodeJS.Timeout | undefined;
  private lastCount = 1;

  constructor(options: RedisProcessRegistryOptions) {
    this.redis = options.redis;
    this.key = options.key ?? DEFAULT_REDIS_PROCESS_REGISTRY_OPTIONS.key;
    this.intervalMs = options.intervalMs ?? DEFAULT_REDIS_PROCESS_REGISTRY_OPTIONS.intervalMs;
    if (!Number.isInteger(this.intervalMs) || this.intervalMs < 1)
      throw new TypeError(`RedisProcessRegistryOptions.intervalMs must be a positive integer, got ${String(this.intervalMs)}`);
    this.onError = options.onError ?? (() => {});
  }

  /** The live processes as last seen, this one included (at least 1). */
  get count(): number {
    return this.lastCount;
  }

  /** Writes the first heartbeat (so the count is known at once) and renews it every interval. */
  async start(): Promise<void> {
    await this.beat();
    this.timer ??= setInterval(() => void this.beat().catch(this.onError), this.intervalMs);
    this.timer.unref();
  }

  /** Stops the heartbeat and removes this process's entry (best effort: Redis may be away). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.redis.zrem(this.key, this.id).catch(() => {});
  }

  private async beat(): Promise<void> {
    const now = Date.now();
    const results = await this.redis
      .multi()
      .zadd(this.key, now, this.id)
      .zremrangebyscore(this.key, '-inf', now - STALE_AFTER_INTERVALS * this.intervalMs)
      .zcard(this.key)
      // The whole set goes when every process has been gone for a while.
      .pexpire(this.key, STALE_AFTER_INTERVALS * this.intervalMs * 2)
      .exec();
    const [error, count] = results?.[2] ?? [new Error('the heartbeat transaction was discarded'), null];
    if (error) throw error;
    this.lastCount = Math.max(1, Number(count));
  }
}
