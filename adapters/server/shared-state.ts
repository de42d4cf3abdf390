/**
 * What several Trailwire processes serving one fleet must agree on besides the database (contract
 * 11), kept in Redis: the fixed-window counts (so a limit holds across every process), the live bus
 * (so an update processed by any process reaches the LiveFeed subscribers of all of them) and the
 * rotation feed (so a key rotated through one process is rejected by all of them, and the
 * customer's streams end everywhere). `openSharedState` connects once, builds the three on that
 * connection, and answers the options `createTrailwire` takes for them.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { TrailwireOptions } from '../../core/trailwire.ts';
import { openRedisLiveBus, openRedisRotationFeed, RedisWindowCounter, type RedisLiveBus, type RedisRotationFeed } from '../redis/index.ts';
import { redactUrl } from './backends.ts';

export interface SharedStateOptions {
  /** A `redis://` URL. Required. */
  redisUrl: string;
  /**
   * Starts every key and channel Trailwire uses in Redis: counters under `<prefix>window:`, live
   * updates on `<prefix>live`, rotation notices on `<prefix>rotations`. Every process of one
   * deployment must use the same prefix; deployments (or test runs) sharing one Redis use different
   * ones. Default `'trailwire:'` (the Redis adapters' own defaults).
   */
  keyPrefix?: string;
  /** Where connection trouble and lost rotation notices are reported. Default: nowhere. */
  logger?: Logger;
}

export const DEFAULT_REDIS_KEY_PREFIX = 'trailwire:';

export interface SharedState {
  /** Merged into `createTrailwire`'s options (the bus under `live`, the feed under `rotations`). */
  readonly coreOptions: Required<Pick<TrailwireOptions, 'windowCounter' | 'live' | 'rotations'>>;
  /**
   * Closes the bus and the feed (their subscriber connections), then the shared connection. Call it
   * after `Trailwire.close()`: neither the hub nor the core closes a bus or feed it was given.
   */
  close(): Promise<void>;
}

/** Connects to Redis (failing fast when it cannot) and opens the shared counter, live bus and rotation feed on it. */
export async function openSharedState(options: SharedStateOptions): Promise<SharedState> {
  const keyPrefix = options.keyPrefix ?? DEFAULT_REDIS_KEY_PREFIX;
  if (typeof keyPrefix !== 'string') throw new TypeError(`openSharedState: \`keyPrefix\` must be a string, got ${typeof keyPrefix}`);
  const where = redactUrl(options.redisUrl);
  const warn = (message: string) => (error: unknown) => options.logger?.warn({ err: error, redis: where }, message);
  const redis = new Redis(options.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  redis.on('error', warn('redis connection trouble'));
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new Error(`cannot connect to Redis at ${where}: ${(error as Error).message}`, { cause: error });
  }
  let bus: RedisLiveBus | undefined;
  let feed: RedisRotationFeed | undefined;
  const close = async () => {
    await bus?.close();
    await feed?.close();
    await redis.quit().catch(() => redis.disconnect());
  };
  try {
    bus = await openRedisLiveBus({ redis, channel: `${keyPrefix}live`, onError: warn('redis live bus trouble') });
    feed = await openRedisRotationFeed({ redis, channel: `${keyPrefix}rotations`, onError: warn('redis rotation feed trouble') });
  } catch (error) {
    await close();
    throw error;
  }
  return {
    coreOptions: {
      windowCounter: new RedisWindowCounter({ redis, keyPrefix: `${keyPrefix}window:` }),
      live: { bus },
      rotations: { feed, onError: warn('key rotation notice lost') },
    },
    close,
  };
}
