/**
 * The Redis live bus (contract 8 and 11): a `LiveBus` shared by every Trailwire process on one Redis,
 * so that a payload taken in by one process reaches the LiveFeed subscribers of all of them. Each
 * `LiveTrailerEvent` is published as JSON on its customer's pub/sub channel (`<channel>:c:<customer
 * id>`, default prefix `trailwire:live`), and a process's bus subscribes, on its own connection, the
 * channels of the customers its hub listens to: a process reads only the updates of customers it has
 * streams of (issue 41). Every field of an event is a string, number, boolean or null (times are
 * epoch ms, not `Date`s), so JSON carries it unchanged. One publisher's events arrive in publish
 * order, across channels too: Redis writes every message to one subscriber connection in the order
 * it executed the PUBLISHes (see `json-channel.ts`).
 *
 * When Redis goes away (issue 28). Pub/sub keeps nothing, so the bus rides through an outage itself:
 * - `publish` never fails for the outage: an event Redis does not take is handed to this process's
 *   own subscribers directly, so they keep getting what this process processes. Other processes'
 *   subscribers miss it for now.
 * - From the first sign of trouble (a failed publish, either connection closing) until both
 *   connections are back and have stayed up `settleMs`, the bus remembers the latest event of each
 *   trailer it published. Then it publishes those again, once: every subscriber of every process is
 *   brought up to date within about a second of Redis returning — well within a heartbeat interval
 *   — because each event carries its trailer's whole state. (The settle delay covers the other
 *   processes' subscriber connections, which reconnect on their own schedule: an event published the
 *   instant this process is back may not have reached them.) Memory: one event per trailer changed
 *   by this process during the outage.
 * - `onError` hears of the outage once, and of the re-publication (how many trailers) once.
 *
 * The replay window (issue 32). Given `replay`, the bus publishes through a Redis stream
 * (`live-replay.ts`): each event is appended to the stream and published with its position in one
 * script, so every process hears them in position order, and `replayAfter` reads a customer's
 * part of the window. An
 * event handed to this process's subscribers during an outage has no position (it is in no window);
 * its re-publication after the outage has one.
 */
import type { Redis } from 'ioredis';
import { TrailwireError } from '../../core/errors.ts';
import type { LiveBus, LiveBusListener, LivePublishOptions, LiveTrailerEvent } from '../../core/live-bus.ts';
import { checkChannelOptions, type JsonChannelSettings, openSubscriber, parseMessage, quitSubscriber } from './json-channel.ts';
import { RedisReplayWindow, type RedisReplayWindowOptions } from './live-replay.ts';

export interface RedisLiveBusOptions {
  /**
   * A connected ioredis client (it may be the window counter's). The bus publishes on it and opens
   * its own subscriber connection with `redis.duplicate()`; `close()` closes only the latter. Required.
   */
  redis: Redis;
  /** The prefix of the customers' pub/sub channels (`<channel>:c:<customer id>`); every process of one deployment uses the same one. Default `'trailwire:live'`. */
  channel?: string;
  /** An error thrown by a listener (the others are still called). Default: re-thrown asynchronously, as `MemoryLiveBus` does. */
  onListenerError?: (error: unknown) => void;
  /** Subscriber connection trouble (ioredis reconnects by itself), an outage and its catch-up, and messages that are not JSON. Default: ignored. */
  onError?: (error: unknown) => void;
  /** How long both connections must be back before the trailers changed during an outage are published again (ms). Default 1000. */
  settleMs?: number;
  /** Keep a replay window in a Redis stream (`live-replay.ts`): positions and `replayAfter`. Default: none. */
  replay?: RedisReplayWindowOptions;
}

export const DEFAULT_REDIS_LIVE_BUS_OPTIONS = {
  channel: 'trailwire:live',
  settleMs: 1000,
} as const satisfies Pick<Required<RedisLiveBusOptions>, 'channel' | 'settleMs'>;

/** The listeners of one customer's channel, and the SUBSCRIBE that makes Redis send it here. */
interface ChannelListeners {
  readonly listeners: Set<LiveBusListener>;
  readonly subscribed: Promise<unknown>;
}

/** A `LiveBus` over Redis pub/sub, a channel per customer, that rides through a Redis outage; open one with `openRedisLiveBus`. */
export class RedisLiveBus implements LiveBus {
  /** While in trouble: the latest event of each trailer published, to publish again once Redis is back. */
  private readonly missed = new Map<string, LiveTrailerEvent>();
  private readonly byChannel = new Map<string, ChannelListeners>();
  private troubled = false;
  private settleTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | undefined;
  private readonly stopWatching: () => void;
  private readonly window: RedisReplayWindow | null;

  /** @internal Use `openRedisLiveBus`. */
  constructor(
    private readonly options: JsonChannelSettings,
    private readonly subscriber: Redis,
    private readonly settleMs: number,
    replay?: RedisReplayWindowOptions,
  ) {
    this.window = replay ? new RedisReplayWindow(options.redis, replay) : null;
    subscriber.on('message', (name: string, text: string) => this.receive(name, text));
    const trouble = () => this.enterTrouble();
    const ready = () => this.scheduleCatchUp();
    for (const connection of [options.redis, subscriber]) {
      connection.on('close', trouble);
      connection.on('ready', ready);
    }
    this.stopWatching = () => {
      for (const connection of [options.redis, subscriber]) {
        connection.off('close', trouble);
        connection.off('ready', ready);
      }
    };
  }

  get replays(): boolean {
    return this.window !== null;
  }

  async replayAfter(customerId: string, position: string): Promise<LiveTrailerEvent[] | null> {
    return this.window ? this.window.after(customerId, position) : null;
  }

  async newestPosition(): Promise<string | null> {
    return this.window ? this.window.newest() : null;
  }

  /** Whether the bus is riding through an outage (events are remembered for the catch-up). */
  get inOutage(): boolean {
    return this.troubled;
  }

  /**
   * Subscribes the customer's channel (its first listener here) and resolves once Redis confirms,
   * or at once while the subscriber connection is away: ioredis sends the SUBSCRIBE when it is
   * back, and this process's own events reach the listener meanwhile. A SUBSCRIBE Redis does not
   * confirm (frozen: the connection's command timeout) is an outage too, told to `onError`: the
   * listener stays, hears this process's events, and every process's once Redis has the SUBSCRIBE.
   */
  async listen(customerId: string, listener: LiveBusListener): Promise<() => void> {
    // A fresh wrapper per call, so listening with the same function twice delivers twice and each
    // stop removes exactly its own registration.
    const registration: LiveBusListener = (event) => listener(event);
    if (this.closing) return () => {};
    const channel = this.channelOf(customerId);
    let entry = this.byChannel.get(channel);
    if (!entry) {
      entry = { listeners: new Set(), subscribed: this.subscriber.subscribe(channel) };
      // Awaited below while connected; while away it is sent on reconnection, and its failure is the outage's.
      entry.subscribed.catch(() => {});
      this.byChannel.set(channel, entry);
    }
    entry.listeners.add(registration);
    const stop = () => {
      const current = this.byChannel.get(channel);
      if (!current?.listeners.delete(registration) || current.listeners.size > 0) return;
      this.byChannel.delete(channel);
      if (!this.closing) this.subscriber.unsubscribe(channel).catch(() => {});
    };
    if (this.subscriber.status === 'ready') {
      try {
        await entry.subscribed;
      } catch (error) {
        if (this.closing) throw new TrailwireError('unavailable', `${this.options.owner} is closed.`, { cause: error });
        this.options.onError(
          new TrailwireError('unavailable', `${this.options.owner} has no answer to its SUBSCRIBE of ${channel} yet: the channel's listeners hear this process's updates until Redis takes it.`, { cause: error }),
        );
      }
    }
    return stop;
  }

  async publish(event: LiveTrailerEvent, options?: LivePublishOptions): Promise<void> {
    if (this.closing) throw new TrailwireError('unavailable', `${this.options.owner} is closed.`);
    if (this.troubled) this.missed.set(event.trailer.id, event);
    try {
      await this.send(event, options?.changeId);
    } catch (error) {
      if (this.closing) throw error;
      this.enterTrouble(error);
      this.missed.set(event.trailer.id, event);
      // This process's subscribers would have heard it through Redis: they hear it now.
      this.deliver(event);
    }
  }

  /** Publishes on the customer's channel, through the window's script when there is one. */
  private async send(event: LiveTrailerEvent, changeId?: string): Promise<void> {
    if (this.window) await this.window.appendAndPublish(this.options.channel, event, changeId);
    else await this.options.redis.publish(this.channelOf(event.customerId), JSON.stringify(event));
  }

  /** Stops delivery and closes the subscriber connection (not the caller's `redis`). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearTimeout(this.settleTimer);
      this.stopWatching();
      this.missed.clear();
      this.byChannel.clear();
      await quitSubscriber(this.subscriber);
    })();
    return this.closing;
  }

  /** The pub/sub channel of one customer's events (`live-replay.ts`'s scripts name it the same way). */
  private channelOf(customerId: string): string {
    return `${this.options.channel}:c:${customerId}`;
  }

  private receive(name: string, text: string): void {
    const entry = this.byChannel.get(name);
    if (!entry || this.closing) return;
    const event = parseMessage<LiveTrailerEvent>(this.options, name, text);
    if (event !== undefined) this.hand(entry, event);
  }

  /** Hands an event to this process's listeners of its customer only (what Redis would have delivered here). */
  private deliver(event: LiveTrailerEvent): void {
    const entry = this.byChannel.get(this.channelOf(event.customerId));
    if (entry) this.hand(entry, event);
  }

  private hand(entry: ChannelListeners, event: LiveTrailerEvent): void {
    for (const listener of entry.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.onListenerError(error);
      }
    }
  }

  private enterTrouble(error?: unknown): void {
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    if (this.troubled || this.closing) return;
    this.troubled = true;
    this.options.onError(
      new TrailwireError(
        'unavailable',
        'The Redis live bus lost Redis: live updates reach only this process\'s subscribers until it is back, then the trailers changed meanwhile are published again.',
        { cause: error },
      ),
    );
  }

  private scheduleCatchUp(): void {
    if (!this.troubled || this.closing) return;
    if (this.options.redis.status !== 'ready' || this.subscriber.status !== 'ready') return;
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => void this.catchUp(), this.settleMs);
    this.settleTimer.unref();
  }

  /** Publishes the remembered events again, oldest trailer first; stays in trouble if Redis fails again. */
  private async catchUp(): Promise<void> {
    this.settleTimer = undefined;
    if (!this.troubled || this.closing) return;
    const events = [...this.missed.values()];
    this.troubled = false;
    this.missed.clear();
    let published = 0;
    for (const event of events) {
      try {
        await this.send(event);
        published++;
      } catch (error) {
        // Gone again: keep what is left for the next catch-up (newer events of a trailer win).
        this.enterTrouble(error);
        for (const left of events.slice(published)) if (!this.missed.has(left.trailer.id)) this.missed.set(left.trailer.id, left);
        return;
      }
    }
    if (published > 0)
      this.options.onError(new TrailwireError('unavailable', `The Redis live bus is back: published again the latest state of ${published} trailers changed during the outage.`));
  }
}

/** Checks the options, opens the subscriber connection, and resolves once it answers. */
export async function openRedisLiveBus(options: RedisLiveBusOptions): Promise<RedisLiveBus> {
  const settings = checkChannelOptions({ optionsName: 'RedisLiveBusOptions', owner: 'The Redis live bus', defaultChannel: DEFAULT_REDIS_LIVE_BUS_OPTIONS.channel }, options);
  const settleMs = options?.settleMs ?? DEFAULT_REDIS_LIVE_BUS_OPTIONS.settleMs;
  if (!Number.isInteger(settleMs) || settleMs < 0) throw new TypeError(`RedisLiveBusOptions.settleMs must be a non-negative integer, got ${String(settleMs)}`);
  const subscriber = openSubscriber(settings);
  const bus = new RedisLiveBus(settings, subscriber, settleMs, options.replay);
  try {
    await subscriber.ping();
  } catch (error) {
    subscriber.disconnect();
    throw new TrailwireError('unavailable', `${settings.owner} could not reach Redis.`, { cause: error });
  }
  return bus;
}
