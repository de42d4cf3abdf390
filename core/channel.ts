/**
 * The core's publish/subscribe seam: `Channel<Message>`, one stream of messages every listener of
 * every process hears — the rotation feed's key-rotation notices (`RotationFeed`). The live bus
 * (`core/live-bus.ts`) keeps the same rules per customer (a process listens only to the customers it
 * has streams of), and both are held to `test/conformance/channel.ts`. `MemoryChannel` is the
 * in-process implementation (one process needs nothing more); Redis pub/sub is the networked one
 * (`adapters/redis/json-channel.ts`).
 */
import { TrailwireError } from './errors.ts';

export type ChannelListener<Message> = (message: Message) => void;

/**
 * Each message published reaches every current listener of every process sharing the channel (the
 * publisher's own included), with every field intact; one publisher's messages arrive in publish
 * order; a listener that throws does not stop the others; an unsubscribed listener, or a closed
 * channel, receives nothing more.
 */
export interface Channel<Message> {
  /** Hands a message to every listener; resolves once the channel has accepted it. Rejects `unavailable` once closed. */
  publish(message: Message): Promise<void>;
  /** Adds a listener; answers the function that removes it (a second call is harmless). */
  subscribe(listener: ChannelListener<Message>): () => void;
  /** Stops delivery to every listener and releases the channel's resources. Idempotent. */
  close(): Promise<void>;
}

/**
 * The in-process channel. Listeners are called synchronously in `publish`, one after the other; a
 * listener that throws does not stop the others (its error goes to `onListenerError`, by default
 * re-thrown asynchronously so it is not lost).
 */
export class MemoryChannel<Message> implements Channel<Message> {
  private readonly listeners = new Set<ChannelListener<Message>>();
  private closed = false;

  /**
   * @param what names the channel in the error a publish after `close` throws ("live bus")
   * @param onListenerError told of an error a listener threw
   */
  constructor(
    private readonly what: string,
    private readonly onListenerError: (error: unknown) => void = (error) => queueMicrotask(() => { throw error; }),
  ) {}

  async publish(message: Message): Promise<void> {
    if (this.closed) throw new TrailwireError('unavailable', `The ${this.what} is closed.`);
    for (const listener of this.listeners) {
      try {
        listener(message);
      } catch (error) {
        this.onListenerError(error);
      }
    }
  }

  subscribe(listener: ChannelListener<Message>): () => void {
    // A fresh wrapper per subscription, so subscribing the same function twice delivers twice and
    // each unsubscribe removes exactly its own registration.
    const registration = (message: Message) => listener(message);
    if (!this.closed) this.listeners.add(registration);
    return () => {
      this.listeners.delete(registration);
    };
  }

  /** Stops delivery to every listener. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
  }
}
