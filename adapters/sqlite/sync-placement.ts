/**
 * Where the intake journal's fdatasync runs in `power` durability: on the event loop, in the turn
 * that wrote the group, or on libuv's pool while the loop serves on.
 *
 * On a disk whose sync is quick, the event loop is the cheaper place. A sync handed to the pool
 * passes through the loop twice (the hand-over, then its callback a turn or more later), wakes a pool
 * thread each time, and holds its group's 202s — and with them their connections — across those
 * turns, so that fewer requests are in flight and the turns carry fewer of them each. Measured on a
 * 2-core machine whose syncs took 0.2 ms (p50) under load, in five runs each interleaving the two
 * with `process` (`docs/performance.md`): on the loop, a `power` 202 cost 4–22 µs less CPU than on
 * the pool in every run, and reached 0.79–0.90 × `process` against the pool's 0.80–0.89 ×.
 *
 * On a slow disk (a network volume, a spinning one) each turn would stall for the sync's length, so
 * syncs that take long on average go to the pool; there one sync in `PROBE_EVERY` still runs on the
 * loop, to notice when the disk is quick again. The averages have a gap between them so that a
 * disk near the line does not switch at every sync.
 */

/** Above this average sync time, syncs go to the pool. */
export const SLOW_SYNC_MS = 2;
/** Below this one, they come back to the event loop. */
export const QUICK_SYNC_MS = 1;
/** On the pool, one sync in this many runs on the loop to measure the disk again. */
export const PROBE_EVERY = 64;
/** Weight of the latest measurement in the moving average. */
const WEIGHT = 0.2;

export class SyncPlacement {
  private averageMs = 0;
  private onLoop = true;
  private sincePoolProbe = 0;

  /** Whether the next sync runs on the event loop (then measured with `measured`). */
  nextOnLoop(): boolean {
    if (this.onLoop) return true;
    if (++this.sincePoolProbe < PROBE_EVERY) return false;
    this.sincePoolProbe = 0;
    return true;
  }

  /** How long a sync on the event loop took. */
  measured(milliseconds: number): void {
    this.averageMs += WEIGHT * (milliseconds - this.averageMs);
    if (this.onLoop && this.averageMs > SLOW_SYNC_MS) this.onLoop = false;
    else if (!this.onLoop && this.averageMs < QUICK_SYNC_MS) this.onLoop = true;
  }

  /** Whether syncs run on the event loop for now. */
  get syncsOnLoop(): boolean {
    return this.onLoop;
  }
}
