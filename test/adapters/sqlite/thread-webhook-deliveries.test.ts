/**
 * The webhook deliverer's store calls on the SQLite processing thread (`webhook-delivery-calls.ts`):
 * through the intake's front door (`webhookDeliveryStore`) an endpoint is leased, a delivery formed
 * from its outbox, settled and released, the thread's connection doing the writes; and while another
 * connection holds the file's write lock, a call waits for it on the thread — the serving thread's
 * event loop keeps turning — and completes once the lock goes; while the thread restarts after it
 * died, calls fail as a store that is down does.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteIntake, openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { until } from '../../support/until.ts';

it("runs the deliverer's store calls on the processing thread, where a held write lock is waited for off the serving thread", { timeout: 30_000 }, async () => {
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-thread-hooks-'));
  const file = join(directory, 'hooks.db');
  const store = await openSqliteStore({ file });
  const intake = openSqliteIntake({ store });
  await intake.start();
  try {
    const deliveries = intake.webhookDeliveryStore!;
    const now = Date.now();
    const customer = await store.createCustomer({ id: 'customer-1', name: 'Acme', keyHash: 'h', createdAt: now });
    const fleet = await store.createFleet({ customerId: customer.id, name: 'North', createdAt: now });
    const vin = withCheckDigit('1HWKT000000000001');
    await store.createTrailer({ id: 'trailer-1', fleetId: fleet.id, vin, unitId: 'T-1', createdAt: now });
    await store.webhooks.createWebhookEndpoint({ id: 'hook-1', customerId: customer.id, url: 'https://hooks.example.com/x', events: ['trailer.updated'], fleetIds: null, secret: 'whsec_x', createdAt: now }, 10);
    await store.applyTelemetry({ vin, at: now, telemetry: { gps: [{ timestamp: now - 1000, lat: 41, long: -87, speed: 50, heading: 'N' }], devices: [], cargosafe: [] } });

    const batching = { maxEvents: 100, lingerMs: 0 };
    const claimed = await deliveries.claimWebhookEndpoints('owner-1', now, 60_000, 10, batching);
    assert.deepEqual(claimed.map((target) => [target.id, target.url]), [['hook-1', 'https://hooks.example.com/x']]);
    assert.deepEqual(await store.webhooks.claimWebhookEndpoints('owner-2', now, 60_000, 10, batching), [], 'leased by the thread\'s write, seen by the main connection');
    const send = (await deliveries.takeWebhookDelivery('hook-1', now, { ...batching, newId: () => 'msg_1' }))!;
    assert.equal(send.id, 'msg_1', "the caller's id");
    assert.deepEqual((JSON.parse(send.body) as { events: Array<{ data: { vin: string } }> }).events.map((event) => event.data.vin), [vin]);

    // Another connection holds the write lock: the settle waits for it on the thread, not here.
    const holder = new Database(file);
    holder.exec('BEGIN IMMEDIATE');
    let settled = false;
    const settling = deliveries.settleWebhookDelivery('hook-1', 'msg_1', { kind: 'delivered', at: now + 5, status: 204 }).then(() => (settled = true));
    const turned = await new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 100));
    assert.equal(turned, true, "this thread's timers fire while the write waits");
    assert.equal(settled, false, 'the settle waits for the lock');
    holder.exec('COMMIT');
    holder.close();
    await settling;
    await deliveries.releaseWebhookEndpoint('hook-1', 'owner-1');
    const [delivery] = await store.webhooks.listWebhookDeliveries(customer.id, 'hook-1', { limit: 10 });
    assert.deepEqual([delivery!.id, delivery!.state, delivery!.attempts, delivery!.deliveredAt], ['msg_1', 'delivered', 1, now + 5]);
    assert.equal((await store.webhooks.claimWebhookEndpoints('owner-2', now + 10, 60_000, 10, batching)).length, 0, 'released, with nothing left to send');
    assert.equal(await deliveries.purgeWebhookDeliveries(now + 6, 10), 1);

    // A thread that died: its calls fail as a store that is down does (the deliverer takes the work
    // again), until the restarted thread answers them.
    await intake.killThread();
    await assert.rejects(deliveries.claimWebhookEndpoints('owner-1', now, 60_000, 10, batching), /not running/);
    await until(() => deliveries.claimWebhookEndpoints('owner-1', now + 10, 60_000, 10, batching).then(() => true, () => false), 'the restarted thread', 15_000, 100);
  } finally {
    await intake.stop();
    await store.close();
    rmSync(directory, { recursive: true, force: true });
  }
});
