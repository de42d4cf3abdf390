/**
 * The Redis rotation feed (contract 3 and 11): a `RotationFeed` shared by every Trailwire process on
 * one Redis, so that a key rotated by one process is rejected by all of them, and the customer's
 * LiveFeed streams end everywhere. Notices are JSON on their own pub/sub channel (default
 * `trailwire:rotations`), beside the live bus's rather than on it: the two carry different messages
 * to different listeners, and a channel each keeps both seams as small as `MemoryLiveBus`. It costs
 * one more subscriber connection per process.
 *
 * What a Redis disconnect loses: a notice published while a process's subscriber connection is down
 * never reaches that process, and one whose publishing fails is reported to the core's
 * `rotations.onError`. That process then learns of the rotation when it next re-reads the key
 * version from the store (`rotations.recheckAfterSeconds` of `createTrailwire`, 30 s by default).
 */
import type { Redis } from 'ioredis';
import type { RotationFeed, RotationNotice } from '../../core/rotation-feed.ts';
import { JsonChannel, openJsonChannel } from './json-channel.ts';

export interface RedisRotationFeedOptions {
  /**
   * A connected ioredis client (it may be the live bus's or the window counter's). The feed publishes
   * on it and opens its own subscriber connection with `redis.duplicate()`; `close()` closes only
   * the latter. Required.
   */
  redis: Redis;
  /** The pub/sub channel; every process of one deployment uses the same one. Default `'trailwire:rotations'`. */
  channel?: string;
  /** An error thrown by a listener (the others are still called). Default: re-thrown asynchronously. */
  onListenerError?: (error: unknown) => void;
  /** Subscriber connection trouble (ioredis reconnects by itself) and messages that are not JSON. Default: ignored. */
  onError?: (error: unknown) => void;
}

export const DEFAULT_REDIS_ROTATION_FEED_OPTIONS = {
  channel: 'trailwire:rotations',
} as const satisfies Pick<Required<RedisRotationFeedOptions>, 'channel'>;

/** A `RotationFeed` over Redis pub/sub; open one with `openRedisRotationFeed`. */
export class RedisRotationFeed extends JsonChannel<RotationNotice> implements RotationFeed {}

/** Checks the options, opens the subscriber connection, and resolves once the channel is subscribed. */
export function openRedisRotationFeed(options: RedisRotationFeedOptions): Promise<RedisRotationFeed> {
  return openJsonChannel((settings, subscriber) => new RedisRotationFeed(settings, subscriber), {
    optionsName: 'RedisRotationFeedOptions',
    owner: 'The Redis rotation feed',
    defaultChannel: DEFAULT_REDIS_ROTATION_FEED_OPTIONS.channel,
  }, options);
}
