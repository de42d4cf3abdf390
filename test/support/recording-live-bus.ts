/**
 * Test support: a `MemoryLiveBus` that keeps every event published through it, whatever its
 * customer, for a test that looks at all of a process's live updates (the bus itself hands an event
 * only to listeners of its customer).
 */
import { type LivePublishOptions, type LiveTrailerEvent, MemoryLiveBus } from '../../core/live-bus.ts';

export class RecordingLiveBus extends MemoryLiveBus {
  /** Every event published, in publish order, as the publisher gave it (without the window's position). */
  readonly published: LiveTrailerEvent[] = [];

  override async publish(event: LiveTrailerEvent, options?: LivePublishOptions): Promise<void> {
    this.published.push(event);
    return super.publish(event, options);
  }
}
