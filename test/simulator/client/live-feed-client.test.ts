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
import { ManualClock, systemClock } from '../../../core/clock.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { customerWithToken, startTestApp } from '../../support/test-app.ts';

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

  /** Resolves when `predicate` holds, polling; fails after `ms`. */
  async function until(predicate: () => boolean, ms = 3000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

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
      await until(() => heartbeats >= 2);
      await publish('1HGCM82633A004352', 1_767_268_800_123);
      await until(() => updates.length === 1);
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
      await until(() => heartbeats >= 1);
      await client.rotateKey();
      customer.apiKey = client.currentApiKey;
      await until(() => disconnects.length === 1);
      assert.deepEqual(disconnects, ['16:true']); // UNAUTHENTICATED, and it connects again
      const before = heartbeats;
      await until(() => subscription.connected && heartbeats > before);
      await publish('1HGCM82633A004352', 1_767_268_900_000);
      await until(() => updates.length === 1);
      assert.equal(subscription.reconnects, 1);
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
      await until(() => gaveUp !== undefined);
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
        await new Promise((resolve) => setTimeout(resolve, 300));
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
