/**
 * What several Trailwire processes serving one fleet must agree on besides the database (contract
 * 11), kept in Redis: the fixed-window counts (so a limit holds across every process), the live bus
 * (so an update processed by any process reaches the LiveFeed subscribers of all of them) and the
 * rotation feed (so a key rotated through one process is rejected by all of them, and the
 * customer's streams end everywhere). `openSharedState` connects once, builds the three on that
 * connection, and answers the options `createTrailwire` takes for them.
 *
 * Redis going away is not a refusal (contract 6, issue 28; docs/operations.md, "When a dependency
 * fails"). The connection fails fast while Redis is away — no offline queue, a command timeout — so
 * no request waits for it; the limits count per process (each process grants its 1/N part, N the
 * processes last seen by the heartbeat of `RedisProcessRegistry`), the live bus delivers to this
 * process's own subscribers and catches the others up when Redis is back, and rotation notices
 * give way to the store's recheck. One warning when Redis goes, one line when it is back, and the
 * gauge `trailwire_dependency_up{dependency="redis"}` between the two.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { TrailwireOptions } from '../../core/trailwire.ts';
import { isTrailwireError, TrailwireError } from '../../core/errors.ts';
import { FailoverWindowCounter } from '../../core/rate-limit.ts';
import { systemClock } from '../../core/clock.ts';
import {
  openRedisLiveBus,
  openRedisRotationFeed,
  RedisProcessRegistry,
  RedisWindowCounter,
  type RedisLiveBus,
  type RedisRotationFeed,
} from '../redis/index.ts';
import { redactUrl } from './backends.ts';
import { type LiveReplayOptions, resolveReplayOptions } from '../../core/live-replay.ts';

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
  /**
   * The live feed's replay window, a Redis stream at `<prefix>live:window` shared by every process so
   * that a client may resume on any of them (issue 32). Default: `LIVE_REPLAY_DEFAULTS` (300 s);
   * `replaySeconds: 0` keeps none.
   */
  replay?: LiveReplayOptions;
}

export const DEFAULT_REDIS_KEY_PREFIX = 'trailwire:';

/**
 * How the shared connection behaves while Redis is away: a command fails at once when the connection
 * is down (no offline queue that would hold requests until Redis returns), or after 1 s when Redis
 * does not answer; reconnection is tried at most every second, so Redis is used again about a
 * second after it is back.
 */
export const REDIS_CONNECTION_OPTIONS = {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  commandTimeout: 1000,
  connectTimeout: 2000,
  retryStrategy: (times: number) => Math.min(times * 100, 1000),
} as const;

export interface SharedState {
  /** Merged into `createTrailwire`'s options (the bus under `live`, the feed under `rotations`). */
  readonly coreOptions: Required<Pick<TrailwireOptions, 'windowCounter' | 'live' | 'rotations'>>;
  /** Whether the shared connection to Redis is up now (the `trailwire_dependency_up` gauge). */
  isUp(): boolean;
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
  // A channel's subscriber connection reports each failed reconnection (debug, like the shared
  // connection's); what the channel itself says (the outage, the catch-up) is one line each.
  const channelTrouble = (message: string) => (error: unknown) =>
    isTrailwireError(error)
      ? options.logger?.warn({ err: error, redis: where }, `${message}: ${error.message}`)
      : options.logger?.debug({ err: error, redis: where }, `${message} connection trouble`);
  const redis = new Redis(options.redisUrl, REDIS_CONNECTION_OPTIONS);
  // Every failed reconnection emits an error: the outage itself is reported once, below.
  let lastError: unknown;
  redis.on('error', (error: unknown) => {
    lastError = error;
    options.logger?.debug({ err: error, redis: where }, 'redis connection trouble');
  });
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    // The connection's own error says why (ECONNREFUSED...); connect() only says it closed.
    const reason = lastError instanceof Error ? lastError.message : (error as Error).message;
    // `unavailable`: the server waits for Redis at start-up (`dependency-wait.ts`).
    throw new TrailwireError('unavailable', `cannot connect to Redis at ${where}: ${reason}`, { cause: lastError ?? error });
  }
  const processes = new RedisProcessRegistry({
    redis,
    key: `${keyPrefix}processes`,
    onError: (error) => options.logger?.debug({ err: error, redis: where }, 'redis process heartbeat not written'),
  });
  let bus: RedisLiveBus | undefined;
  let feed: RedisRotationFeed | undefined;
  const close = async () => {
    await processes.close();
    await bus?.close();
    await feed?.close();
    await redis.quit().catch(() => redis.disconnect());
  };
  try {
    await processes.start();
    const replay = resolveReplayOptions(options.replay, 'SharedStateOptions.replay');
    bus = await openRedisLiveBus({
      redis,
      channel: `${keyPrefix}live`,
      onError: channelTrouble('redis live bus'),
      ...(replay.replaySeconds > 0 ? { replay: { ...replay, streamKey: `${keyPrefix}live:window` } } : {}),
    });
    feed = await openRedisRotationFeed({ redis, channel: `${keyPrefix}rotations`, onError: channelTrouble('redis rotation feed') });
  } catch (error) {
    await close();
    throw error;
  }
  const windowCounter = new FailoverWindowCounter({
    shared: new RedisWindowCounter({ redis, keyPrefix: `${keyPrefix}window:` }),
    clock: systemClock,
    processes: () => processes.count,
    onChange: (up, error) => {
      if (up) options.logger?.info({ redis: where }, 'redis is back: limits are shared again');
      else
        options.logger?.warn(
          { err: error, redis: where, processes: processes.count },
          `redis is down: limits fall back to per-process windows, each process granting 1/${processes.count} of each limit, until it answers again`,
        );
    },
  });
  return {
    coreOptions: {
      windowCounter,
      live: { bus },
      rotations: { feed, onError: warn('key rotation notice lost') },
    },
    isUp: () => redis.status === 'ready',
    close,
  };
}
