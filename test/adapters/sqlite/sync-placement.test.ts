/**
 * Where `power`'s journal syncs run: on the event loop while they are quick, on libuv's pool once they
 * are slow on average, with a probe on the loop now and then to come back when the disk is quick again.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PROBE_EVERY, QUICK_SYNC_MS, SLOW_SYNC_MS, SyncPlacement } from '../../../adapters/sqlite/sync-placement.ts';

/** The next `count` placements, true for each on the event loop. */
const placements = (placement: SyncPlacement, count: number) => Array.from({ length: count }, () => placement.nextOnLoop());

describe('SyncPlacement', () => {
  it('keeps syncs on the event loop while they are quick, and through one slow sync among them', () => {
    const placement = new SyncPlacement();
    for (let i = 0; i < 100; i++) placement.measured(0.2);
    placement.measured(SLOW_SYNC_MS * 4);
    assert.equal(placement.syncsOnLoop, true);
    assert.deepEqual(placements(placement, 3), [true, true, true]);
  });

  it('moves syncs to the pool once they are slow on average, probing on the loop once every PROBE_EVERY', () => {
    const placement = new SyncPlacement();
    let slow = 0;
    while (placement.syncsOnLoop) {
      placement.measured(SLOW_SYNC_MS * 2);
      slow++;
    }
    assert.ok(slow > 1, 'one slow sync alone does not move them');
    const next = placements(placement, PROBE_EVERY * 2);
    assert.equal(next.filter(Boolean).length, 2);
    assert.equal(next[PROBE_EVERY - 1], true);
  });

  it('brings syncs back to the loop once the probes find the disk quick again, and not while they find it between the lines', () => {
    const placement = new SyncPlacement();
    while (placement.syncsOnLoop) placement.measured(SLOW_SYNC_MS * 2);
    for (let i = 0; i < 50; i++) placement.measured((QUICK_SYNC_MS + SLOW_SYNC_MS) / 2);
    assert.equal(placement.syncsOnLoop, false, 'between the two lines, syncs stay where they are');
    for (let i = 0; i < 50 && !placement.syncsOnLoop; i++) placement.measured(QUICK_SYNC_MS / 4);
    assert.equal(placement.syncsOnLoop, true);
  });
});
