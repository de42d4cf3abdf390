/** The in-process replay window: positions, what is resumable, and its bounds (by age and by count). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { comparePositions, isPosition, ReplayRing, resolveReplayOptions } from '../../core/live-replay.ts';

describe('ReplayRing', () => {
  it('issues increasing `<ms>-<seq>` positions from the clock, never going back', () => {
    const clock = new ManualClock(1_000);
    const ring = new ReplayRing<number>(clock, { replaySeconds: 60, maxEvents: 100 });
    const positions = [ring.append(1), ring.append(2)];
    clock.set(900); // a clock that steps back
    positions.push(ring.append(3));
    clock.set(1_001);
    positions.push(ring.append(4));
    assert.deepEqual(positions, ['1000-0', '1000-1', '1000-2', '1001-0']);
    assert.ok(positions.every(isPosition));
    assert.deepEqual([...positions].sort(comparePositions), positions);
  });

  it('answers what followed a held position, and null for one it never issued', () => {
    const clock = new ManualClock(5_000);
    const ring = new ReplayRing<string>(clock, { replaySeconds: 60, maxEvents: 100 });
    const a = ring.append('a');
    ring.append('b');
    const c = ring.append('c');
    assert.deepEqual(ring.after(a)?.map((entry) => entry.item), ['b', 'c']);
    assert.deepEqual(ring.after(c), []);
    assert.equal(ring.after('4999-0'), null, 'before the window was made (another process, a restart)');
    assert.equal(ring.after('9999-0'), null, 'a position from the future');
  });

  it('drops by age and by count from the oldest end; the newest dropped position stays resumable', () => {
    const clock = new ManualClock(0);
    const ring = new ReplayRing<number>(clock, { replaySeconds: 10, maxEvents: 3 });
    const first = ring.append(1);
    const second = ring.append(2);
    clock.advance(11_000);
    const third = ring.append(3); // 1 and 2 are older than 10 s: dropped
    assert.equal(ring.size, 1);
    assert.equal(ring.after(first), null, 'something after it was dropped');
    assert.deepEqual(ring.after(second)?.map((entry) => entry.item), [3], 'nothing after it was dropped');
    for (let i = 4; i <= 6; i++) ring.append(i);
    assert.equal(ring.size, 3);
    assert.equal(ring.after(third)?.length, 3);
    assert.equal(ring.after(second), null);
  });

  it('refuses bad settings, naming them', () => {
    assert.throws(() => resolveReplayOptions({ replaySeconds: -1 }, 'X'), /replaySeconds/);
    assert.throws(() => resolveReplayOptions({ maxEvents: 0 }, 'X'), /maxEvents/);
    assert.deepEqual(resolveReplayOptions({ replaySeconds: undefined }, 'X'), { replaySeconds: 300, maxEvents: 100_000 });
  });
});
