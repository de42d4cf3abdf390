/**
 * The conformance suite of a live-update transport (the gRPC LiveFeed, the Server-Sent Events
 * route): what a client of either relies on, asserted once over a real server and a real client of
 * each (contract 8 and 12, issue 32). Snapshot first and complete before any live update; resume
 * after the last position seen receiving every missed update in order exactly once; a position
 * outside the window answered with the reset signal and a snapshot; filters; heartbeats (on mocked
 * interval timers, not sleeps); the end at the token's expiry (on the injected clock); the
 * per-customer cap; tenant scoping. A transport test file calls `runLiveStreamConformance` with a
 * harness that starts its server and reads its wire into `LiveStreamMessage`s.
 *
 * Updates are published straight into the hub (the intake's path is tested elsewhere) while the
 * test's manual clock advances, so "500 updates/s for 5 s" is 2,500 updates 2 ms apart on the clock
 * the replay window ages by, not five seconds of waiting.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it, mock } from 'node:test';
import type { ManualClock } from '../../core/clock.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { LiveSnapshotSource } from '../../core/live-snapshot.ts';
import type { LiveStreamRequest } from '../../core/live-streams.ts';
import type { LimitSettings } from '../../core/trailwire.ts';
import { until } from '../support/until.ts';
import type { Fleet, Trailer } from '../../core/model.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { storeLiveSnapshot } from '../../core/live-snapshot.ts';
import type { FleetReadStore } from '../../core/store.ts';
import { uniqueVin } from '../support/fixtures.ts';

/** One message of a stream, whatever the wire. */
export interface LiveStreamMessage {
  kind: 'heartbeat' | 'update' | 'snapshot' | 'snapshot-end' | 'resume-reset';
  position?: string;
  trailerId?: string;
  fleetId?: number;
}

/** How a stream ended: the core's error code, or null when the server ended it without one. */
export type LiveStreamEnd = { code: string } | null;

export interface LiveStreamClient {
  readonly messages: LiveStreamMessage[];
  /** Resolves when the stream ends (or was refused). */
  readonly ended: Promise<LiveStreamEnd>;
  /** Resolves once `predicate` holds over the messages; fails after `ms` naming what arrived. */
  until(predicate: (messages: LiveStreamMessage[]) => boolean, ms?: number): Promise<void>;
  close(): void;
}

export interface LiveStreamServer {
  trailwire: Trailwire;
  store: FleetReadStore;
  clock: ManualClock;
  subscribe(token: string, request?: LiveStreamRequest): Promise<LiveStreamClient>;
  close(): Promise<void>;
}

export interface LiveStreamHarness {
  name: string;
  /**
   * What the wire answers a resume position that is not one: `refused` (validation_failed), or
   * `reset` where the position comes from a header a browser sets by itself (SSE's Last-Event-ID:
   * a 400 would be retried forever, so it is resumed as a position no window holds). Default `refused`.
   */
  invalidPosition?: 'refused' | 'reset';
  /**
   * Starts the transport over a fresh core on a manual clock, with these stream settings, the hub's
   * snapshot source (`LiveHubOptions.snapshot`) and the core's `limits` (the live connect limits),
   * which the transport counts connects against (`Trailwire.liveConnectLimits`).
   */
  start(settings: { heartbeatIntervalMs: number; maxStreamsPerCustomer: number; snapshot: LiveSnapshotSource; limits: Partial<LimitSettings> }): Promise<LiveStreamServer>;
}

const HEARTBEAT_MS = 10_000;
const MAX_STREAMS = 3;
/** Streams a customer may open a minute here; no case but the connect limit's opens more. */
const MAX_CONNECTS = 6;
const LIMITS: Partial<LimitSettings> = {
  liveConnect: { requests: MAX_CONNECTS, windowSeconds: 60 },
  liveConnectPerAddress: { requests: 1_000_000, windowSeconds: 60 },
};

/** Registers the suite with `node:test`. */
export function runLiveStreamConformance(harness: LiveStreamHarness): void {
  describe(`live stream conformance: ${harness.name}`, () => {
    let server: LiveStreamServer;
    /** The 10,000-trailer snapshot case's source: synthetic, and it lets the test publish while it is read. */
    let bigSnapshot: { customerId: string; reading: Promise<void>; release: () => void } | null = null;

    before(async () => {
      server = await harness.start({
        heartbeatIntervalMs: HEARTBEAT_MS,
        maxStreamsPerCustomer: MAX_STREAMS,
        limits: LIMITS,
        snapshot: async (customerId, filter) => {
          const big = bigSnapshot;
          if (big?.customerId !== customerId) return storeSnapshot(customerId, filter);
          big.release();
          await big.reading;
          return Array.from({ length: 10_000 }, (_, i) => ({ ...eventOf(customerId, SYNTHETIC_FLEET, syntheticTrailer(i)), snapshot: true as const }));
        },
      });
    });
    const clients: LiveStreamClient[] = [];
    after(async () => {
      for (const client of clients) client.close();
      await server.close();
    });

    /** A stream, once open: its first message (the heartbeat sent at once) has arrived, so it hears what is published from now on. */
    async function open(token: string, request?: LiveStreamRequest): Promise<LiveStreamClient> {
      const stream = await subscribe(token, request);
      await stream.until((messages) => messages.length > 0);
      return stream;
    }
    /** A stream as asked for, possibly refused. */
    async function subscribe(token: string, request?: LiveStreamRequest): Promise<LiveStreamClient> {
      const stream = await server.subscribe(token, request);
      clients.push(stream);
      return stream;
    }

    // The store's, as the core wires it, with a small page so that a few trailers exercise paging.
    const storeSnapshot: LiveSnapshotSource = (customerId, filter) => storeLiveSnapshot(server.store, server.clock, { pageSize: 2 })(customerId, filter);

    async function customer(trailers = 3) {
      const { principal } = await server.trailwire.auth.createCustomer({ name: `Customer ${Math.random()}` });
      const token = server.trailwire.tokens.mint(principal).accessToken;
      const fleet = await server.trailwire.admin.createFleet({ customerId: principal.id, name: 'Fleet' });
      const registered: Trailer[] = [];
      for (let i = 0; i < trailers; i++) registered.push(await server.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() }));
      return { id: principal.id, token, fleet, trailers: registered };
    }

    /** Publishes one update of `trailer` per call, 2 ms apart on the clock (500 updates/s); answers what the hub gave the event. */
    async function publisher(customerId: string, fleet: Pick<Fleet, 'id' | 'name'>) {
      const published: LiveTrailerEvent[] = [];
      // What the bus delivered, positions included: the reference the streams are held to.
      const sink = {
        write: (event: LiveTrailerEvent) => {
          published.push(event);
          return true;
        },
        end: () => {},
      };
      const subscription = await server.trailwire.live.subscribe(customerId, sink);
      const stop = () => subscription.unsubscribe();
      return {
        published,
        stop,
        async publish(trailer: Trailer) {
          server.clock.advance(2);
          await server.trailwire.live.publish(eventOf(customerId, fleet, trailer));
        },
      };
    }

    it('resumes after the last position seen: every missed update, in order, exactly once, then the live ones', async () => {
      // Every update is of another trailer: a client that falls behind live is sent each trailer's
      // newest state (core/live-hub.ts), which would merge two updates of one trailer; the replay
      // itself is never merged, and this case counts every update.
      const c = await customer(0);
      const feed = await publisher(c.id, SYNTHETIC_FLEET);
      let n = 0;
      const next = () => syntheticTrailer(n++);
      const first = await open(c.token);
      for (let i = 0; i < 50; i++) await feed.publish(next());
      await first.until((m) => updates(m).length === 50);
      const seen = updates(first.messages);
      const last = seen.at(-1)!.position!;
      first.close();
      // Disconnected for 5 s at 500 updates/s.
      for (let i = 0; i < 2_500; i++) await feed.publish(next());
      const resumed = await open(c.token, { resumeAfter: last });
      // Live updates keep flowing while the replay is read and written.
      for (let i = 0; i < 100; i++) await feed.publish(next());
      const expected = feed.published.slice(50).map((event) => event.position);
      await resumed.until((m) => updates(m).length >= expected.length, 10_000);
      assert.deepEqual(
        updates(resumed.messages).map((message) => message.position),
        expected,
      );
      assert.equal(resumed.messages.some((message) => message.kind === 'resume-reset' || message.kind === 'snapshot'), false);
      resumed.close();
      feed.stop();
    });

    it('answers a position outside the window with the reset signal, then a snapshot, then live updates', async () => {
      const c = await customer(3);
      const feed = await publisher(c.id, c.fleet);
      const stream = await open(c.token, { resumeAfter: '1-0' });
      await stream.until((m) => m.some((message) => message.kind === 'snapshot-end'));
      await feed.publish(c.trailers[0]!);
      await stream.until((m) => updates(m).length === 1);
      const kinds = stream.messages.filter((m) => m.kind !== 'heartbeat').map((m) => m.kind);
      assert.deepEqual(kinds, ['resume-reset', 'snapshot', 'snapshot', 'snapshot', 'snapshot-end', 'update']);
      assert.deepEqual(new Set(stream.messages.filter((m) => m.kind === 'snapshot').map((m) => m.trailerId)), new Set(c.trailers.map((t) => t.id)));
      stream.close();
      feed.stop();
    });

    it('sends a snapshot of 10,000 trailers complete before the first live update, with nothing published meanwhile lost', async () => {
      const c = await customer(1);
      let release!: () => void;
      let started!: () => void;
      const snapshotStarted = new Promise<void>((resolve) => (started = resolve));
      bigSnapshot = { customerId: c.id, reading: new Promise<void>((resolve) => (release = resolve)), release: () => started() };
      const feed = await publisher(c.id, SYNTHETIC_FLEET);
      await feed.publish(syntheticTrailer(1)); // before: the snapshot covers it
      const stream = await open(c.token, { snapshot: true });
      await snapshotStarted;
      // Published while the snapshot is being read: must follow it, not be lost.
      await feed.publish(syntheticTrailer(7));
      release();
      await stream.until((m) => updates(m).length === 1, 20_000);
      bigSnapshot = null;
      const kinds = stream.messages.filter((m) => m.kind !== 'heartbeat').map((m) => m.kind);
      assert.equal(kinds.filter((kind) => kind === 'snapshot').length, 10_000);
      assert.deepEqual(kinds.slice(-2), ['snapshot-end', 'update']);
      assert.equal(new Set(stream.messages.filter((m) => m.kind === 'snapshot').map((m) => m.trailerId)).size, 10_000);
      // The snapshot's end carries the position it covers: resume after it to miss nothing since.
      assert.equal(stream.messages.find((m) => m.kind === 'snapshot-end')?.position, feed.published[0]!.position);
      stream.close();
      feed.stop();
    });

    it('filters by fleet or trailer, live and in the snapshot', async () => {
      const c = await customer(2);
      const other = await server.trailwire.admin.createFleet({ customerId: c.id, name: 'Other' });
      const elsewhere = await server.trailwire.admin.registerTrailer({ fleetId: other.id, vin: uniqueVin() });
      const byFleet = await open(c.token, { snapshot: true, filter: { fleetIds: [other.id] } });
      const byTrailer = await open(c.token, { filter: { trailerIds: [c.trailers[1]!.id] } });
      await byFleet.until((m) => m.some((message) => message.kind === 'snapshot-end'));
      const feed = await publisher(c.id, c.fleet);
      await feed.publish(c.trailers[0]!);
      await feed.publish(c.trailers[1]!);
      server.clock.advance(2);
      await server.trailwire.live.publish(eventOf(c.id, other, elsewhere));
      await byFleet.until((m) => updates(m).length === 1);
      await byTrailer.until((m) => updates(m).length === 1);
      assert.deepEqual(byFleet.messages.filter((m) => m.kind === 'snapshot').map((m) => m.trailerId), [elsewhere.id]);
      assert.deepEqual(updates(byFleet.messages).map((m) => m.trailerId), [elsewhere.id]);
      assert.deepEqual(updates(byTrailer.messages).map((m) => m.trailerId), [c.trailers[1]!.id]);
      byFleet.close();
      byTrailer.close();
      feed.stop();
    });

    it("scopes a stream to its customer's trailers", async () => {
      const a = await customer(1);
      const b = await customer(1);
      const streamB = await open(b.token, { snapshot: true });
      await streamB.until((m) => m.some((message) => message.kind === 'snapshot-end'));
      await (await publisher(a.id, a.fleet)).publish(a.trailers[0]!);
      // B's own update arrives after A's was published: had A's reached B, it would be first.
      await (await publisher(b.id, b.fleet)).publish(b.trailers[0]!);
      await streamB.until((m) => updates(m).length >= 1);
      assert.deepEqual(
        streamB.messages.filter((m) => m.kind === 'update' || m.kind === 'snapshot').map((m) => m.trailerId),
        [b.trailers[0]!.id, b.trailers[0]!.id],
      );
      streamB.close();
    });

    it('refuses the stream past the per-customer cap with rate_limited', async () => {
      const c = await customer(0);
      const streams = [];
      for (let i = 0; i < MAX_STREAMS; i++) streams.push(await open(c.token));
      const refused = await subscribe(c.token);
      assert.deepEqual(await refused.ended, { code: 'rate_limited' });
      for (const stream of streams) stream.close();
    });

    it('refuses a customer\'s connects past the connect limit with rate_limited, before any snapshot is read', async () => {
      const c = await customer(1);
      // One at a time, each closed before the next: the cap of open streams is never reached.
      for (let i = 0; i < MAX_CONNECTS; i++) {
        const stream = await open(c.token);
        stream.close();
        await until(() => server.trailwire.live.subscriberCount(c.id) === 0, 'the closed stream to leave the hub');
      }
      const refused = await subscribe(c.token, { snapshot: true });
      const opened = refused.until((m) => m.length > 0, 10_000).then(() => 'opened, not refused');
      assert.deepEqual(await Promise.race([refused.ended, opened]), { code: 'rate_limited' });
      assert.equal(refused.messages.length, 0, 'refused before the stream started');
      // Another customer is not held back.
      const other = await customer(0);
      const stream = await open(other.token);
      stream.close();
    });

    it('refuses a resume position that is not one, or resets it where the wire says so', async () => {
      const c = await customer(0);
      const stream = await subscribe(c.token, { resumeAfter: 'yesterday' });
      if ((harness.invalidPosition ?? 'refused') === 'refused') assert.deepEqual(await stream.ended, { code: 'validation_failed' });
      else {
        await stream.until((m) => m.some((message) => message.kind === 'snapshot-end'));
        assert.deepEqual(stream.messages.filter((m) => m.kind !== 'heartbeat').map((m) => m.kind), ['resume-reset', 'snapshot-end']);
      }
    });
  });

  // Heartbeats and expiry run on mocked interval timers, with a server of their own: a server's
  // connections made while the timers are mocked are not shared with the cases above.
  describe(`live stream conformance: ${harness.name}, on mocked timers`, () => {
    let server: LiveStreamServer;
    const clients: LiveStreamClient[] = [];
    before(async () => {
      server = await harness.start({ heartbeatIntervalMs: HEARTBEAT_MS, maxStreamsPerCustomer: MAX_STREAMS, snapshot: async () => [], limits: LIMITS });
      // One mocked session for the whole block (re-enabling after a reset loses ticks on Node 20).
      mock.timers.enable({ apis: ['setInterval'] });
    });
    after(async () => {
      mock.timers.reset();
      for (const client of clients) client.close();
      await server.close();
    });
    async function open(token: string): Promise<LiveStreamClient> {
      const stream = await server.subscribe(token);
      clients.push(stream);
      await stream.until((messages) => messages.length > 0);
      return stream;
    }
    async function customer() {
      const { principal } = await server.trailwire.auth.createCustomer({ name: `Customer ${Math.random()}` });
      const fleet = await server.trailwire.admin.createFleet({ customerId: principal.id, name: 'Fleet' });
      const trailer = await server.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() });
      return { id: principal.id, token: server.trailwire.tokens.mint(principal).accessToken, fleet, trailers: [trailer] };
    }

    it('sends a heartbeat at once and one every interval, carrying its own position', async () => {
      const c = await customer();
      {
        const stream = await open(c.token);
        await stream.until((m) => m.filter((message) => message.kind === 'heartbeat').length === 1);
        server.clock.advance(2);
        await server.trailwire.live.publish(eventOf(c.id, c.fleet, c.trailers[0]!));
        await stream.until((m) => updates(m).length === 1);
        mock.timers.tick(HEARTBEAT_MS);
        await stream.until((m) => m.filter((message) => message.kind === 'heartbeat').length === 2);
        mock.timers.tick(HEARTBEAT_MS);
        await stream.until((m) => m.filter((message) => message.kind === 'heartbeat').length === 3);
        assert.equal(stream.messages.at(-1)!.position, updates(stream.messages)[0]!.position);
        stream.close();
      }
    });

    it("carries the stream's own position in heartbeats, never another tenant's", async () => {
      const quiet = await customer();
      const busy = await customer();
      const stream = await open(quiet.token);
      server.clock.advance(2);
      await server.trailwire.live.publish(eventOf(quiet.id, quiet.fleet, quiet.trailers[0]!));
      await stream.until((m) => updates(m).length === 1);
      const own = updates(stream.messages)[0]!.position;
      for (let i = 0; i < 3; i++) {
        server.clock.advance(2);
        await server.trailwire.live.publish(eventOf(busy.id, busy.fleet, busy.trailers[0]!));
      }
      assert.notEqual(await server.trailwire.live.newestPosition(), own, "the other tenant's updates moved the system's position");
      mock.timers.tick(HEARTBEAT_MS);
      await stream.until((m) => m.filter((message) => message.kind === 'heartbeat').length === 2);
      assert.equal(stream.messages.at(-1)!.position, own);
      // A stream that was sent nothing yet has no position to tell.
      const fresh = await open(quiet.token);
      assert.equal(fresh.messages[0]!.kind, 'heartbeat');
      assert.equal(fresh.messages[0]!.position, undefined);
      stream.close();
      fresh.close();
    });

    it('ends the stream when its token expires, with invalid_token', async () => {
      const c = await customer();
      const stream = await open(c.token);
      server.clock.advance(24 * 3600 * 1000);
      // The heartbeat's check sees the expiry on the injected clock.
      mock.timers.tick(HEARTBEAT_MS);
      assert.deepEqual(await stream.ended, { code: 'invalid_token' });
    });

  });
}

const updates = (messages: LiveStreamMessage[]) => messages.filter((message) => message.kind === 'update');

const SYNTHETIC_FLEET = { id: 999_999, name: 'Synthetic' };

function syntheticTrailer(i: number): Trailer {
  return {
    id: `synthetic-${i}`,
    fleetId: SYNTHETIC_FLEET.id,
    unitId: null,
    vin: '1BNLF0000A0000000',
    active: true,
    statusName: 'OK',
    statusDate: 0,
    faultedDevices: 0,
    warningDevices: 0,
    telemetry: null,
    createdAt: 0,
  };
}

function eventOf(customerId: string, fleet: Pick<Fleet, 'id' | 'name'>, trailer: Trailer): LiveTrailerEvent {
  return { customerId, fleet: { id: fleet.id, name: fleet.name }, trailer, ts: 0 };
}
