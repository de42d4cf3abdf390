/**
 * One Redis pub/sub channel of JSON messages, the common part of `RedisLiveBus` and
 * `RedisRotationFeed` (both are "publish, subscribe, close" seams of the core). Messages are
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
 * publisher connection is down waits in ioredis's offline queue and is published, in order, on
 * reconnection — or fails after the connection's `maxRetriesPerRequest`, rejecting `publish`.
 */
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { TrailwireError } from '../../core/errors.ts';

export interface JsonChannelOptions {
  /** A connected ioredis client, used to publish; the channel does not close it. */
  redis: Redis;
  channel: string;
  /** An error thrown by a listener. */
  onListenerError: (error: unknown) => void;
  /** Subscriber connection trouble, and messages that are not JSON. */
  onError: (error: unknown) => void;
  /** Names the channel's owner in errors (`RedisLiveBus`). */
  owner: string;
}

export class JsonChannel<Message> {
  private readonly listeners = new Set<(message: Message) => void>();
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly options: JsonChannelOptions,
    private readonly subscriber: Redis,
  ) {}

  /** Opens the subscriber connection and resolves once the channel is subscribed. */
  static async open<Message>(options: JsonChannelOptions): Promise<JsonChannel<Message>> {
    const subscriber = options.redis.duplicate();
    subscriber.on('error', (error: unknown) => options.onError(error));
    const channel = new JsonChannel<Message>(options, subscriber);
    subscriber.on('message', (name: string, text: string) => channel.receive(name, text));
    try {
      await subscriber.subscribe(options.channel);
    } catch (error) {
      subscriber.disconnect();
      throw new TrailwireError('unavailable', `${options.owner} could not subscribe to the Redis channel ${options.channel}.`, { cause: error });
    }
    return channel;
  }

  get name(): string {
    return this.options.channel;
  }

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

  /** Stops delivery and closes the subscriber connection (the publishing one is the caller's). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.listeners.clear();
      if (this.subscriber.status === 'end') return;
      // QUIT answers before the socket is closed: wait for 'end', so that closed means released.
      const ended = once(this.subscriber, 'end');
      try {
        await this.subscriber.quit();
      } catch {
        this.subscriber.disconnect();
      }
      await ended;
    })();
    return this.closing;
  }

  private receive(name: string, text: string): void {
    if (name !== this.options.channel || this.closing) return;
    let message: Message;
    try {
      message = JSON.parse(text) as Message;
    } catch (error) {
      this.options.onError(
        new TrailwireError('internal', `${this.options.owner} ignored a message on ${name} that is not JSON: ${text.slice(0, 100)}`, { cause: error }),
      );
      return;
    }
    for (const listener of this.listeners) {
      try {
        listener(message);
      } catch (error) {
        this.options.onListenerError(error);
      }
    }
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
