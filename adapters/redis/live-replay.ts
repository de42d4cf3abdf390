/**
 * The replay window of the live feed across processes (issue 32, contract 8 and 11), so that a
 * client may resume on any process, not only the one it left. Positions are Redis stream ids.
 *
 * Two kinds of stream. The window's stream (default key `trailwire:live:window`) holds one small
 * entry per update, its customer's id: it issues the positions and says what the window still holds
 * (trimmed by count, `MAXLEN ~`, and by age, `XTRIM MINID ~`). Each customer's stream
 * (`<key>:c:<customer id>`) holds that customer's updates under the same ids, trimmed to what the
 * window holds and expiring a little after the window once the customer is quiet. A resume reads
 * only its customer's stream, so it costs in proportion to what it sends (issue 37: one script that
 * read the whole 60,000-update window and filtered it after blocked Redis 485-679 ms a call).
 *
 * Append and publish are one script: both XADDs, then PUBLISH of the event with its id on its
 * customer's channel of the live bus. Redis runs a script alone, so the order in which every process
 * hears the events is the order of their ids, whichever process published them: what makes "resume
 * after the last position I saw" exact. The events appended in one event-loop turn (a processing
 * batch's updates) go in one call of the script, in order, which trims the window once and each of
 * their customers' streams once (issue 41: a call per update cost Redis ~30 µs a payload). An event of a change every process reads from the store is
 * appended only by the first process to try, under a `SET NX` key that lives as long as the window.
 *
 * Reading is a script per page of `pageSize` entries (default 100): each checks that the page's
 * start is still resumable (`core/live-replay.ts`: between the window's newest deleted id — or its
 * first id when none was deleted — and its newest, and no older than the window; XINFO STREAM's
 * fields, Redis 7.0+), then reads the page from the customer's stream. No call holds Redis longer
 * than one page, and a page checked so misses nothing: what a customer's stream has trimmed, the
 * window had deleted before, and a customer's stream expires only after every update in it is older
 * than the window. Any other position (older, or issued before the stream was lost with a Redis
 * restart) is not resumable, and the client gets the reset signal.
 */
import type { Redis } from 'ioredis';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import { type LiveReplayOptions, resolveReplayOptions } from '../../core/live-replay.ts';
import { TurnBatcher } from '../../core/turn-batcher.ts';

export interface RedisReplayWindowOptions extends LiveReplayOptions {
  /** The window stream's key, and the prefix of the customers' streams; every process of one deployment uses the same one. Default `'trailwire:live:window'`. */
  streamKey?: string;
  /** Entries a resume reads per call: the longest it holds Redis. Default 100 (0.6 ms a call with its round trip, against 2.5-7.6 ms for 500; docs/performance.md). */
  pageSize?: number;
}

export const DEFAULT_REDIS_REPLAY_STREAM_KEY = 'trailwire:live:window';
export const DEFAULT_REDIS_REPLAY_PAGE_SIZE = 100;

// KEYS: window stream, then each event's customer stream. ARGV: the channels' prefix (each event is
// published on its customer's, `<prefix>:c:<customer id>`), max events, window ms, then each event's
// JSON and customer id. Answers the events' ids, in order.
const APPEND_MANY = `
local ids = {}
for i = 2, #KEYS do
  local json, customer = ARGV[2 + 2 * (i - 1)], ARGV[3 + 2 * (i - 1)]
  local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'c', customer)
  redis.call('XADD', KEYS[i], id, 'e', json)
  redis.call('PUBLISH', ARGV[1] .. ':c:' .. customer, '{"position":"' .. id .. '",' .. string.sub(json, 2))
  ids[i - 1] = id
end
local now = redis.call('TIME')
local oldest = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[3])
if oldest > 0 then redis.call('XTRIM', KEYS[1], 'MINID', '~', oldest) end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
local trimmed = {}
for i = 2, #KEYS do
  if not trimmed[KEYS[i]] then
    trimmed[KEYS[i]] = true
    if first then redis.call('XTRIM', KEYS[i], 'MINID', '~', first[1]) end
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[3]) + 1000)
  end
end
return ids
`;

// KEYS: window stream, customer stream, change key. ARGV: event JSON, the channels' prefix, max events,
// window ms, a change ('1' or '0'), customer id.
const APPEND = `
if ARGV[5] == '1' and not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[4]) then return false end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'c', ARGV[6])
local now = redis.call('TIME')
local oldest = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[4])
if oldest > 0 then redis.call('XTRIM', KEYS[1], 'MINID', '~', oldest) end
redis.call('XADD', KEYS[2], id, 'e', ARGV[1])
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if first then redis.call('XTRIM', KEYS[2], 'MINID', '~', first[1]) end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[4]) + 1000)
redis.call('PUBLISH', ARGV[2] .. ':c:' .. ARGV[6], '{"position":"' .. id .. '",' .. string.sub(ARGV[1], 2))
return id
`;

// KEYS: window stream, customer stream. ARGV: position (the page's start), page size, window ms.
// Answers false when the position is not resumable, else the customer's next entries after it.
const AFTER_PAGE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local function order(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  if am ~= bm then return am < bm and -1 or 1 end
  if as ~= bs then return as < bs and -1 or 1 end
  return 0
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local fields = {}
for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
local low = fields['max-deleted-entry-id']
if low == '0-0' then low = fields['recorded-first-entry-id'] end
if order(ARGV[1], low) < 0 or order(ARGV[1], fields['last-generated-id']) > 0 then return false end
local now = redis.call('TIME')
local ms = tonumber(string.match(ARGV[1], '^(%d+)'))
if ms < tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[3]) then return false end
return redis.call('XRANGE', KEYS[2], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
`;

type RedisWithWindow = Redis & {
  trailwireLiveAppendMany(numberOfKeys: number, ...keysThenArgs: Array<string | number>): Promise<string[]>;
  trailwireLiveAppend(
    window: string,
    customer: string,
    change: string,
    json: string,
    channel: string,
    maxEvents: number,
    windowMs: number,
    isChange: string,
    customerId: string,
  ): Promise<string | null>;
  trailwireLiveAfterPage(window: string, customer: string, position: string, pageSize: number, windowMs: number): Promise<Array<[string, string[]]> | null>;
};

interface PendingAppend {
  channel: string;
  event: LiveTrailerEvent;
  resolve: (position: string) => void;
  reject: (error: unknown) => void;
}

/** The window on one Redis connection (the live bus's publishing one). */
export class RedisReplayWindow {
  /** Appends of this turn that carry no change id, sent in one script call once it ends. */
  private readonly appends = new TurnBatcher<PendingAppend>((items) => void this.appendMany(items));
  private readonly redis: RedisWithWindow;
  private readonly streamKey: string;
  private readonly maxEvents: number;
  private readonly windowMs: number;
  private readonly pageSize: number;

  constructor(redis: Redis, options: RedisReplayWindowOptions = {}) {
    const settings = resolveReplayOptions(options, 'RedisReplayWindowOptions');
    if (settings.replaySeconds < 1) throw new TypeError('RedisReplayWindowOptions.replaySeconds must be at least 1 (leave the window out to keep none)');
    const pageSize = options.pageSize ?? DEFAULT_REDIS_REPLAY_PAGE_SIZE;
    if (!Number.isInteger(pageSize) || pageSize < 1) throw new TypeError(`RedisReplayWindowOptions.pageSize must be a positive integer, got ${pageSize}`);
    this.streamKey = options.streamKey ?? DEFAULT_REDIS_REPLAY_STREAM_KEY;
    this.maxEvents = settings.maxEvents;
    this.windowMs = settings.replaySeconds * 1000;
    this.pageSize = pageSize;
    // defineCommand sends EVALSHA, and the script itself only when Redis does not know it yet.
    if (typeof (redis as unknown as Partial<RedisWithWindow>).trailwireLiveAppend !== 'function') {
      redis.defineCommand('trailwireLiveAppendMany', { lua: APPEND_MANY });
      redis.defineCommand('trailwireLiveAppend', { numberOfKeys: 3, lua: APPEND });
      redis.defineCommand('trailwireLiveAfterPage', { numberOfKeys: 2, lua: AFTER_PAGE });
    }
    this.redis = redis as unknown as RedisWithWindow;
  }

  /**
   * Appends the event and publishes it, with its position, on its customer's channel of `channel`'s prefix; answers the position, or
   * null when `changeId` was already published by some process within the window.
   */
  async appendAndPublish(channel: string, event: LiveTrailerEvent, changeId?: string): Promise<string | null> {
    if (changeId === undefined) return new Promise((resolve, reject) => this.appends.push({ channel, event, resolve, reject }));
    // The turn's earlier appends go first: one connection sends its calls in order, so positions keep the order of the calls.
    this.appends.flushNow();
    const change = changeId === undefined ? this.streamKey : `${this.streamKey}:change:${changeId}`;
    return this.redis.trailwireLiveAppend(
      this.streamKey,
      this.customerStream(event.customerId),
      change,
      JSON.stringify(event),
      channel,
      this.maxEvents,
      this.windowMs,
      changeId === undefined ? '0' : '1',
      event.customerId,
    );
  }

  /** One script call for the turn's appends (one per channel, which is one in practice: the bus's). */
  private async appendMany(items: PendingAppend[]): Promise<void> {
    const byChannel = new Map<string, PendingAppend[]>();
    for (const item of items) byChannel.set(item.channel, [...(byChannel.get(item.channel) ?? []), item]);
    for (const [channel, group] of byChannel) {
      try {
        const ids = await this.redis.trailwireLiveAppendMany(
          group.length + 1,
          this.streamKey,
          ...group.map((item) => this.customerStream(item.event.customerId)),
          channel,
          this.maxEvents,
          this.windowMs,
          ...group.flatMap((item) => [JSON.stringify(item.event), item.event.customerId]),
        );
        group.forEach((item, i) => item.resolve(ids[i]!));
      } catch (error) {
        for (const item of group) item.reject(error);
      }
    }
  }

  /** The newest position the window holds (null when it holds none): what a stream that starts listening now is covered to. */
  async newest(): Promise<string | null> {
    const [entry] = await this.redis.xrevrange(this.streamKey, '+', '-', 'COUNT', 1);
    return entry?.[0] ?? null;
  }

  /** The customer's events after `position`, oldest first with their positions, or null when it is not resumable. */
  async after(customerId: string, position: string): Promise<LiveTrailerEvent[] | null> {
    const events: LiveTrailerEvent[] = [];
    for (let from = position; ; ) {
      const page = await this.redis.trailwireLiveAfterPage(this.streamKey, this.customerStream(customerId), from, this.pageSize, this.windowMs);
      if (page === null) return null;
      for (const [id, fields] of page) events.push({ ...(JSON.parse(fields[1]!) as LiveTrailerEvent), position: id });
      if (page.length < this.pageSize) return events;
      from = page.at(-1)![0];
    }
  }

  private customerStream(customerId: string): string {
    return `${this.streamKey}:c:${customerId}`;
  }
}
