/**
 * The stream rules both live transports share (`core/live-streams.ts`), with recording transports,
 * a manual clock and mocked timers: heartbeat at once and every interval (skipped while the
 * transport is full), one per-customer cap over every `LiveStreams` on one hub, the end at the
 * token's expiry and on revocation, and shutdown.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { isTrailwireError, TrailwireError } from '../../core/errors.ts';
import { type LiveTrailerEvent, MemoryLiveBus } from '../../core/live-bus.ts';
import { LiveHub } from '../../core/live-hub.ts';
import { LiveStreams, type LiveStreamTransport } from '../../core/live-streams.ts';
import type { AccessClaims } from '../../core/tokens.ts';

const START = Date.UTC(2026, 5, 1, 12);

function claimsOf(customerId: string, ttlSeconds = 1800): AccessClaims {
  const iat = START / 1000;
  return { iss: 'trailwire', aud: 'customers', sub: customerId, iat, exp: iat + ttlSeconds, jti: `${customerId}-${Math.random()}` } as AccessClaims;
}

/** A transport that records what it is given. */
function recordingTransport() {
  const record = { heartbeats: 0, updates: [] as LiveTrailerEvent[], ended: [] as unknown[], full: false };
  const transport: LiveStreamTransport = {
    write: (event) => {
      record.updates.push(event);
      return !record.full;
    },
    signal: () => true,
    writeHeartbeat: () => void record.heartbeats++,
    get full() {
      return record.full;
    },
    end: (reason) => void record.ended.push(reason),
  };
  return { transport, record };
}

const notRevoked = { assertNotRevoked: async () => {} };

/** Lets the streams opened so far finish subscribing (the hub listens to a customer asynchronously). */
const subscribed = () => new Promise((resolve) => setImmediate(resolve));

describe('LiveStreams', () => {
  let hub: LiveHub;
  let clock: ManualClock;

  beforeEach(() => {
    mock.timers.enable({ apis: ['setInterval', 'setTimeout'] });
    hub = new LiveHub();
    clock = new ManualClock(START);
  });
  afterEach(async () => {
    mock.timers.reset();
    await hub.close();
  });

  it('writes a heartbeat at once and every interval, none while the transport is full', () => {
    const streams = new LiveStreams({ hub, tokens: notRevoked, clock, heartbeatIntervalMs: 1000, streamName: 'test' });
    const { transport, record } = recordingTransport();
    streams.open(claimsOf('c1'), transport, () => {});
    assert.equal(record.heartbeats, 1);
    mock.timers.tick(3000);
    assert.equal(record.heartbeats, 4);
    record.full = true;
    mock.timers.tick(2000);
    assert.equal(record.heartbeats, 4, 'a client that is behind needs no keep-alive');
  });

  it('counts the streams of every LiveStreams on one hub against one per-customer cap', async () => {
    const grpcLike = new LiveStreams({ hub, tokens: notRevoked, clock, maxStreamsPerCustomer: 2, streamName: 'a' });
    const sseLike = new LiveStreams({ hub, tokens: notRevoked, clock, maxStreamsPerCustomer: 2, streamName: 'b' });
    const first = grpcLike.open(claimsOf('c1'), recordingTransport().transport, () => {});
    sseLike.open(claimsOf('c1'), recordingTransport().transport, () => {});
    // Counted from the open on, before the hub listens to the customer: a burst of opens is capped too.
    for (const streams of [grpcLike, sseLike])
      assert.throws(() => streams.admit(claimsOf('c1')), (error: unknown) => isTrailwireError(error) && error.code === 'rate_limited');
    await subscribed();
    for (const streams of [grpcLike, sseLike])
      assert.throws(
        () => streams.open(claimsOf('c1'), recordingTransport().transport, () => {}),
        (error: unknown) => isTrailwireError(error) && error.code === 'rate_limited' && /2 live streams/.test(error.message),
      );
    // Another customer is not affected; a stream that ends frees its slot for either transport.
    sseLike.open(claimsOf('c2'), recordingTransport().transport, () => {});
    first.clientGone();
    assert.doesNotThrow(() => sseLike.admit(claimsOf('c1')));
    // One that goes before the hub listens frees its slot once it has (and is never written to).
    const early = grpcLike.open(claimsOf('c1'), recordingTransport().transport, () => {});
    early.clientGone();
    await subscribed();
    assert.doesNotThrow(() => sseLike.admit(claimsOf('c1')));
  });

  it('serves a resume the window cannot answer now (Redis slow or away) with the reset signal and a snapshot, never an error', async () => {
    const bus = new MemoryLiveBus();
    bus.replayAfter = async () => {
      throw new Error('Command timed out');
    };
    const failing = new LiveHub({ bus, snapshot: async () => [] });
    try {
      const streams = new LiveStreams({ hub: failing, tokens: notRevoked, clock, streamName: 'test' });
      const signals: string[] = [];
      const { transport, record } = recordingTransport();
      transport.signal = (signal) => {
        signals.push(signal.kind);
        return true;
      };
      streams.open(claimsOf('c1'), transport, () => {}, { resumeAfter: '1-0' });
      for (let i = 0; i < 10 && signals.length < 2; i++) await subscribed();
      assert.deepEqual(signals, ['resume-reset', 'snapshot-end']);
      assert.deepEqual(record.ended, []);
    } finally {
      await failing.close();
      await bus.close();
    }
  });

  it('hands a snapshot whole to a transport that takes it (the same array to streams sharing it), then snapshot-end and the updates since, waiting for drain', async () => {
    const states = ['t1', 't2', 't3'].map((id) => ({ customerId: 'c1', fleet: { id: 1, name: 'F' }, trailer: { id }, ts: START, snapshot: true }) as LiveTrailerEvent);
    const sharing = new LiveHub({ clock, snapshot: async () => states });
    try {
      const streams = new LiveStreams({ hub: sharing, tokens: notRevoked, clock, heartbeatIntervalMs: 60_000, streamName: 'test' });
      // A position in the window, so that the snapshot read for one stream serves the next.
      await sharing.publish({ customerId: 'c1', fleet: { id: 1, name: 'F' }, trailer: { id: 't1' }, ts: START } as LiveTrailerEvent);
      /** A transport that takes snapshots whole and logs every write; `full` is what each write answers. */
      const wholeTransport = () => {
        const log: string[] = [];
        const taken: Array<readonly LiveTrailerEvent[]> = [];
        const record = { full: false };
        const transport: LiveStreamTransport = {
          write: (event) => (log.push(`update ${event.trailer.id}`), !record.full),
          signal: (signal) => (log.push(signal.kind), !record.full),
          writeSnapshot: (written) => (log.push(`snapshot of ${written.length}`), taken.push(written), !record.full),
          writeHeartbeat: () => void log.push('heartbeat'),
          get full() {
            return record.full;
          },
          end: (reason) => void log.push(`end ${String(reason)}`),
        };
        return { transport, log, taken, record };
      };
      const settle = async () => {
        for (let i = 0; i < 20; i++) await Promise.resolve();
      };

      // The first stream's socket is full after the snapshot: nothing more until it drains.
      const slow = wholeTransport();
      slow.record.full = true;
      const slowStream = streams.open(claimsOf('c1'), slow.transport, () => {}, { snapshot: true });
      await settle();
      assert.deepEqual(slow.log, ['heartbeat', 'snapshot of 3']);
      await sharing.publish({ customerId: 'c1', fleet: { id: 1, name: 'F' }, trailer: { id: 't2' }, ts: START + 1 } as LiveTrailerEvent);
      assert.deepEqual(slow.log, ['heartbeat', 'snapshot of 3'], 'held back while the transport is full');
      slow.record.full = false;
      slowStream.drained();
      assert.deepEqual(slow.log, ['heartbeat', 'snapshot of 3', 'snapshot-end', 'update t2']);

      // A stream opened within the sharing time gets the same array, then the update since the snapshot.
      const next = wholeTransport();
      streams.open(claimsOf('c1'), next.transport, () => {}, { snapshot: true });
      await settle();
      assert.deepEqual(next.log, ['heartbeat', 'snapshot of 3', 'snapshot-end', 'update t2']);
      assert.equal(next.taken[0], slow.taken[0], 'one snapshot, shared');
      assert.deepEqual(next.taken[0], states);

      // A transport that cannot take a snapshot whole is handed its states one by one, as before.
      const oneByOne = recordingTransport();
      const signals: string[] = [];
      oneByOne.transport.signal = (signal) => (signals.push(signal.kind), true);
      streams.open(claimsOf('c1'), oneByOne.transport, () => {}, { snapshot: true });
      await settle();
      assert.deepEqual(oneByOne.record.updates.map((event) => event.trailer.id), ['t1', 't2', 't3', 't2']);
      assert.deepEqual(signals, ['snapshot-end']);
    } finally {
      await sharing.close();
    }
  });

  it("ends a stream with invalid_token at its token's exp, and tells onFinish once", async () => {
    const streams = new LiveStreams({ hub, tokens: notRevoked, clock, heartbeatIntervalMs: 60_000, streamName: 'test' });
    const { transport, record } = recordingTransport();
    const finished: unknown[] = [];
    streams.open(claimsOf('c1', 10), transport, (reason) => finished.push(reason));
    await subscribed();
    clock.advance(10_000);
    mock.timers.tick(10_000);
    assert.equal(finished.length, 1);
    assert.equal((finished[0] as TrailwireError).code, 'invalid_token');
    assert.deepEqual(record.ended, finished);
    assert.equal(streams.size, 0);
    assert.equal(hub.subscriberCount('c1'), 0);
  });

  it('ends a stream whose token is found revoked at a heartbeat or on recheckAll', async () => {
    let revoked = false;
    const tokens = {
      assertNotRevoked: async () => {
        if (revoked) throw new TrailwireError('invalid_token', 'The key was rotated.');
      },
    };
    const streams = new LiveStreams({ hub, tokens, clock, heartbeatIntervalMs: 1000, streamName: 'test' });
    const { transport, record } = recordingTransport();
    streams.open(claimsOf('c1'), transport, () => {});
    revoked = true;
    streams.recheckAll();
    await new Promise((resolve) => setImmediate(resolve));
    assert.match(String((record.ended[0] as Error).message), /rotated/);
  });

  it('delivers only the customer\'s events, and nothing after the client went away', async () => {
    const streams = new LiveStreams({ hub, tokens: notRevoked, clock, streamName: 'test' });
    const mine = recordingTransport();
    const theirs = recordingTransport();
    const stream = streams.open(claimsOf('c1'), mine.transport, () => {});
    streams.open(claimsOf('c2'), theirs.transport, () => {});
    await subscribed();
    const event = { customerId: 'c1', fleet: { id: 1, name: 'F' }, trailer: { id: 't1' }, ts: START } as LiveTrailerEvent;
    await hub.publish(event);
    assert.deepEqual(mine.record.updates.map(withoutPosition), [event]);
    assert.deepEqual(theirs.record.updates, []);
    stream.clientGone();
    await hub.publish(event);
    assert.equal(mine.record.updates.length, 1);
    assert.deepEqual(mine.record.ended, [], 'a client that left is not written an end');
  });

  it('endAll ends every stream with unavailable and refuses new ones from then on', () => {
    const streams = new LiveStreams({ hub, tokens: notRevoked, clock, streamName: 'test' });
    const { transport, record } = recordingTransport();
    streams.open(claimsOf('c1'), transport, () => {});
    streams.endAll();
    assert.equal((record.ended[0] as TrailwireError).code, 'unavailable');
    assert.equal(streams.closing?.code, 'unavailable');
    assert.throws(() => streams.admit(claimsOf('c3')), (error: unknown) => isTrailwireError(error) && error.code === 'unavailable');
  });

  it('refuses bad settings, naming them', () => {
    assert.throws(() => new LiveStreams({ hub, tokens: notRevoked, clock, heartbeatIntervalMs: 0, streamName: 'x' }), /heartbeatIntervalMs/);
    assert.throws(() => new LiveStreams({ hub, tokens: notRevoked, clock, maxStreamsPerCustomer: 1.5, streamName: 'x' }), /maxStreamsPerCustomer/);
  });
});

/** An event as published, before the bus's replay window gave it a position. */
function withoutPosition({ position: _position, ...event }: LiveTrailerEvent): LiveTrailerEvent {
  return event;
}
