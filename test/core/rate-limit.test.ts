import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { FixedWindowLimiter, MemoryWindowCounter } from '../../core/rate-limit.ts';
import { isTrailwireError } from '../../core/errors.ts';

function limiter(clock: ManualClock, limit = 3, windowSeconds = 300) {
  return new FixedWindowLimiter({ name: 'test', limit, windowSeconds, counter: new MemoryWindowCounter(clock), clock });
}

describe('FixedWindowLimiter', () => {
  it('allows exactly the limit per window and reports what remains', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 0, 0));
    const limits = limiter(clock);
    const states = [];
    for (let i = 0; i < 5; i++) states.push(await limits.consume('a'));
    assert.deepEqual(states.map((s) => s.allowed), [true, true, true, false, false]);
    assert.deepEqual(states.map((s) => s.remaining), [2, 1, 0, 0, 0]);
    assert.equal(states[0]?.limit, 3);
  });

  it('aligns windows to clock boundaries: a 5-minute window resets at :05 whenever it started', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 4, 58));
    const limits = limiter(clock, 1);
    assert.equal((await limits.consume('a')).allowed, true);
    const limited = await limits.consume('a');
    assert.equal(limited.allowed, false);
    assert.equal(limited.resetSeconds, 2);
    clock.set(Date.UTC(2026, 0, 1, 10, 5, 0));
    assert.equal((await limits.consume('a')).allowed, true);
    assert.equal((await limits.consume('a')).resetSeconds, 300);
  });

  it('counts a request in the window of the time the caller gives', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 4, 59, 999));
    const limits = limiter(clock, 1);
    const nextWindow = Date.UTC(2026, 0, 1, 10, 5, 0);
    assert.equal((await limits.consume('a', nextWindow)).allowed, true);
    assert.equal((await limits.consume('a', nextWindow)).allowed, false);
    assert.equal((await limits.peek('a')).remaining, 1, 'the window of the clock is untouched');
    assert.equal((await limits.consume('a')).allowed, true);
  });

  it('counts subjects separately', async () => {
    const clock = new ManualClock();
    const limits = limiter(clock, 1);
    assert.equal((await limits.consume('vin-1')).allowed, true);
    assert.equal((await limits.consume('vin-1')).allowed, false);
    assert.equal((await limits.consume('vin-2')).allowed, true);
  });

  it('peek does not count, and says whether there is room', async () => {
    const clock = new ManualClock();
    const limits = limiter(clock, 2);
    assert.equal((await limits.peek('a')).allowed, true);
    await limits.consume('a');
    await limits.consume('a');
    const peeked = await limits.peek('a');
    assert.equal(peeked.allowed, false);
    assert.equal(peeked.remaining, 0);
  });

  it('enforce throws rate_limited carrying the state for the headers', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 0, 30));
    const limits = limiter(clock, 1, 60);
    await limits.enforce('a');
    await assert.rejects(limits.enforce('a'), (error: unknown) => {
      assert.ok(isTrailwireError(error));
      assert.equal(error.code, 'rate_limited');
      assert.equal(error.rateLimit?.resetSeconds, 30);
      return true;
    });
  });

  it('rejects bad options naming the field', () => {
    const clock = new ManualClock();
    const counter = new MemoryWindowCounter(clock);
    assert.throws(() => new FixedWindowLimiter({ name: 'x', limit: 0, windowSeconds: 1, counter, clock }), /`limit`/);
    assert.throws(() => new FixedWindowLimiter({ name: 'x', limit: 1, windowSeconds: 0.5, counter, clock }), /`windowSeconds`/);
  });
});

describe('MemoryWindowCounter', () => {
  it('forgets counts once their window has ended', async () => {
    const clock = new ManualClock(1_000);
    const counter = new MemoryWindowCounter(clock);
    assert.equal(await counter.increment('k', 2_000), 1);
    assert.equal(await counter.increment('k', 2_000), 2);
    clock.set(2_000);
    assert.equal(await counter.peek('k'), 0);
    assert.equal(await counter.increment('k', 3_000), 1);
  });
});
