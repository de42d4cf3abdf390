/**
 * The Redis live bus (contract 8 and 11): a `LiveBus` shared by every Trailwire process on one Redis,
 * so that a payload taken in by one process reaches the LiveFeed subscribers of all of them. Each
 * `LiveTrailerEvent` is published as JSON on one pub/sub channel (default `trailwire:live`); every
 * process's bus is subscribed to it on its own connection and hands each event to its hub. Every
 * field of an event is a string, number, boolean or null (times are epoch ms, not `Date`s), so JSON
 * carries it unchanged. One publisher's events arrive in publish order (see `json-channel.ts`).
 *
 * What a Redis disconnect loses: pub/sub keeps nothing, so the events published while this process's
 * subscriber connection is down never reach its subscribers. ioredis reconnects and subscribes again
 * by itself, and each later event carries its trailer's full state, so a trailer heals at its next
 * update; a trailer that changed only during the outage stays stale on those clients until it changes
 * again or the client re-reads it from the read API. Events published by this process while its
 * publishing connection is down wait in ioredis's offline queue (or fail `publish` after the
 * connection's `maxRetriesPerRequest`).
 */
import type { Redis } from 'ioredis';
import type { LiveBus, LiveTrailerEvent } from '../../core/live-hub.ts';
import { JsonChannel, openJsonChannel } from './json-channel.ts';

export interface RedisLiveBusOptions {
  /**
   * A connected ioredis client (it may be the window counter's). The bus publishes on it and opens
   * its own subscriber connection with `redis.duplicate()`; `close()` closes only the latter. Required.
   */
  redis: Redis;
  /** The pub/sub channel; every process of one deployment uses the same one. Default `'trailwire:live'`. */
  channel?: string;
  /** An error thrown by a listener (the others are still called). Default: re-thrown asynchronously, as `MemoryLiveBus` does. */
  onListenerError?: (error: unknown) => void;
  /** Subscriber connection trouble (ioredis reconnects by itself) and messages that are not JSON. Default: ignored. */
  onError?: (error: unknown) => void;
}

export const DEFAULT_REDIS_LIVE_BUS_OPTIONS = {
  channel: 'trailwire:live',
} as const satisfies Pick<Required<RedisLiveBusOptions>, 'channel'>;

/** A `LiveBus` over Redis pub/sub; open one with `openRedisLiveBus`. */
export class RedisLiveBus extends JsonChannel<LiveTrailerEvent> implements LiveBus {}

/** Checks the options, opens the subscriber connection, and resolves once the channel is subscribed. */
export function openRedisLiveBus(options: RedisLiveBusOptions): Promise<RedisLiveBus> {
  return openJsonChannel((settings, subscriber) => new RedisLiveBus(settings, subscriber), {
    optionsName: 'RedisLiveBusOptions',
    owner: 'The Redis live bus',
    defaultChannel: DEFAULT_REDIS_LIVE_BUS_OPTIONS.channel,
  }, options);
}
