/**
 * The Redis backend of Trailwire (`trailwire/redis`), for scale-out: what several Trailwire processes
 * must agree on besides the database (contract 11). For now that is the fixed-window rate limits:
 * `RedisWindowCounter` is the shared counter a `FixedWindowLimiter` counts on, so that a limit holds
 * across every process (pass it as `windowCounter` to `createTrailwire`). The caller owns the ioredis
 * connection; nothing here opens or closes one.
 */
export {
  DEFAULT_REDIS_WINDOW_COUNTER_OPTIONS,
  RedisWindowCounter,
  type RedisWindowCounterOptions,
} from './window-counter.ts';
