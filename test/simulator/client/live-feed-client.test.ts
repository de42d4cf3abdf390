import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { startGrpcServer } from '../../../adapters/grpc/grpc-server.ts';
import { startServer, type RunningServer } from '../../../adapters/server/index.ts';
import { TrailwireClient } from '../../../simulator/client/http-client.ts';
import { subscribeLiveFeed, subscribeWithClient, type LiveUpdate } from '../../../simulator/client/live-feed-client.ts';
import { encodeLiveUpdateResponse, liveFeedServiceDefinition } from '../../../adapters/grpc/proto.ts';
import { liveUpdateResponseOf } from '../../../adapters/grpc/live-feed-service.ts';
import { ManualClock, systemClock } from '../../../core/clock.ts';
import { TrailwireError } from '../../../core/errors.ts';
import { sampleEvent } from '../../conformance/live-bus.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { customerWithToken, startTestApp } from '../../support/test-app.ts';
import { until } from '../../support/until.ts';

describe('LiveFeed client', () => {
  let server: RunningServer;
  let dir: string;
  let customer: { id: string; apiKey: string };
  let fleet: { id: number; name: string };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-livefeed-client-'));
    server = await startServer({ db: join(dir, 'tw.db'), port: 0, grpcPort: 0, host: '127.0.0.1', heartbeatIntervalMs: 100, logger: pino({ level: 'silent' }) });
    const created = await server.trailwire.auth.createCustomer({ name: 'Live Co' });
    customer = { id: created.principal.id, apiKey: created.apiKey };
    const made = await server.trailwire.admin.createFleet({ customerId: customer.id, name: 'Reefers' });
    fleet = { id: made.id, name: made.name };
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const target = () => `127.0.0.1:${server.grpcPort}`;

  function publish(vin: string, ts: number) {
    return server.trailwire.live.publish({
      customerId: customer.id,
      fleet,
      ts,
      trailer: {
        id: `trailer-${vin}`, fleetId: fleet.id, unitId: null, vin, active: true, statusName: 'Warning', statusDate: ts - 1000,
        faultedDevices: 0, warningDevices: 2, telemetry: { timestamp: ts - 5, lat: 41.5, long: -87.25, speed: 55.5, heading: 'NE' },
      } as never,
    });
  }

  it('delivers heartbeats and updates in the read API shape', async () => {
    const client = new TrailwireClient({ baseUrl: server.url, audience: 'customers', apiKey: customer.apiKey });
    const updates: LiveUpdate[] = [];
    let heartbeats = 0;
    const subscription = subscribeWithClient(client, { target: target() }, { onUpdate: (u) => updates.push(u), onHeartbeat: () => heartbeats++ });
    try {
      await until(() => heartbeats >= 2, 'two heartbeats');
      await publish('1HGCM82633A004352', 1_767_268_800_123);
      await until(() => updates.length === 1, 'the update');
      assert.deepEqual(updates[0], {
        fleetId: fleet.id,
        fleetName: 'Reefers',
        ts: 1_767_268_800_123,
        trailer: {
          id: 'trailer-1HGCM82633A004352', unitId: null, vin: '1HGCM82633A004352', status: { name: 'Warning', isWarning: true, isFault: false },
          statusDate: 1_767_268_799_123, faultedDevices: 0, warningDevices: 2,
          telemetry: { timestamp: 1_767_268_800_118, lat: 41.5, long: -87.25, speed: 55.5, heading: 'NE' },
        },
      });
    } finally {
      subscription.close();
    }
  });

  it('reconnects with a fresh token after the customer key is rotated', async () => {
    const client = new TrailwireClient({ baseUrl: server.url, audience: 'customers', apiKey: customer.apiKey });
    const disconnects: string[] = [];
    let heartbeats = 0;
    const updates: LiveUpdate[] = [];
    const subscription = subscribeWithClient(
      client,
      { target: target(), reconnectBaseMs: 10, jitterMs: 10 },
      { onHeartbeat: () => heartbeats++, onUpdate: (u) => updates.push(u), onDisconnect: (d) => disconnects.push(`${d.code}:${d.willReconnect}`) },
    );
    try {
      await until(() => heartbeats >= 1, 'the first heartbeat');
      await client.rotateKey();
      customer.apiKey = client.currentApiKey;
      await until(() => disconnects.length === 1, 'the disconnection');
      assert.deepEqual(disconnects, ['16:true']); // UNAUTHENTICATED, and it connects again
      const before = heartbeats;
      await until(() => subscription.connected && heartbeats > before, 'a heartbeat of the new stream');
      await publish('1HGCM82633A004352', 1_767_268_900_000);
      await until(() => updates.length === 1, 'the update');
      assert.equal(subscription.reconnects, 1);
    } finally {
      subscription.close();
    }
  });

  it('a reconnection resumes after the last position received: what was published while away arrives, once, in order', async () => {
    const client = new TrailwireClient({ baseUrl: server.url, audience: 'customers', apiKey: customer.apiKey });
    const updates: LiveUpdate[] = [];
    let heartbeats = 0;
    const subscription = subscribeWithClient(
      client,
      { target: target(), reconnectBaseMs: 50, jitterMs: 0 },
      {
        onUpdate: (u) => updates.push(u),
        onHeartbeat: () => heartbeats++,
        // Published while no stream of the client is open: only the replay window can give them back.
        onDisconnect: () => {
          void publish('1HGCM82633A004352', 1_767_269_000_002);
          void publish('1HGCM82633A004352', 1_767_269_000_003);
        },
      },
    );
    try {
      await until(() => heartbeats >= 1, 'the first heartbeat');
      await publish('1HGCM82633A004352', 1_767_269_000_001);
      await until(() => updates.length === 1, 'the update');
      const before = subscription.position;
      assert.match(before ?? '', /^\d+-\d+$/, 'the client keeps the position of what it received');
      server.trailwire.live.endCustomer(customer.id, new TrailwireError('unavailable', 'A rolling restart.'));
      await until(() => updates.length === 3 && subscription.connected, 'the updates missed while away');
      await publish('1HGCM82633A004352', 1_767_269_000_004);
      await until(() => updates.length === 4, 'the live update after the resume');
      assert.deepEqual(updates.map((u) => u.ts), [1_767_269_000_001, 1_767_269_000_002, 1_767_269_000_003, 1_767_269_000_004]);
      assert.equal(subscription.reconnects, 1);
      assert.ok(updates.every((u) => u.snapshot === undefined), 'a resume inside the window sends no snapshot');
    } finally {
      subscription.close();
    }
  });

  it('gives up on PERMISSION_DENIED (a partner token) instead of retrying forever', async () => {
    const partner = await server.trailwire.auth.createPartner({ name: 'P', product: 'gps-basic' });
    const client = new TrailwireClient({ baseUrl: server.url, audience: 'partners', apiKey: partner.apiKey });
    let gaveUp: Error | undefined;
    const subscription = subscribeLiveFeed({ target: target(), token: () => client.accessToken(), reconnectBaseMs: 10 }, { onGiveUp: (e) => (gaveUp = e) });
    try {
      await until(() => gaveUp !== undefined, 'giving up');
      assert.match(gaveUp!.message, /PERMISSION_DENIED/);
      assert.equal(subscription.reconnects, 0);
    } finally {
      subscription.close();
    }
  });
});

/** A clock a fixed time behind the real one: its tokens expire `lifeMs` of real time after minting. */
class ShortTokenClock extends ManualClock {
  constructor(private readonly lifeMs: number) {
    super();
  }
  override now(): number {
    return Date.now() - (1_800_000 - this.lifeMs);
  }
}

describe('LiveFeed client: a stream lives no longer than its token', () => {
  it('renews ahead of exp with a fresh token, make before break: every update arrives, no disconnect', { timeout: 30_000 }, async () => {
    // Tokens live ~3 s of real time; the server ends each stream at its `exp` on the real clock.
    const app = await startTestApp({ clock: new ShortTokenClock(3_000) });
    const grpcServer = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: 100, clock: systemClock });
    try {
      const customer = await customerWithToken(app, 'Renewing Co');
      const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'F' });
      const trailer = await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() });
      const client = new TrailwireClient({ baseUrl: app.url, audience: 'customers', apiKey: customer.apiKey });
      const received = new Set<number>();
      const disconnects: number[] = [];
      let heartbeats = 0;
      const subscription = subscribeWithClient(
        client,
        { target: `127.0.0.1:${grpcServer.port}`, renewBeforeMs: 1_000 },
        { onUpdate: (update) => received.add(update.ts), onHeartbeat: () => heartbeats++, onDisconnect: (d) => disconnects.push(d.code) },
      );
      try {
        const deadline = Date.now() + 10_000;
        while (heartbeats === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        const published: number[] = [];
        // 8 s of updates, one every 40 ms: spans at least two token lifetimes.
        const stopAt = Date.now() + 8_000;
        for (let ts = 1_000; Date.now() < stopAt; ts++) {
          await app.trailwire.live.publish({ customerId: customer.id, fleet: { id: fleet.id, name: fleet.name }, trailer, ts });
          published.push(ts);
          await new Promise((resolve) => setTimeout(resolve, 40));
        }
        // The last updates are in flight: wait for them (a lost one is reported by the assertion below).
        await until(() => published.every((ts) => received.has(ts)), 'every published update to arrive', 5_000).catch(() => {});
        assert.ok(subscription.renewals >= 2, `renewed ${subscription.renewals} times`);
        assert.deepEqual(disconnects, [], 'no stream ended under the subscriber');
        assert.deepEqual(published.filter((ts) => !received.has(ts)), [], 'no update was lost');
      } finally {
        subscription.close();
      }
    } finally {
      await grpcServer.shutdown();
      await app.close();
    }
  });

  it('the renewal resumes after the last position: an update still in flight on the old stream at the switch is not lost, and none arrives twice', async () => {
    // A LiveFeed of the test's own, scripting what each stream carries. The first stream sends
    // update 5-0, then 6-0 is published — but the switch cancels the first stream before 6-0 reaches
    // the client (as a loaded machine does: two streams of one connection are not ordered with each
    // other, and a cancelled call drops what is still on its way). The renewal, asked to resume
    // after 5-0, replays 5-0's successor 6-0 and, as a server would when 5-0 was the old stream's
    // last, nothing before it; it also repeats 5-0 here to show a repeat is passed over.
    const requests: Array<{ resume_after?: string }> = [];
    const server = new grpc.Server();
    const update = (n: number, position: string) => encodeLiveUpdateResponse(liveUpdateResponseOf({ ...sampleEvent(n), position }));
    server.addService(liveFeedServiceDefinition, {
      Subscribe: (call: grpc.ServerWritableStream<{ resume_after?: string }, Buffer>) => {
        requests.push(call.request);
        call.write(encodeLiveUpdateResponse({ is_heartbeat: true }));
        if (requests.length === 1) call.write(update(5, '1700000000005-0'));
        else {
          call.write(update(5, '1700000000005-0'));
          call.write(update(6, '1700000000006-0'));
        }
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    // Unsigned tokens: the scripted server reads none; the client reads only `exp`. The client's
    // clock stands 40 ms before the first token's `exp`, so it renews at once (half the life left).
    const exp = 2_000_000_000;
    const tokenOf = (expSeconds: number) => `e30.${Buffer.from(JSON.stringify({ exp: expSeconds })).toString('base64url')}.sig`;
    let minted = 0;
    const received: LiveUpdate[] = [];
    const token = async () => {
      if (minted++ === 0) return tokenOf(exp);
      // The renewal's token comes once the first stream's update is in: the switch happens after it.
      await until(() => received.length === 1, 'the first stream\'s update');
      return tokenOf(exp + 3600);
    };
    const subscription = subscribeLiveFeed({ target: `127.0.0.1:${port}`, token, now: () => exp * 1000 - 40, renewBeforeMs: 1_000 }, { onUpdate: (u) => received.push(u) });
    try {
      await until(() => received.length === 2 && subscription.renewals === 1, 'both updates and the switch to the renewal');
      assert.deepEqual(requests.map((request) => request.resume_after), [undefined, '1700000000005-0'], 'the renewal asks to resume after the last position received');
      assert.deepEqual(received.map((u) => u.ts), [5, 6], 'every update once, in order');
      assert.equal(subscription.position, '1700000000006-0');
    } finally {
      subscription.close();
      server.forceShutdown();
    }
  });

  it('without renewal, reconnects with a fresh token when the server ends the stream at exp', { timeout: 30_000 }, async () => {
    const app = await startTestApp({ clock: new ShortTokenClock(2_000) });
    const grpcServer = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, heartbeatIntervalMs: 100, clock: systemClock });
    try {
      const customer = await customerWithToken(app, 'Expiring Co');
      const client = new TrailwireClient({ baseUrl: app.url, audience: 'customers', apiKey: customer.apiKey });
      const disconnects: { code: number; details: string }[] = [];
      const subscription = subscribeWithClient(client, { target: `127.0.0.1:${grpcServer.port}`, renewBeforeMs: 0 }, { onDisconnect: (d) => disconnects.push(d) });
      try {
        const deadline = Date.now() + 15_000;
        while ((disconnects.length === 0 || !subscription.connected) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        assert.equal(disconnects[0]?.code, grpc.status.UNAUTHENTICATED);
        assert.match(disconnects[0]!.details, /expired/);
        assert.ok(subscription.connected, 'subscribed again with a fresh token');
      } finally {
        subscription.close();
      }
    } finally {
      await grpcServer.shutdown();
      await app.close();
    }
  });
});
