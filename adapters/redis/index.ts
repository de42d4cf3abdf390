/**
 * The Redis backend of Trailwire (`trailwire/redis`), for scale-out: what several Trailwire processes
 * must agree on besides the database (contract 11), each passed to `createTrailwire`:
 * - the fixed-window limits: `RedisWindowCounter` is the shared counter a `FixedWindowLimiter` counts
 *   on, so that a limit holds across every process (`windowCounter`);
 * - live updates: `openRedisLiveBus` → `RedisLiveBus`, a `LiveBus` over pub/sub, so that an update
 *   processed by any process reaches the LiveFeed subscribers of all of them (`live: { bus }`);
 * - key rotations: `openRedisRotationFeed` → `RedisRotationFeed`, a `RotationFeed` over pub/sub, so
 *   that every process rejects the tokens minted before a rotation and ends the customer's streams
 *   (`rotations: { feed }`).
 * - the processes sharing it: `RedisProcessRegistry`, a heartbeat per process, whose count is what
 *   each limit is divided by while Redis is down and a `FailoverWindowCounter` counts per process.
 * All three work on one ioredis connection the caller opens and closes. The bus and the feed each
 * open one subscriber connection of their own (`redis.duplicate()`) and close it in `close()`: close
 * them after `Trailwire.close()`, before the caller's connection.
 */
export {
  DEFAULT_REDIS_WINDOW_COUNTER_OPTIONS,
  RedisWindowCounter,
  type RedisWindowCounterOptions,
} from './window-counter.ts';
export { DEFAULT_REDIS_LIVE_BUS_OPTIONS, openRedisLiveBus, RedisLiveBus, type RedisLiveBusOptions } from './live-bus.ts';
export {
  DEFAULT_REDIS_PROCESS_REGISTRY_OPTIONS,
  RedisProcessRegistry,
  type RedisProcessRegistryOptions,
} from './process-registry.ts';
export {
  DEFAULT_REDIS_ROTATION_FEED_OPTIONS,
  openRedisRotationFeed,
  RedisRotationFeed,
  type RedisRotationFeedOptions,
} from './rotation-feed.ts';
