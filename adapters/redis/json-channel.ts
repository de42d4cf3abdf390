/**
 * One Redis pub/sub channel of JSON messages: the core's `Channel` over Redis (`core/channel.ts`),
 * the rotation feed's (`RedisRotationFeed`), with the options and connections the live bus shares. Messages are
 * published on the caller's connection and received on a subscriber connection this channel opens
 * (`redis.duplicate()`: a connection in subscriber mode can run no other command) and closes.
 *
 * Order: one connection's PUBLISHes are executed in the order they were sent, and Redis delivers a
 * channel's messages to a subscriber in execution order, so one publisher's messages arrive in
 * publish order — at every process, the publisher's own included (its listeners hear it through
 * Redis too, like everyone else).
 *
 * A lost connection. ioredis reconnects by itself and subscribes the channel again
 * (`autoResubscribe`). Redis pub/sub keeps nothing for an absent subscriber: what is published while
 * the subscriber connection is down never reaches this process. What is published while the
 * publisher connection is down fails at once when that connection has no offline queue (the server
 * opens it so: `shared-state.ts`), else waits in ioredis's offline queue — and `publish` rejects.
 * `RedisLiveBus` rides through both (see `live-bus.ts`).
 */
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import type { Channel } from '../../core/channel.ts';
import { TrailwireError } from '../../core/errors.ts';

/** The options a Redis seam's `open…` function takes (each seam documents its own defaults). */
export interface RedisChannelOptions {
  /** A connected ioredis client, used to publish; the channel does not close it. */
  redis: Redis;
  channel?: string;
  /** An error thrown by a listener. Default: re-thrown asynchronously. */
  onListenerError?: (error: unknown) => void;
  /** Subscriber connection trouble, and messages that are not JSON. Default: ignored. */
  onError?: (error: unknown) => void;
}

/** What a channel runs on once its options are checked and defaulted. */
export interface JsonChannelSettings {
  redis: Redis;
  channel: string;
  onListenerError: (error: unknown) => void;
  onError: (error: unknown) => void;
  /** Names the channel's owner in errors ("The Redis live bus"). */
  owner: string;
}

/** The base of `RedisRotationFeed`; open one with `openJsonChannel`. */
export class JsonChannel<Message> implements Channel<Message> {
  private readonly listeners = new Set<(message: Message) => void>();
  protected closing: Promise<void> | undefined;

  /** @internal Use the seam's `open…` function: it checks the options and subscribes. */
  constructor(
    protected readonly options: JsonChannelSettings,
    protected readonly subscriber: Redis,
  ) {
    subscriber.on('message', (name: string, text: string) => this.receive(name, text));
  }

  /** The pub/sub channel. */
  get channelName(): string {
    return this.options.channel;
  }

  /** Publishes the message; resolves once Redis has taken it. Rejects `unavailable` once closed. */
  async publish(message: Message): Promise<void> {
    if (this.closing) throw new TrailwireError('unavailable', `${this.options.owner} is closed.`);
    await this.options.redis.publish(this.options.channel, JSON.stringify(message));
  }

  subscribe(listener: (message: Message) => void): () => void {
    // A fresh wrapper per subscription: the same function subscribed twice is heard twice, and each
    // unsubscribe removes exactly its own registration.
    const registration = (message: Message) => listener(message);
    if (!this.closing) this.listeners.add(registration);
    return () => {
      this.listeners.delete(registration);
    };
  }

  /** Stops delivery and closes the subscriber connection (not the caller's `redis`). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.listeners.clear();
      await quitSubscriber(this.subscriber);
    })();
    return this.closing;
  }

  private receive(name: string, text: string): void {
    if (name !== this.options.channel || this.closing) return;
    const message = parseMessage<Message>(this.options, name, text);
    if (message !== undefined) this.deliver(message);
  }

  /** Hands a message to this process's listeners only (what Redis would have delivered here). */
  protected deliver(message: Message): void {
    for (const listener of this.listeners) {
      try {
        listener(message);
      } catch (error) {
        this.options.onListenerError(error);
      }
    }
  }
}

/**
 * Checks a seam's options (naming the bad field as `<optionsName>.<field>`), fills in the defaults,
 * opens the subscriber connection and resolves once the channel is subscribed, answering the
 * channel `make` builds on it.
 */
export async function openJsonChannel<Channel>(
  make: (settings: JsonChannelSettings, subscriber: Redis) => Channel,
  names: { optionsName: string; owner: string; defaultChannel: string },
  options: RedisChannelOptions,
): Promise<Channel> {
  const settings = checkChannelOptions(names, options);
  const subscriber = openSubscriber(settings);
  const opened = make(settings, subscriber);
  try {
    await subscriber.subscribe(settings.channel);
  } catch (error) {
    subscriber.disconnect();
    throw new TrailwireError('unavailable', `${settings.owner} could not subscribe to the Redis channel ${settings.channel}.`, { cause: error });
  }
  return opened;
}

/** A seam's options checked (naming the bad field as `<optionsName>.<field>`), with the defaults filled in. */
export function checkChannelOptions(names: { optionsName: string; owner: string; defaultChannel: string }, options: RedisChannelOptions): JsonChannelSettings {
  const { optionsName, owner } = names;
  if (typeof options !== 'object' || options === null) throw badOption(optionsName, 'options', 'must be an object');
  if (typeof options.redis?.duplicate !== 'function' || typeof options.redis.publish !== 'function')
    throw badOption(optionsName, 'redis', 'must be an ioredis client');
  const channel = options.channel ?? names.defaultChannel;
  if (typeof channel !== 'string' || channel === '') throw badOption(optionsName, 'channel', 'must be a non-empty string');
  for (const hook of ['onListenerError', 'onError'] as const)
    if (options[hook] !== undefined && typeof options[hook] !== 'function') throw badOption(optionsName, hook, 'must be a function');
  return {
    redis: options.redis,
    channel,
    onListenerError: options.onListenerError ?? rethrowLater,
    onError: options.onError ?? (() => {}),
    owner,
  };
}

/**
 * The subscriber connection of a seam: the caller's connection may fail fast while Redis is away (no
 * offline queue); this one queues its SUBSCRIBE until it is connected, and ioredis subscribes again
 * after each reconnection.
 */
export function openSubscriber(settings: JsonChannelSettings): Redis {
  const subscriber = settings.redis.duplicate({ enableOfflineQueue: true });
  subscriber.on('error', (error: unknown) => settings.onError(error));
  return subscriber;
}

/** Closes a subscriber connection and resolves once its socket is released. */
export async function quitSubscriber(subscriber: Redis): Promise<void> {
  if (subscriber.status === 'end') return;
  // QUIT answers before the socket is closed: wait for 'end', so that closed means released.
  const ended = once(subscriber, 'end');
  try {
    await subscriber.quit();
  } catch {
    subscriber.disconnect();
  }
  await ended;
}

/** A message received on `name`, or undefined (told to `onError`) when it is not JSON: one bad publisher stops no delivery. */
export function parseMessage<Message>(settings: JsonChannelSettings, name: string, text: string): Message | undefined {
  try {
    return JSON.parse(text) as Message;
  } catch (error) {
    settings.onError(new TrailwireError('internal', `${settings.owner} ignored a message on ${name} that is not JSON: ${text.slice(0, 100)}`, { cause: error }));
    return undefined;
  }
}

/** Re-throws asynchronously, as `MemoryLiveBus` does: a listener's bug is not lost. */
export const rethrowLater = (error: unknown): void =>
  queueMicrotask(() => {
    throw error;
  });

export function badOption(owner: string, field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `${owner}.${field} ${message}`, { errors: [{ path: field, message }] });
}
