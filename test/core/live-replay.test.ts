/** The in-process replay window: positions, what is resumable, and its bounds (by age and by count). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { comparePositions, isPosition, ReplayRing, resolveReplayOptions } from '../../core/live-replay.ts';

describe('ReplayRing', () => {
  it('issues increasing `<ms>-<seq>` positions from the clock, never going back', () => {
    const clock = new ManualClock(1_000);
    const ring = new ReplayRing<number>(clock, { replaySeconds: 60, maxEvents: 100 });
    const positions = [ring.append('k', 1), ring.append('k', 2)];
    clock.set(900); // a clock that steps back
    positions.push(ring.append('k', 3));
    clock.set(1_001);
    positions.push(ring.append('k', 4));
    assert.deepEqual(positions, ['1000-0', '1000-1', '1000-2', '1001-0']);
    assert.ok(positions.every(isPosition));
    assert.deepEqual([...positions].sort(comparePositions), positions);
  });

  it("answers what followed a position under one key, and null for one it never issued", () => {
    const clock = new ManualClock(5_000);
    const ring = new ReplayRing<string>(clock, { replaySeconds: 60, maxEvents: 100 });
    const a = ring.append('x', 'a');
    const b = ring.append('y', 'b');
    const c = ring.append('x', 'c');
    assert.deepEqual(ring.after('x', a)?.map((entry) => entry.item), ['c']);
    assert.deepEqual(ring.after('x', b)?.map((entry) => entry.item), ['c'], "another key's position is a place in the window too");
    assert.deepEqual(ring.after('y', c), []);
    assert.deepEqual(ring.after('z', a), [], 'a key with nothing held');
    assert.equal(ring.after('x', '4999-0'), null, 'before the window was made (another process, a restart)');
    assert.equal(ring.after('x', '9999-0'), null, 'a position from the future');
  });

  it('drops by age and by count from the oldest end; the newest dropped position stays resumable', () => {
    const clock = new ManualClock(0);
    const ring = new ReplayRing<number>(clock, { replaySeconds: 10, maxEvents: 3 });
    const first = ring.append('k', 1);
    clock.advance(5_000);
    const second = ring.append('k', 2);
    clock.advance(6_000);
    const third = ring.append('k', 3); // 1 is older than 10 s: dropped
    assert.equal(ring.size, 2);
    assert.equal(ring.after('k', first), null, 'older than the window');
    assert.deepEqual(ring.after('k', second)?.map((entry) => entry.item), [3]);
    for (let i = 4; i <= 6; i++) ring.append('k', i); // 2 and 3 beyond the count: dropped
    assert.equal(ring.size, 3);
    assert.equal(ring.after('k', third)?.length, 3, 'nothing after it was dropped');
    assert.equal(ring.after('k', second), null, 'something after it was dropped');
    clock.advance(10_001);
    assert.equal(ring.after('k', third), null, 'older than the window, even with nothing appended since');
  });

  it('refuses bad settings, naming them', () => {
    assert.throws(() => resolveReplayOptions({ replaySeconds: -1 }, 'X'), /replaySeconds/);
    assert.throws(() => resolveReplayOptions({ maxEvents: 0 }, 'X'), /maxEvents/);
    assert.deepEqual(resolveReplayOptions({ replaySeconds: undefined }, 'X'), { replaySeconds: 300, maxEvents: 100_000 });
  });
});
