/**
 * Collects what arrives within one event-loop turn and hands it over at once, at the turn's end
 * (`setImmediate`): the group commit of intake. Every concurrent request of a turn then shares one
 * commit (one fsync in `power` durability) and one wake-up of the processing thread, so that the
 * cost of a commit is paid once per turn rather than once per request.
 *
 * The one place that writes "group this turn's appends"; each queue that appends owns one batcher.
 */
export class TurnBatcher<T> {
  private items: T[] = [];
  private scheduled = false;

  /** @param flush receives every item pushed since the last flush, in order; never an empty array. */
  constructor(private readonly flush: (items: T[]) => void) {}

  /** Adds an item to this turn's group. */
  push(item: T): void {
    this.items.push(item);
    this.schedule();
  }

  /** Hands the group over later again (its flush could not run now, e.g. a transaction was open); `items` go first. */
  putBack(items: readonly T[], delayMs = 0): void {
    this.items = [...items, ...this.items];
    this.schedule(delayMs);
  }

  /** Hands over what is waiting now, without waiting for the turn's end. */
  flushNow(): void {
    this.scheduled = false;
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.flush(items);
  }

  /** Items waiting for the turn's end. */
  get size(): number {
    return this.items.length;
  }

  private schedule(delayMs = 0): void {
    if (this.scheduled) return;
    this.scheduled = true;
    if (delayMs === 0) setImmediate(() => this.scheduled && this.flushNow());
    else setTimeout(() => this.scheduled && this.flushNow(), delayMs);
  }
}
