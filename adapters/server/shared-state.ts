/**
 * What several Trailwire processes serving one fleet must agree on besides the database (contract
 * 11), kept in Redis: the fixed-window counts (so a limit holds across every process), and the live
 * bus (so an update processed by any process reaches the LiveFeed subscribers of all of them).
 * `openSharedState` connects and answers the options `createTrailwire` takes for them.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { TrailwireOptions } from '../../core/trailwire.ts';
import { RedisWindowCounter } from '../redis/index.ts';
import { redactUrl } from './backends.ts';

export interface SharedStateOptions {
  /** A `redis://` URL. Required. */
  redisUrl: string;
  /** Where connection trouble is reported. */
  logger?: Logger;
}

export interface SharedState {
  /** Spread into `createTrailwire`'s options. */
  readonly coreOptions: Pick<TrailwireOptions, 'windowCounter' | 'live'>;
  /** Closes the connections; after the core is closed. */
  close(): Promise<void>;
}

/** Connects to Redis (failing fast when it cannot) and builds the shared counter and bus on it. */
export async function openSharedState(options: SharedStateOptions): Promise<SharedState> {
  const redis = new Redis(options.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  redis.on('error', (error: Error) => options.logger?.warn({ err: error, redis: redactUrl(options.redisUrl) }, 'redis connection trouble'));
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new Error(`cannot connect to Redis at ${redactUrl(options.redisUrl)}: ${(error as Error).message}`, { cause: error });
  }
  return {
    coreOptions: { windowCounter: new RedisWindowCounter({ redis }) },
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
