/**
 * The LiveFeed with a real gRPC server on an ephemeral port and a real client: heartbeats, updates
 * reaching only their customer with every field, authentication, rotation, shutdown, health, and a
 * slow subscriber that does not hold back a fast one; and the messages an event becomes on the wire
 * (`liveUpdateResponseOf`, `timestampOf`), through protobuf and back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { startGrpcServer, type RunningGrpcServer } from '../../../adapters/grpc/grpc-server.ts';
import { addLiveFeedService, HEARTBEAT_MESSAGE, liveUpdateResponseOf, peerAddress, timestampOf } from '../../../adapters/grpc/live-feed-service.ts';
import { decodeLiveUpdateResponse, encodeLiveUpdateResponse, loadTrailwireProto, PROTO_ROOT } from '../../../adapters/grpc/proto.ts';
import * as protoLoader from '@grpc/proto-loader';
import { systemClock } from '../../../core/clock.ts';
import type { LiveTrailerEvent } from '../../../core/live-bus.ts';
import type { Trailer } from '../../../core/model.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const HEARTBEAT_MS = 80;
// A client as a user would load the proto: no synthetic oneof members for `optional` fields.
const livefeed = (
  grpc.loadPackageDefinition(
    protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, longs: Number, defaults: true, includeDirs: [PROTO_ROOT] }),
  ) as any
).livefeed.v1;
const health = (grpc.loadPackageDefinition(loadTrailwireProto('grpc/health/v1/health.proto')) as any).grpc.health.v1;

interface Message {
  is_heartbeat: boolean;
  live_update?: any;
}

/** A subscription that records what arrives and how it ended. */
function subscribe(port: number, token: string | undefined) {
  // Each subscriber gets its own connection, as separate clients would: on a shared HTTP/2
  // connection a paused stream would hold the others back through connection flow control.
  const client = new livefeed.LiveFeed(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  const metadata = new grpc.Metadata();
  if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
  const call: grpc.ClientReadableStream<Message> = client.Subscribe({}, metadata);
  const messages: Array<Message & { at: number }> = [];
  const waiters: Array<() => void> = [];
  call.on('data', (message: Message) => {
    messages.push({ ...message, at: performance.now() });
    for (const wake of waiters.splice(0)) wake();
  });
  const ended = new Promise<grpc.ServiceError | null>((resolve) => {
    call.on('error', (error: grpc.ServiceError) => resolve(error));
    call.on('end', () => resolve(null));
  });
  call.on('error', () => {});
  return {
    call,
    messages,
    ended,
    updates: () => messages.filter((m) => !m.is_heartbeat),
    /** Resolves once `predicate` holds over the messages (or fails after `ms`). */
    async until(predicate: (messages: Message[]) => boolean, ms = 3000) {
      const deadline = Date.now() + ms;
      while (!predicate(messages)) {
        if (Date.now() > deadline) throw new Error(`timed out; got ${messages.length} messages`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
    },
    close() {
      call.cancel();
      client.close();
    },
  };
}

describe('LiveFeed over gRPC', () => {
  let app: TestApp;
  let server: RunningGrpcServer;

  before(async () => {
    app = await startTestApp();
    server = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: HEARTBEAT_MS });
  });
  after(async () => {
    await server.shutdown();
    await app.close();
  });

  it('sends a heartbeat at once, then one every interval', async () => {
    const customer = await customerWithToken(app, 'Heartbeat Co');
    const stream = subscribe(server.port, customer.token);
    await stream.until((messages) => messages.length >= 6);
    stream.close();
    const beats = stream.messages.filter((m) => m.is_heartbeat);
    assert.equal(beats.length, stream.messages.length, 'only heartbeats on a quiet feed');
    // From the second beat on (the first is sent at once, so its gap to the second is one interval
    // minus the connection's set-up). The mean gap says "every interval"; bounds are loose and no
    // single gap is held to a lower bound, because a loaded CI machine delays and bunches timers.
    const meanGap = (beats.at(-1)!.at - beats[1]!.at) / (beats.length - 2);
    assert.ok(meanGap > HEARTBEAT_MS * 0.5 && meanGap < HEARTBEAT_MS * 5, `mean heartbeat gap ${meanGap} ms`);
    for (let i = 2; i < beats.length; i++) {
      const gap = beats[i]!.at - beats[i - 1]!.at;
      assert.ok(gap < HEARTBEAT_MS * 10, `heartbeat gap ${gap} ms`);
    }
    assert.equal(beats[0]!.live_update, undefined);
  });

  it('sends the first heartbeat at once, not after an interval', async () => {
    // "At once" measured against a server whose interval is far longer than any connection set-up:
    // a first beat that waited for the interval would not arrive before the test's deadline.
    const slowBeats = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: 60_000 });
    try {
      const customer = await customerWithToken(app, 'Prompt Heartbeat Co');
      const stream = subscribe(slowBeats.port, customer.token);
      await stream.until((messages) => messages.length >= 1, 10_000);
      stream.close();
      assert.equal(stream.messages[0]!.is_heartbeat, true);
    } finally {
      await slowBeats.shutdown();
    }
  });

  it('delivers an intake payload to the owning customer only, with every field', async () => {
    const owner = await customerWithToken(app, 'Owner Co');
    const other = await customerWithToken(app, 'Other Co');
    const fleet = await app.trailwire.admin.createFleet({ customerId: owner.id, name: 'Reefers' });
    const vin = uniqueVin();
    const trailer = await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin, unitId: 'TR-7' });
    const partner = await partnerWithToken(app, 'gps-basic');
    const ownerStream = subscribe(server.port, owner.token);
    const otherStream = subscribe(server.port, other.token);
    await ownerStream.until((m) => m.length >= 1);
    await otherStream.until((m) => m.length >= 1);

    const accepted = await app.call('POST', `/api/v1/telemetry/intake/${vin}`, {
      token: partner.token,
      body: { timestamp: 1780315200.25, position: { latitude: 41.5, longitude: -87.25 }, speedKph: 100, bearingDeg: 200 },
    });
    assert.equal(accepted.status, 202);
    await app.trailwire.intake!.worker!.drainDue();
    await ownerStream.until(() => ownerStream.updates().length >= 1);
    const update = ownerStream.updates()[0]!.live_update;
    const processedAt = app.clock.now();
    assert.equal(update.fleet_id, fleet.id);
    assert.equal(update.fleet_name, 'Reefers');
    assert.deepEqual(update.ts, { seconds: Math.floor(processedAt / 1000), nanos: (processedAt % 1000) * 1e6 });
    const t = update.trailer;
    assert.equal(t.id, trailer.id);
    assert.equal(t.unit_id, 'TR-7');
    assert.equal(t.vin, vin);
    assert.deepEqual(t.status, { name: 'OK', is_warning: false, is_fault: false });
    assert.deepEqual(t.status_date, { seconds: Math.floor(trailer.statusDate / 1000), nanos: (trailer.statusDate % 1000) * 1e6 });
    assert.equal(t.faulted_devices, 0);
    assert.equal(t.warning_devices, 0);
    assert.deepEqual(t.telemetry, { timestamp: { seconds: 1780315200, nanos: 250_000_000 }, lat: 41.5, long: -87.25, speed: 62.1, heading: 'S' });

    await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS * 2));
    assert.equal(otherStream.updates().length, 0, 'another customer hears nothing');
    ownerStream.close();
    otherStream.close();
  });

  it('refuses a missing or invalid token with UNAUTHENTICATED and a partner token with PERMISSION_DENIED', async () => {
    const missing = subscribe(server.port, undefined);
    assert.equal((await missing.ended)?.code, grpc.status.UNAUTHENTICATED);
    const garbage = subscribe(server.port, 'not.a.token');
    assert.equal((await garbage.ended)?.code, grpc.status.UNAUTHENTICATED);
    const partner = await partnerWithToken(app, 'tpms');
    const denied = subscribe(server.port, partner.token);
    assert.equal((await denied.ended)?.code, grpc.status.PERMISSION_DENIED);
    for (const stream of [missing, garbage, denied]) {
      assert.equal(stream.messages.length, 0, 'nothing is sent before authentication');
      stream.close();
    }
  });

  it('ends the streams of a customer whose key is rotated with UNAUTHENTICATED', async () => {
    const customer = await customerWithToken(app, 'Rotating Co');
    const stream = subscribe(server.port, customer.token);
    await stream.until((m) => m.length >= 1);
    const rotated = await app.call('PUT', '/api/v1/customers/rotate', { token: customer.token });
    assert.equal(rotated.status, 200);
    const ended = await stream.ended;
    assert.equal(ended?.code, grpc.status.UNAUTHENTICATED);
    stream.close();
  });

  it('ends a stream with UNAUTHENTICATED at its token\'s exp, timed by the real clock', { timeout: 20_000 }, async (t) => {
    // A token minted 2 to 3 s before its 30-minute lifetime runs out (`exp` is in whole seconds): the
    // server's timer, on the system clock, must end the stream then (not a heartbeat or 30 minutes later).
    const expiring = await startGrpcServer({
      port: 0,
      host: '127.0.0.1',
      tokens: app.trailwire.tokens,
      hub: app.trailwire.live,
      heartbeatIntervalMs: 60_000,
      clock: systemClock,
    });
    const manual = app.clock.now();
    t.after(async () => {
      app.clock.set(manual);
      await expiring.shutdown();
    });
    app.clock.set(Date.now() - 1_797_000);
    const customer = await customerWithToken(app, 'Expiring Co');
    const opened = Date.now();
    const stream = subscribe(expiring.port, customer.token);
    await stream.until((m) => m.length >= 1);
    const ended = await stream.ended;
    const lived = Date.now() - opened;
    assert.equal(ended?.code, grpc.status.UNAUTHENTICATED);
    assert.match(ended!.details, /expired/);
    assert.ok(lived >= 1_500 && lived < 10_000, `the stream lived ${lived} ms`);
    stream.close();
  });

  it('ends a stream at its token\'s exp on the tokens\' (here manual) clock when it jumps (checked at each heartbeat)', { timeout: 20_000 }, async () => {
    const onManualClock = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: HEARTBEAT_MS });
    try {
      const customer = await customerWithToken(app, 'Clock Jump Co');
      const stream = subscribe(onManualClock.port, customer.token);
      await stream.until((m) => m.length >= 3);
      app.clock.advance(1_800_000);
      const ended = await stream.ended;
      assert.equal(ended?.code, grpc.status.UNAUTHENTICATED);
      stream.close();
    } finally {
      await onManualClock.shutdown();
    }
  });

  it('caps the streams of one customer: the next is refused RESOURCE_EXHAUSTED, others unaffected, a closed one frees its slot', { timeout: 20_000 }, async () => {
    const capped = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: 60_000, maxStreamsPerCustomer: 3 });
    const streams: ReturnType<typeof subscribe>[] = [];
    try {
      const customer = await customerWithToken(app, 'Greedy Co');
      const other = await customerWithToken(app, 'Modest Co');
      for (let i = 0; i < 3; i++) {
        streams.push(subscribe(capped.port, customer.token));
        await streams.at(-1)!.until((m) => m.length >= 1);
      }
      const refused = subscribe(capped.port, customer.token);
      streams.push(refused);
      const ended = await refused.ended;
      assert.equal(ended?.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(ended!.details, /3 live streams/);
      assert.equal(refused.messages.length, 0);
      const modest = subscribe(capped.port, other.token);
      streams.push(modest);
      await modest.until((m) => m.length >= 1);
      assert.equal(capped.liveFeed.openStreams, 4);
      streams[0]!.close();
      // The server hears of the cancel asynchronously; a slot frees once it has.
      const deadline = Date.now() + 5_000;
      while (capped.liveFeed.openStreams > 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      const again = subscribe(capped.port, customer.token);
      streams.push(again);
      await again.until((m) => m.length >= 1);
    } finally {
      for (const stream of streams) stream.close();
      await capped.shutdown();
    }
  });

  it('answers the standard health check, NOT_FOUND for a service it does not serve', async () => {
    const client = new health.Health(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    const check = (service: string) =>
      new Promise<{ status: string }>((resolve, reject) => client.Check({ service }, (error: Error | null, reply: { status: string }) => (error ? reject(error) : resolve(reply))));
    assert.equal((await check('')).status, 'SERVING');
    assert.equal((await check('livefeed.v1.LiveFeed')).status, 'SERVING');
    await assert.rejects(check('no.such.Service'), { code: grpc.status.NOT_FOUND });
    client.close();
  });

  it('can be added to an integrator\'s own grpc.Server, whose streams it ends and refuses on endAllStreams', async () => {
    const own = new grpc.Server();
    const service = addLiveFeedService(own, { tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: HEARTBEAT_MS });
    const port = await new Promise<number>((resolve, reject) =>
      own.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    try {
      const customer = await customerWithToken(app, 'Integrator Co');
      const stream = subscribe(port, customer.token);
      await stream.until((m) => m.length >= 1);
      assert.equal(service.openStreams, 1);

      service.endAllStreams();
      assert.equal((await stream.ended)?.code, grpc.status.UNAVAILABLE);
      assert.equal(service.openStreams, 0);
      const late = subscribe(port, customer.token);
      assert.equal((await late.ended)?.code, grpc.status.UNAVAILABLE, 'no new stream once ending');
      assert.equal(late.messages.length, 0);
      stream.close();
      late.close();
    } finally {
      own.forceShutdown();
    }
  });

  it('a paused subscriber does not hold back a fast one, is coalesced to one pending update per trailer, then gets the latest state of each', async () => {
    const customer = await customerWithToken(app, 'Busy Co');
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Busy' });
    const trailers: Trailer[] = [];
    for (let i = 0; i < 5; i++) trailers.push(await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() }));
    const fast = subscribe(server.port, customer.token);
    const slow = subscribe(server.port, customer.token);
    await fast.until((m) => m.length >= 1);
    await slow.until((m) => m.length >= 1);
    slow.call.pause();

    // Large updates fill the slow stream's buffers quickly: the unit id carries 16 KiB.
    const rounds = 200;
    const padding = 'x'.repeat(16 * 1024);
    let mostPending = 0;
    for (let round = 0; round < rounds; round++) {
      for (const trailer of trailers) {
        const event: LiveTrailerEvent = {
          customerId: customer.id,
          fleet: { id: fleet.id, name: 'Busy' },
          trailer: { ...trailer, unitId: `${round}:${padding}`, faultedDevices: round },
          ts: Date.now(),
        };
        await app.trailwire.live.publish(event);
      }
      mostPending = Math.max(mostPending, app.trailwire.live.stats().pendingTrailers);
      // Lets the transports flush between rounds, as they would between intake payloads.
      await new Promise((resolve) => setImmediate(resolve));
    }
    // The fast subscriber reaches the final state of every trailer while the slow one is still paused.
    const hasFinalStates = (stream: ReturnType<typeof subscribe>) => () => {
      const latest = new Map<string, number>();
      for (const message of stream.updates()) latest.set(message.live_update.trailer.id, message.live_update.trailer.faulted_devices);
      return trailers.every((trailer) => latest.get(trailer.id) === rounds - 1);
    };
    await fast.until(hasFinalStates(fast), 10_000);
    assert.equal(slow.updates().length, 0, 'the slow subscriber read nothing meanwhile');

    // Memory stays bounded: never more than one pending update per trailer per subscriber, and
    // once the fast one has caught up only the stalled one holds anything — the latest of each trailer.
    assert.ok(mostPending <= 2 * trailers.length, `at most one pending update per trailer and subscriber, saw ${mostPending}`);
    await fast.until(() => {
      const stats = app.trailwire.live.stats();
      return stats.congestedSubscribers === 1 && stats.pendingTrailers === trailers.length;
    });

    slow.call.resume();
    await slow.until(hasFinalStates(slow), 10_000);
    assert.ok(
      slow.updates().length < (rounds * trailers.length) / 4,
      `the slow subscriber got coalesced updates, not all ${rounds * trailers.length}: got ${slow.updates().length}`,
    );
    // Per trailer, each subscriber sees states in order, never an older one after a newer one.
    for (const trailer of trailers) {
      const seenFast = fast.updates().filter((m) => m.live_update.trailer.id === trailer.id).map((m) => m.live_update.trailer.faulted_devices);
      assert.deepEqual(seenFast, [...seenFast].sort((a, b) => a - b));
      const seen = slow.updates().filter((m) => m.live_update.trailer.id === trailer.id).map((m) => m.live_update.trailer.faulted_devices);
      assert.deepEqual(seen, [...seen].sort((a, b) => a - b));
    }
    assert.equal(app.trailwire.live.stats().pendingTrailers, 0);
    fast.close();
    slow.close();
  });

  it('on shutdown reports NOT_SERVING to health watchers and ends every stream with UNAVAILABLE', async () => {
    const own = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: HEARTBEAT_MS });
    const customer = await customerWithToken(app, 'Shutdown Co');
    const stream = subscribe(own.port, customer.token);
    await stream.until((m) => m.length >= 1);
    const subscribersBefore = app.trailwire.live.subscriberCount(customer.id);

    const healthClient = new health.Health(`127.0.0.1:${own.port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    const watch = healthClient.Watch({ service: 'livefeed.v1.LiveFeed' });
    const statuses: string[] = [];
    watch.on('error', () => {});
    const firstStatus = new Promise<void>((resolve) => watch.on('data', (reply: { status: string }) => (statuses.push(reply.status), resolve())));
    await firstStatus;

    await own.shutdown();
    assert.equal((await stream.ended)?.code, grpc.status.UNAVAILABLE);
    assert.deepEqual(statuses, ['SERVING', 'NOT_SERVING']);
    assert.equal(subscribersBefore, 1);
    assert.equal(app.trailwire.live.subscriberCount(customer.id), 0, 'the hub forgets the ended streams');
    stream.close();
    healthClient.close();
  });
});

describe('peerAddress', () => {
  it('is the address a connect counts against: the peer without its port', () => {
    assert.equal(peerAddress('ipv4:203.0.113.7:51234'), '203.0.113.7');
    assert.equal(peerAddress('ipv6:[2001:db8::1]:51234'), '2001:db8::1');
    assert.equal(peerAddress('unix:/run/trailwire.sock'), 'unix:/run/trailwire.sock');
  });
});

/** An event with every field set, for the message mapping. */
const event: LiveTrailerEvent = {
  customerId: 'customer-a',
  fleet: { id: 2_147_483_647, name: 'Northern reefers' },
  trailer: {
    id: '6f1c2a4e-0000-4000-8000-000000000001',
    fleetId: 2_147_483_647,
    unitId: 'TR-042',
    vin: '1M8GDM9AXKP042788',
    active: true,
    statusName: 'Faulted',
    statusDate: Date.UTC(2026, 0, 1, 10, 0, 0, 125),
    faultedDevices: 2,
    warningDevices: 1,
    telemetry: { timestamp: Date.UTC(2026, 0, 1, 11, 30), lat: 51.507351, long: -0.127758, speed: 48.47, heading: 'SW' },
    createdAt: Date.UTC(2025, 11, 1),
  },
  ts: Date.UTC(2026, 0, 1, 11, 30, 1, 999),
};

describe('timestampOf', () => {
  it('splits epoch milliseconds into seconds and nanos, keeping sub-millisecond fractions', () => {
    assert.deepEqual(timestampOf(0), { seconds: 0, nanos: 0 });
    assert.deepEqual(timestampOf(1_780_315_200_250), { seconds: 1_780_315_200, nanos: 250_000_000 });
    assert.deepEqual(timestampOf(1_780_315_200_000.5), { seconds: 1_780_315_200, nanos: 500_000 });
  });

  it('keeps nanos non-negative before 1970, as google.protobuf.Timestamp requires', () => {
    assert.deepEqual(timestampOf(-1), { seconds: -1, nanos: 999_000_000 });
    assert.deepEqual(timestampOf(-1000), { seconds: -1, nanos: 0 });
  });
});

describe('liveUpdateResponseOf', () => {
  it('maps every field of the event and its trailer', () => {
    assert.deepEqual(liveUpdateResponseOf(event), {
      is_heartbeat: false,
      live_update: {
        fleet_id: 2_147_483_647,
        fleet_name: 'Northern reefers',
        ts: { seconds: Date.UTC(2026, 0, 1, 11, 30, 1) / 1000, nanos: 999_000_000 },
        trailer: {
          id: '6f1c2a4e-0000-4000-8000-000000000001',
          unit_id: 'TR-042',
          vin: '1M8GDM9AXKP042788',
          status: { name: 'Faulted', is_warning: false, is_fault: true },
          status_date: { seconds: Date.UTC(2026, 0, 1, 10) / 1000, nanos: 125_000_000 },
          faulted_devices: 2,
          warning_devices: 1,
          telemetry: {
            timestamp: { seconds: Date.UTC(2026, 0, 1, 11, 30) / 1000, nanos: 0 },
            lat: 51.507351,
            long: -0.127758,
            speed: 48.47,
            heading: 'SW',
          },
        },
      },
    });
  });

  it('derives the status flags from the status name', () => {
    const statusOf = (statusName: 'OK' | 'Warning' | 'Faulted') =>
      liveUpdateResponseOf({ ...event, trailer: { ...event.trailer, statusName } }).live_update!.trailer.status;
    assert.deepEqual(statusOf('OK'), { name: 'OK', is_warning: false, is_fault: false });
    assert.deepEqual(statusOf('Warning'), { name: 'Warning', is_warning: true, is_fault: false });
    assert.deepEqual(statusOf('Faulted'), { name: 'Faulted', is_warning: false, is_fault: true });
  });

  it('leaves optional fields out when the trailer has no value, and they stay absent on the wire', () => {
    const bare = { ...event, trailer: { ...event.trailer, unitId: null, telemetry: null } };
    const message = liveUpdateResponseOf(bare);
    assert.equal('unit_id' in message.live_update!.trailer, false);
    assert.equal('telemetry' in message.live_update!.trailer, false);

    // Decoded as the service's own loader sees it: proto3 `optional` presence survives encoding.
    const decoded = decodeLiveUpdateResponse(encodeLiveUpdateResponse(message)) as any;
    assert.equal(decoded._live_update, 'live_update');
    assert.equal(decoded.live_update.trailer._unit_id, undefined);
    assert.equal(decoded.live_update.trailer.unit_id, undefined);
    assert.equal(decoded.live_update.trailer._telemetry, undefined);
    assert.equal(decoded.live_update.trailer._vin, 'vin');
  });

  it('round-trips through protobuf with every value intact', () => {
    const decoded = decodeLiveUpdateResponse(encodeLiveUpdateResponse(liveUpdateResponseOf(event))) as any;
    const update = decoded.live_update;
    assert.equal(decoded.is_heartbeat, false);
    assert.equal(update.fleet_id, 2_147_483_647);
    assert.equal(update.fleet_name, 'Northern reefers');
    assert.deepEqual(update.ts, { seconds: Date.UTC(2026, 0, 1, 11, 30, 1) / 1000, nanos: 999_000_000 });
    assert.equal(update.trailer.faulted_devices, 2);
    assert.equal(update.trailer.telemetry.lat, 51.507351);
    assert.equal(update.trailer.telemetry.long, -0.127758);
    assert.equal(update.trailer.telemetry.heading, 'SW');
    assert.equal(update.trailer.status.is_fault, true);
  });

  it('a heartbeat is is_heartbeat with no live_update', () => {
    const decoded = decodeLiveUpdateResponse(encodeLiveUpdateResponse(HEARTBEAT_MESSAGE)) as any;
    assert.equal(decoded.is_heartbeat, true);
    assert.equal(decoded.live_update, undefined);
    assert.equal(decoded._live_update, undefined);
  });
});
