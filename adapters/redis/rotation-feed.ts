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
import type { RotationFeed, RotationNotice, RotationNoticeListener } from '../../core/rotation-feed.ts';
import { badOption, JsonChannel, rethrowLater } from './json-channel.ts';

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
export class RedisRotationFeed implements RotationFeed {
  /** @internal Use `openRedisRotationFeed`. */
  constructor(private readonly channel: JsonChannel<RotationNotice>) {}

  /** The pub/sub channel the feed is on. */
  get channelName(): string {
    return this.channel.name;
  }

  /** Publishes the notice; resolves once Redis has taken it. Rejects `unavailable` once closed. */
  publish(notice: RotationNotice): Promise<void> {
    return this.channel.publish(notice);
  }

  subscribe(listener: RotationNoticeListener): () => void {
    return this.channel.subscribe(listener);
  }

  /** Stops delivery and closes the subscriber connection (not the caller's `redis`). Idempotent. */
  close(): Promise<void> {
    return this.channel.close();
  }
}

/** Checks the options, opens the subscriber connection, and resolves once the channel is subscribed. */
export async function openRedisRotationFeed(options: RedisRotationFeedOptions): Promise<RedisRotationFeed> {
  const owner = 'RedisRotationFeedOptions';
  if (typeof options !== 'object' || options === null) throw badOption(owner, 'options', 'must be an object');
  if (typeof options.redis?.duplicate !== 'function' || typeof options.redis.publish !== 'function')
    throw badOption(owner, 'redis', 'must be an ioredis client');
  const channel = options.channel ?? DEFAULT_REDIS_ROTATION_FEED_OPTIONS.channel;
  if (typeof channel !== 'string' || channel === '') throw badOption(owner, 'channel', 'must be a non-empty string');
  for (const hook of ['onListenerError', 'onError'] as const)
    if (options[hook] !== undefined && typeof options[hook] !== 'function') throw badOption(owner, hook, 'must be a function');
  return new RedisRotationFeed(
    await JsonChannel.open<RotationNotice>({
      redis: options.redis,
      channel,
      onListenerError: options.onListenerError ?? rethrowLater,
      onError: options.onError ?? (() => {}),
      owner: 'The Redis rotation feed',
    }),
  );
}
