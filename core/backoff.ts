/**
 * A doubling delay with a ceiling: how long to wait before the next try of something that failed
 * (a thread to restart, a session to reopen, writes the store refused), reset once it works again.
 * The one backoff of the intake path, so that each place says only its first delay and its ceiling.
 */
export class Backoff {
  private nextMs: number;

  /** @param firstMs the first delay; each `next()` doubles it, up to `maxMs` */
  constructor(
    private readonly firstMs: number,
    private readonly maxMs: number,
  ) {
    this.nextMs = firstMs;
  }

  /** The delay before this try; the one after is twice as long (at most `maxMs`). */
  next(): number {
    const delay = this.nextMs;
    this.nextMs = Math.min(delay * 2, this.maxMs);
    return delay;
  }

  /** It worked: the next failure waits the first delay again. */
  reset(): void {
    this.nextMs = this.firstMs;
  }
}
