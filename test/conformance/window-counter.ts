/**
 * The conformance suite every `WindowCounter` passes (the in-process `MemoryWindowCounter`, the
 * shared `RedisWindowCounter`, any later backend): counts start at 1 and rise by one, keys are
 * independent, `peek` does not count, a count is forgotten once its expiry has passed, concurrent
 * increments of one key are atomic, and a `FixedWindowLimiter` over the counter allows exactly its
 * limit of concurrent requests. A test file calls `runWindowCounterConformance({ name, open, skip })`
 * once per implementation, naming a reason for any skipped case.
 *
 * Expiry follows the backend's own time, so each backend says how time passes for it: `open` answers
 * the clock its counter expires by and `advancePast`, which returns once that clock has passed a
 * given instant — by moving a `ManualClock` (memory), or by waiting out a short real delay (Redis,
 * whose server keeps the time). Every case uses fresh random keys, so one counter may serve them all.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { ManualClock, type Clock } from '../../core/clock.ts';
import { FixedWindowLimiter, type WindowCounter } from '../../core/rate-limit.ts';

export type WindowCounterCase =
  | 'counts from 1 up by one'
  | 'keys are independent'
  | 'peek reads without counting'
  | 'a count is forgotten once its expiry has passed'
  | 'concurrent increments of one key answer exactly 1..N'
  | 'a FixedWindowLimiter over the counter allows exactly its limit of concurrent requests';

/** One backend's counter and its control over time, for one case. */
export interface WindowCounterFixture {
  counter: WindowCounter;
  /** The time the counter's expiry follows (epoch ms). */
  clock: Clock;
  /** Returns once `clock` has passed `expiresAt`, so that a count expiring then is gone. */
  advancePast(expiresAt: number): Promise<void>;
  /** Releases what `open` took, if anything. */
  close?(): Promise<void>;
}

export interface WindowCounterConformanceOptions {
  /** Names the implementation in the test titles. */
  name: string;
  /** A counter for one case; it may be shared between cases, since cases use fresh keys. */
  open(): Promise<WindowCounterFixture>;
  /**
   * How far after `clock.now()` the expiry case sets its expiry, in ms: long enough for a couple of
   * round trips before it, short for a backend that must really wait. Default 400.
   */
  expiryLeadMs?: number;
  /** Cases this implementation skips, each with the reason. */
  skip?: Partial<Record<WindowCounterCase, string>>;
}

/** Registers the suite's cases with `node:test`. */
export function runWindowCounterConformance(options: WindowCounterConformanceOptions): void {
  const expiryLeadMs = options.expiryLeadMs ?? 400;
  const caseOf = (name: WindowCounterCase, body: (fixture: WindowCounterFixture) => Promise<void>) => {
    it(name, { skip: options.skip?.[name] ?? false }, async () => {
      const fixture = await options.open();
      try {
        await body(fixture);
      } finally {
        await fixture.close?.();
      }
    });
  };
  /** A far expiry: nothing in a case outlives it. */
  const later = (fixture: WindowCounterFixture) => fixture.clock.now() + 60 * 60 * 1000;

  describe(`WindowCounter conformance: ${options.name}`, () => {
    caseOf('counts from 1 up by one', async (fixture) => {
      const key = uid();
      const expiresAt = later(fixture);
      const counts = [];
      for (let i = 0; i < 5; i++) counts.push(await fixture.counter.increment(key, expiresAt));
      assert.deepEqual(counts, [1, 2, 3, 4, 5]);
    });

    caseOf('keys are independent', async ({ counter, ...fixture }) => {
      const [a, b] = [uid(), uid()];
      const expiresAt = later({ counter, ...fixture });
      await counter.increment(a, expiresAt);
      await counter.increment(a, expiresAt);
      assert.equal(await counter.increment(b, expiresAt), 1, 'a new key starts at 1 whatever the others count');
      assert.equal(await counter.increment(a, expiresAt), 3);
      assert.deepEqual([await counter.peek(a), await counter.peek(b), await counter.peek(uid())], [3, 1, 0]);
    });

    caseOf('peek reads without counting', async (fixture) => {
      const { counter } = fixture;
      const key = uid();
      assert.equal(await counter.peek(key), 0, 'an unknown key counts 0');
      assert.equal(await counter.peek(key), 0);
      assert.equal(await counter.increment(key, later(fixture)), 1, 'peeking created nothing');
      await counter.increment(key, later(fixture));
      assert.equal(await counter.peek(key), 2);
      assert.equal(await counter.peek(key), 2);
      assert.equal(await counter.increment(key, later(fixture)), 3);
    });

    caseOf('a count is forgotten once its expiry has passed', async (fixture) => {
      const { counter } = fixture;
      const [expiring, lasting] = [uid(), uid()];
      const expiresAt = fixture.clock.now() + expiryLeadMs;
      await counter.increment(expiring, expiresAt);
      await counter.increment(expiring, expiresAt);
      await counter.increment(lasting, later(fixture));
      assert.equal(await counter.peek(expiring), 2, 'counted until its expiry');
      await fixture.advancePast(expiresAt);
      assert.equal(await counter.peek(expiring), 0, 'gone once the expiry has passed');
      assert.equal(await counter.peek(lasting), 1, 'a key with a later expiry is kept');
      const next = fixture.clock.now() + 60_000;
      assert.equal(await counter.increment(expiring, next), 1, 'the next count starts again at 1');
    });

    caseOf('concurrent increments of one key answer exactly 1..N', async (fixture) => {
      const key = uid();
      const expiresAt = later(fixture);
      const n = 200;
      const counts = await Promise.all(Array.from({ length: n }, () => fixture.counter.increment(key, expiresAt)));
      assert.deepEqual(
        [...counts].sort((x, y) => x - y),
        Array.from({ length: n }, (_, i) => i + 1),
        'every increment got its own count: none lost, none repeated',
      );
      assert.equal(await fixture.counter.peek(key), n);
    });

    caseOf('a FixedWindowLimiter over the counter allows exactly its limit of concurrent requests', async (fixture) => {
      // The limiter's own clock is pinned a minute ahead of the counter's, so its window (and the expiry
      // it passes down) ends at least a minute from now and cannot roll over during the case.
      const clock = new ManualClock(fixture.clock.now() + 60_000);
      const limiter = new FixedWindowLimiter({ name: `conformance-${uid()}`, limit: 7, windowSeconds: 3600, counter: fixture.counter, clock });
      const states = await Promise.all(Array.from({ length: 40 }, () => limiter.consume('vin-1')));
      assert.equal(states.filter((state) => state.allowed).length, 7, 'exactly the limit is allowed');
      assert.deepEqual(
        states.map((state) => state.remaining).sort((x, y) => y - x).slice(0, 8),
        [6, 5, 4, 3, 2, 1, 0, 0],
        'each allowed request saw its own remaining count',
      );
      assert.equal((await limiter.peek('vin-1')).allowed, false);
      assert.equal((await limiter.consume('vin-2')).allowed, true, 'another subject has its own window');
    });
  });
}

/** A fresh key; the UUID keeps cases (and concurrent test files) apart. */
const uid = (): string => `key-${randomUUID()}`;
