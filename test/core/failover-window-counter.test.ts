/**
 * The per-process fallback of the shared limits (contract 6 and 11: Redis down is not a refusal):
 * `FailoverWindowCounter` behind `FixedWindowLimiter`, with a shared counter that fails on demand and
 * a manual clock — no Redis, no sleeping.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { FailoverWindowCounter, FixedWindowLimiter, MemoryWindowCounter, type WindowCounter } from '../../core/rate-limit.ts';

/** A shared counter (really in memory) that throws while `down`, counting the calls that reached it. */
class FlakyCounter implements WindowCounter {
  down = false;
  calls = 0;
  private readonly inner: MemoryWindowCounter;
  constructor(clock: ManualClock) {
    this.inner = new MemoryWindowCounter(clock);
  }
  async increment(key: string, expiresAt: number): Promise<number> {
    this.calls++;
    if (this.down) throw new Error('connection refused');
    return this.inner.increment(key, expiresAt);
  }
  async peek(key: string): Promise<number> {
    this.calls++;
    if (this.down) throw new Error('connection refused');
    return this.inner.peek(key);
  }
}

function setUp(options: { limit?: number; processes?: number; retryIntervalMs?: number } = {}) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 10, 0, 0));
  const shared = new FlakyCounter(clock);
  const changes: boolean[] = [];
  const counter = new FailoverWindowCounter({
    shared,
    clock,
    processes: () => options.processes ?? 1,
    retryIntervalMs: options.retryIntervalMs ?? 1000,
    onChange: (up) => changes.push(up),
  });
  const limiter = new FixedWindowLimiter({ name: 'test', limit: options.limit ?? 10, windowSeconds: 300, counter, clock });
  return { clock, shared, counter, limiter, changes };
}

describe('FailoverWindowCounter', () => {
  it('counts on the shared counter while it answers, with the whole limit', async () => {
    const { shared, limiter, counter, changes } = setUp({ processes: 4 });
    const state = await limiter.consume('a');
    assert.equal(state.limit, 10);
    assert.equal(state.remaining, 9);
    assert.equal(shared.calls, 1);
    assert.equal(counter.sharedUp, true);
    assert.deepEqual(changes, []);
  });

  it('while the shared counter is down, grants each process its 1/N part of the limit, and never refuses for the outage itself', async () => {
    const { shared, limiter, counter } = setUp({ limit: 10, processes: 3 });
    shared.down = true;
    const states = [];
    for (let i = 0; i < 5; i++) states.push(await limiter.consume('a'));
    assert.equal(counter.sharedUp, false);
    // floor(10 / 3) = 3 for this process: three processes together grant 9, never more than 10.
    assert.deepEqual(states.map((state) => state.allowed), [true, true, true, false, false]);
    assert.deepEqual(states.map((state) => state.limit), [3, 3, 3, 3, 3]);
    assert.equal(states[0]!.remaining, 2);
    assert.equal((await limiter.consume('b')).allowed, true, 'other subjects have their own local windows');
  });

  it('grants at least one request a window when the limit is smaller than the processes', async () => {
    const { shared, limiter } = setUp({ limit: 2, processes: 5 });
    shared.down = true;
    assert.equal((await limiter.consume('a')).allowed, true);
    assert.equal((await limiter.consume('a')).allowed, false);
  });

  it('keeps the local windows aligned to clock boundaries', async () => {
    const { clock, shared, limiter } = setUp({ limit: 1, retryIntervalMs: 10 * 60_000 });
    shared.down = true;
    clock.set(Date.UTC(2026, 0, 1, 10, 4, 58));
    assert.equal((await limiter.consume('a')).allowed, true);
    const refused = await limiter.consume('a');
    assert.equal(refused.allowed, false);
    assert.equal(refused.resetSeconds, 2);
    clock.set(Date.UTC(2026, 0, 1, 10, 5, 0));
    assert.equal((await limiter.consume('a')).allowed, true);
  });

  it('reports the outage once, tries the shared counter once per retry interval, and goes back to it when it answers', async () => {
    const { clock, shared, limiter, counter, changes } = setUp({ limit: 100, processes: 2, retryIntervalMs: 1000 });
    shared.down = true;
    for (let i = 0; i < 20; i++) await limiter.consume('a');
    assert.deepEqual(changes, [false], 'one report for twenty requests');
    assert.equal(shared.calls, 1, 'no second try within the retry interval');
    clock.advance(1000);
    await limiter.consume('a');
    assert.equal(shared.calls, 2, 'one try once the interval has passed');
    assert.deepEqual(changes, [false]);
    shared.down = false;
    await limiter.consume('a');
    assert.equal(shared.calls, 2, 'still within the new interval: counted locally');
    clock.advance(1000);
    const back = await limiter.consume('a');
    assert.equal(counter.sharedUp, true);
    assert.deepEqual(changes, [false, true]);
    assert.equal(back.limit, 100, 'the whole limit again');
    assert.equal(back.remaining, 99, 'what was counted locally is not carried into the shared window');
    await limiter.consume('a');
    assert.equal(shared.calls, 4, 'every request counts on the shared counter again');
  });

  it('does not end an outage on a slow call that started before it', async () => {
    const clock = new ManualClock();
    let release: (() => void) | undefined;
    const slow: WindowCounter = {
      increment: () => new Promise((resolve) => (release = () => resolve(1))),
      peek: async () => 0,
    };
    const changes: boolean[] = [];
    const counter = new FailoverWindowCounter({ shared: slow, clock, onChange: (up) => changes.push(up) });
    const pending = counter.increment('k', clock.now() + 1000);
    // Meanwhile another call fails: the counter is down.
    (slow as { increment: WindowCounter['increment'] }).increment = async () => {
      throw new Error('down');
    };
    await counter.increment('k', clock.now() + 1000);
    release!();
    await pending;
    assert.equal(counter.sharedUp, false);
    assert.deepEqual(changes, [false]);
  });

  it('peeks locally while down', async () => {
    const { shared, limiter } = setUp({ limit: 4, processes: 2 });
    shared.down = true;
    await limiter.consume('a');
    const peeked = await limiter.peek('a');
    assert.equal(peeked.limit, 2);
    assert.equal(peeked.remaining, 1);
  });
});
