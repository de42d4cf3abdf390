/**
 * The time and id sources of `core/clock.ts`: the time-ordered UUIDv7 ids of intake payloads.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock, timeOrderedIds } from '../../core/clock.ts';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('timeOrderedIds', () => {
  it('answers UUIDv7 strings carrying the clock time, never all digits', () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
    const next = timeOrderedIds(clock);
    const id = next();
    assert.match(id, UUID_V7);
    assert.equal(parseInt(id.replace(/-/g, '').slice(0, 12), 16), clock.now());
  });

  it('increases strictly: within one millisecond, across 4096 ids in one, and when the clock goes back', () => {
    const clock = new ManualClock(1_000_000);
    const next = timeOrderedIds(clock);
    const ids = Array.from({ length: 5000 }, next);
    clock.set(999_000);
    ids.push(next(), next());
    clock.set(2_000_000);
    ids.push(next());
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i]! > ids[i - 1]!, `${ids[i]} after ${ids[i - 1]}`);
    assert.ok(ids.every((id) => UUID_V7.test(id)));
    assert.equal(new Set(ids).size, ids.length);
  });

  it('is unguessable: two generators at the same instant share no id', () => {
    const clock = new ManualClock(1_000_000);
    const a = new Set(Array.from({ length: 1000 }, timeOrderedIds(clock)));
    const b = Array.from({ length: 1000 }, timeOrderedIds(clock));
    assert.ok(b.every((id) => !a.has(id)));
  });
});
