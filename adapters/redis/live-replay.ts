/**
 * The replay window of the live feed across processes (issue 32, contract 8 and 11): a Redis stream
 * (default key `trailwire:live:window`) that holds the last `replaySeconds` of live updates, so that
 * a client may resume on any process, not only the one it left. Positions are the stream's own ids.
 *
 * Append and publish are one script: XADD to the stream (trimmed by count, `MAXLEN ~`, and by age,
 * `XTRIM MINID ~`), then PUBLISH of the event with its id on the live bus's channel. Redis runs a
 * script alone, so the order in which every process hears the events on the channel is the order of
 * their ids in the stream, whichever process published them: what makes "resume after the last
 * position I saw" exact. (XADD then a separate PUBLISH would let two processes' events cross.)
 * An event published `once` (an operator change every process reads from the store) is appended
 * only by the first process to try, under a `SET NX` key that lives as long as the window.
 *
 * Reading is one script too: the positions after P, if P is resumable — P is still in the stream,
 * or P is the stream's newest deleted id (`XINFO STREAM`'s max-deleted-entry-id, Redis 7.0+):
 * nothing after it was trimmed. Any other P (older, or issued before the stream was lost with a
 * Redis restart) is not, and the client gets the reset signal (`core/live-replay.ts`).
 */
import type { Redis } from 'ioredis';
import type { LiveTrailerEvent } from '../../core/live-hub.ts';
import { type LiveReplayOptions, resolveReplayOptions } from '../../core/live-replay.ts';

export interface RedisReplayWindowOptions extends LiveReplayOptions {
  /** The stream's key; every process of one deployment uses the same one. Default `'trailwire:live:window'`. */
  streamKey?: string;
}

export const DEFAULT_REDIS_REPLAY_STREAM_KEY = 'trailwire:live:window';

// KEYS: stream, once key. ARGV: event JSON, channel, max events, window ms, once ('1' or '0').
const APPEND = `
if ARGV[5] == '1' and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[4]) then return false end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'e', ARGV[1])
local now = redis.call('TIME')
local oldest = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[4])
if oldest > 0 then redis.call('XTRIM', KEYS[1], 'MINID', '~', oldest) end
redis.call('PUBLISH', ARGV[2], '{"position":"' .. id .. '",' .. string.sub(ARGV[1], 2))
return id
`;

// KEYS: stream. ARGV: position. Answers false when the position is not resumable, else the entries after it.
const AFTER = `
local resumable = #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) > 0
if not resumable and redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'max-deleted-entry-id' then resumable = info[i + 1] == ARGV[1] end
  end
end
if not resumable then return false end
return redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+')
`;

type RedisWithWindow = Redis & {
  trailwireLiveAppend(stream: string, once: string, json: string, channel: string, maxEvents: number, windowMs: number, isOnce: string): Promise<string | null>;
  trailwireLiveAfter(stream: string, position: string): Promise<Array<[string, string[]]> | null>;
};

/** The window on one Redis connection (the live bus's publishing one). */
export class RedisReplayWindow {
  private readonly redis: RedisWithWindow;
  private readonly streamKey: string;
  private readonly maxEvents: number;
  private readonly windowMs: number;

  constructor(redis: Redis, options: RedisReplayWindowOptions = {}) {
    const settings = resolveReplayOptions(options, 'RedisReplayWindowOptions');
    if (settings.replaySeconds < 1) throw new TypeError('RedisReplayWindowOptions.replaySeconds must be at least 1 (leave the window out to keep none)');
    this.streamKey = options.streamKey ?? DEFAULT_REDIS_REPLAY_STREAM_KEY;
    this.maxEvents = settings.maxEvents;
    this.windowMs = settings.replaySeconds * 1000;
    // defineCommand sends EVALSHA, and the script itself only when Redis does not know it yet.
    if (typeof (redis as unknown as Partial<RedisWithWindow>).trailwireLiveAppend !== 'function') {
      redis.defineCommand('trailwireLiveAppend', { numberOfKeys: 2, lua: APPEND });
      redis.defineCommand('trailwireLiveAfter', { numberOfKeys: 1, lua: AFTER });
    }
    this.redis = redis as unknown as RedisWithWindow;
  }

  /**
   * Appends the event and publishes it, with its position, on `channel`; answers the position, or
   * null when `onceKey` was already published by some process within the window.
   */
  async appendAndPublish(channel: string, event: LiveTrailerEvent, onceKey?: string): Promise<string | null> {
    const once = onceKey === undefined ? this.streamKey : `${this.streamKey}:once:${onceKey}`;
    return this.redis.trailwireLiveAppend(this.streamKey, once, JSON.stringify(event), channel, this.maxEvents, this.windowMs, onceKey === undefined ? '0' : '1');
  }

  /** The events after `position`, oldest first with their positions, or null when it is not resumable. */
  async after(position: string): Promise<LiveTrailerEvent[] | null> {
    const entries = await this.redis.trailwireLiveAfter(this.streamKey, position);
    if (entries === null) return null;
    return entries.map(([id, fields]) => ({ ...(JSON.parse(fields[1]!) as LiveTrailerEvent), position: id }));
  }
}
