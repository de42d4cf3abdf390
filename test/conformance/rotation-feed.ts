/**
 * The conformance suite every `RotationFeed` passes (the in-process `MemoryRotationFeed`, the Redis
 * feed): every notice reaches every listener of every participant sharing the feed, with all fields
 * intact; one publisher's notices keep their order; a throwing listener stops no other; unsubscribe;
 * close. Then the property the feed exists for, over two `Trailwire`s on one store: a rotation on
 * one is honoured by the other. A test file calls `runRotationFeedConformance(...)` once per
 * implementation, naming a reason for any skipped case.
 *
 * A networked feed delivers asynchronously, so cases wait for deliveries (never for a fixed time);
 * absence of a delivery is shown by a later notice that does arrive (one publisher's order holds).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TrailwireError } from '../../core/errors.ts';
import type { LiveSink, LiveTrailerEvent } from '../../core/live-hub.ts';
import type { RotationFeed, RotationNotice } from '../../core/rotation-feed.ts';
import type { Trailwire } from '../../core/trailwire.ts';

export type RotationFeedCase =
  | 'delivers to every listener'
  | 'keeps publish order'
  | 'a throwing listener does not stop the others'
  | 'unsubscribe'
  | 'close'
  | 'a rotation on one process is honoured by another';

export interface RotationFeedConformanceOptions {
  /** Names the implementation in the test titles. */
  name: string;
  /**
   * Opens a fresh feed isolated from every other case (its own channel), answering one handle per
   * participant sharing it (`count` processes, in effect): an in-process feed may answer the same
   * object `count` times, a networked one `count` separate connections. Each reports errors thrown
   * by listeners to `onListenerError` when given.
   */
  openFeeds(count: number, onListenerError?: (error: unknown) => void): Promise<RotationFeed[]>;
  /**
   * Two `Trailwire`s over one store, each given its own handle of one fresh feed (from `openFeeds`)
   * as `rotations.feed`: two processes, in effect. `close` closes both and the feeds. Leave
   * `rotations.recheckAfterSeconds` at its default: the case shows that the feed, not a re-read of
   * the store, tells B at once.
   */
  openTwoProcesses(): Promise<{ a: Trailwire; b: Trailwire; close(): Promise<void> }>;
  /** How long to wait for a delivery before failing. Default 2,000 ms. */
  deliveryTimeoutMs?: number;
  /** Cases this implementation skips, each with the reason. */
  skip?: Partial<Record<RotationFeedCase, string>>;
}

/** Registers the suite's cases with `node:test`. */
export function runRotationFeedConformance(options: RotationFeedConformanceOptions): void {
  const timeoutMs = options.deliveryTimeoutMs ?? 2_000;
  const caseOf = (name: RotationFeedCase, body: () => Promise<void>) => {
    it(name, { skip: options.skip?.[name] ?? false }, body);
  };

  async function withFeeds(count: number, body: (feeds: RotationFeed[], reported: unknown[]) => Promise<void>): Promise<void> {
    const reported: unknown[] = [];
    const feeds = await options.openFeeds(count, (error) => reported.push(error));
    try {
      await body(feeds, reported);
    } finally {
      await Promise.all([...new Set(feeds)].map((feed) => feed.close()));
    }
  }

  describe(`RotationFeed conformance: ${options.name}`, () => {
    caseOf('delivers to every listener', () =>
      withFeeds(2, async ([publisher, peer]) => {
        const listeners = [collect(publisher!), collect(publisher!), collect(peer!)];
        const notice = sampleNotice(1);
        await publisher!.publish(notice);
        for (const listener of listeners) assert.deepEqual((await listener.next(1, timeoutMs))[0], notice);
      }),
    );

    caseOf('keeps publish order', () =>
      withFeeds(2, async ([publisher, peer]) => {
        const remote = collect(peer!);
        const local = collect(publisher!);
        const notices = Array.from({ length: 50 }, (_, index) => sampleNotice(index + 1));
        await Promise.all(notices.map((notice) => publisher!.publish(notice)));
        const expected = notices.map((notice) => notice.keyVersion);
        assert.deepEqual((await remote.next(50, timeoutMs)).map((notice) => notice.keyVersion), expected);
        assert.deepEqual((await local.next(50, timeoutMs)).map((notice) => notice.keyVersion), expected);
      }),
    );

    caseOf('a throwing listener does not stop the others', () =>
      withFeeds(2, async ([publisher, peer], reported) => {
        const failure = new Error('listener bug');
        peer!.subscribe(() => {
          throw failure;
        });
        const after = collect(peer!);
        await publisher!.publish(sampleNotice(1));
        await publisher!.publish(sampleNotice(2));
        assert.deepEqual((await after.next(2, timeoutMs)).map((notice) => notice.keyVersion), [1, 2]);
        assert.deepEqual(reported, [failure, failure], 'each error is reported, once per notice');
      }),
    );

    caseOf('unsubscribe', () =>
      withFeeds(2, async ([publisher, peer]) => {
        const leaving = collect(peer!);
        const staying = collect(peer!);
        await publisher!.publish(sampleNotice(1));
        await leaving.next(1, timeoutMs);
        await staying.next(1, timeoutMs);
        leaving.stop();
        leaving.stop(); // a second call is harmless
        await publisher!.publish(sampleNotice(2));
        assert.deepEqual((await staying.next(1, timeoutMs)).map((notice) => notice.keyVersion), [2]);
        assert.equal(leaving.received.length, 1, 'an unsubscribed listener receives nothing more');
      }),
    );

    caseOf('close', async () => {
      const [feed] = await options.openFeeds(1);
      const listener = collect(feed!);
      await feed!.close();
      await assert.rejects(feed!.publish(sampleNotice(1)), (error: unknown) => error instanceof TrailwireError && error.code === 'unavailable');
      await feed!.close(); // idempotent
      assert.equal(listener.received.length, 0);
    });

    caseOf('a rotation on one process is honoured by another', async () => {
      const { a, b, close } = await options.openTwoProcesses();
      try {
        const { principal, apiKey } = await a.auth.createCustomer({ name: 'Rotating customer' });
        const { principal: bystander, apiKey: bystanderKey } = await a.auth.createCustomer({ name: 'Bystander' });
        const old = (await b.auth.authenticate('customers', apiKey, '127.0.0.1')).token.accessToken;
        const bystanderToken = (await b.auth.authenticate('customers', bystanderKey, '127.0.0.1')).token.accessToken;
        // B has checked (and cached) the old token and the key version before the rotation.
        const claims = await b.tokens.verify(old);
        await b.tokens.verify(bystanderToken);
        const onB = new RecordingSink();
        const bystanderOnB = new RecordingSink();
        b.live.subscribe(principal.id, onB);
        b.live.subscribe(bystander.id, bystanderOnB);

        const rotated = await a.auth.rotate(claims);
        const endedOnB = await onB.whenEnded(timeoutMs);
        assert.equal(endedOnB.code, 'invalid_token', "B ends the rotated customer's streams with UNAUTHENTICATED");
        assert.equal(b.live.subscriberCount(principal.id), 0);
        await assert.rejects(b.tokens.verify(old), (error: unknown) => error instanceof TrailwireError && error.code === 'invalid_token');

        // Only what was revoked: the new key works on B, the bystander is untouched.
        const fresh = (await b.auth.authenticate('customers', rotated.apiKey, '127.0.0.1')).token.accessToken;
        assert.equal((await b.tokens.verify(fresh)).sub, principal.id);
        await b.tokens.verify(bystanderToken);
        assert.equal(bystanderOnB.ended.length, 0);
        assert.equal(b.live.subscriberCount(bystander.id), 1);
      } finally {
        await close();
      }
    });
  });
}

/** A sink that records what it is given and how it ended. */
class RecordingSink implements LiveSink {
  written: LiveTrailerEvent[] = [];
  ended: TrailwireError[] = [];
  private waiter: (() => void) | undefined;

  write(event: LiveTrailerEvent): boolean {
    this.written.push(event);
    return true;
  }

  end(reason: TrailwireError): void {
    this.ended.push(reason);
    this.waiter?.();
  }

  whenEnded(timeoutMs: number): Promise<TrailwireError> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the stream did not end within ${timeoutMs} ms`)), timeoutMs);
      const check = () => {
        if (this.ended.length === 0) return;
        clearTimeout(timer);
        resolve(this.ended[0]!);
      };
      this.waiter = check;
      check();
    });
  }
}

interface Collector {
  received: RotationNotice[];
  next(count: number, timeoutMs: number): Promise<RotationNotice[]>;
  stop(): void;
}

function collect(feed: RotationFeed): Collector {
  const received: RotationNotice[] = [];
  let taken = 0;
  let waiter: (() => void) | undefined;
  const stop = feed.subscribe((notice) => {
    received.push(notice);
    waiter?.();
  });
  return {
    received,
    stop,
    next(count, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(new Error(`expected ${count} more notices within ${timeoutMs} ms, got ${received.length - taken}`));
        }, timeoutMs);
        const check = () => {
          if (received.length - taken < count) return;
          clearTimeout(timer);
          waiter = undefined;
          const batch = received.slice(taken, taken + count);
          taken += count;
          resolve(batch);
        };
        waiter = check;
        check();
      });
    },
  };
}

/** A notice whose `keyVersion` is `n`. */
export function sampleNotice(n: number, overrides: Partial<RotationNotice> = {}): RotationNotice {
  return { audience: 'customers', principalId: '0b6f3f7e-2c1a-4d5e-9f00-00000000c0de', keyVersion: n, origin: 'process-a', ...overrides };
}
