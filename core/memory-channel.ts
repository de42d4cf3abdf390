/**
 * An in-process publish/subscribe channel: what the embedded default of each cross-process seam
 * (the live bus, the rotation feed) does when there is only one process. Listeners are called
 * synchronously in `publish`, one after the other; a listener that throws does not stop the others
 * (its error goes to `onListenerError`, by default re-thrown asynchronously so it is not lost).
 */
import { TrailwireError } from './errors.ts';

export class MemoryChannel<T> {
  private readonly listeners = new Set<(message: T) => void>();
  private closed = false;

  /**
   * @param what names the channel in the error a publish after `close` throws ("live bus")
   * @param onListenerError told of an error a listener threw
   */
  constructor(
    private readonly what: string,
    private readonly onListenerError: (error: unknown) => void = (error) => queueMicrotask(() => { throw error; }),
  ) {}

  async publish(message: T): Promise<void> {
    if (this.closed) throw new TrailwireError('unavailable', `The ${this.what} is closed.`);
    for (const listener of this.listeners) {
      try {
        listener(message);
      } catch (error) {
        this.onListenerError(error);
      }
    }
  }

  subscribe(listener: (message: T) => void): () => void {
    // A fresh wrapper per subscription, so subscribing the same function twice delivers twice and
    // each unsubscribe removes exactly its own registration.
    const registration = (message: T) => listener(message);
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
