/**
 * The conformance suite every `RotationFeed` passes (the in-process `MemoryRotationFeed`, the Redis
 * feed). A rotation feed is a `Channel` of notices, so the channel suite (`channel.ts`, the one the
 * live bus passes too) runs first — every notice to every listener of every participant with all
 * fields intact, publish order per publisher, a throwing listener stopping no other, unsubscribe,
 * close — then the property the feed exists for, over two `Trailwire`s on one store: a rotation on
 * one is honoured by the other. A test file calls `runRotationFeedConformance(...)` once per
 * implementation, naming a reason for any skipped case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TrailwireError } from '../../core/errors.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { LiveSink } from '../../core/live-subscriber.ts';
import type { RotationFeed, RotationNotice } from '../../core/rotation-feed.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { type ChannelCase, runChannelConformance } from './channel.ts';

export type RotationFeedCase = ChannelCase | 'a rotation on one process is honoured by another';

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

/** Registers the suite's cases with `node:test`: the channel suite's, then the rotation across processes. */
export function runRotationFeedConformance(options: RotationFeedConformanceOptions): void {
  const timeoutMs = options.deliveryTimeoutMs ?? 2_000;
  runChannelConformance<RotationNotice, RotationFeed>({
    name: `RotationFeed: ${options.name}`,
    openChannels: options.openFeeds,
    checksListenerErrors: true,
    sample: sampleNotice,
    numberOf: (notice) => notice.keyVersion,
    deliveryTimeoutMs: options.deliveryTimeoutMs,
    skip: options.skip,
  });
  const caseOf = (name: RotationFeedCase, body: () => Promise<void>) => {
    it(name, { skip: options.skip?.[name] ?? false }, body);
  };

  describe(`RotationFeed across processes: ${options.name}`, () => {
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

/** A notice whose `keyVersion` is `n`. */
export function sampleNotice(n: number, overrides: Partial<RotationNotice> = {}): RotationNotice {
  return { audience: 'customers', principalId: '0b6f3f7e-2c1a-4d5e-9f00-00000000c0de', keyVersion: n, origin: 'process-a', ...overrides };
}
