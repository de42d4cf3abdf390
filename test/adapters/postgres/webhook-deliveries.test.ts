/**
 * Webhooks on a shared PostgreSQL (contract 14, issue 40): two stores on one schema — two processes,
 * in effect, each with its own pool and its own deliverer — deliver the outbox together, and every
 * delivery is sent by one of them: no `webhook-id` reaches a receiver twice, every event arrives
 * once, each trailer's in order. And a process trusts what it read of whether any endpoint exists
 * for `ENDPOINTS_RECHECK_MS` of the store's clock, the injected one. Needs
 * `TRAILWIRE_TEST_DATABASE_URL`; the schemas are dropped at the end.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, it } from 'node:test';
import pg from 'pg';
import { openPostgresStore, type PostgresStore } from '../../../adapters/postgres/index.ts';
import { ENDPOINTS_RECHECK_MS } from '../../../adapters/postgres/webhook-tables.ts';
import { ManualClock, systemClock } from '../../../core/clock.ts';
import { WebhookDeliverer } from '../../../core/webhook-deliverer.ts';
import { WebhookSender } from '../../../core/webhook-sender.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { until } from '../../support/until.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../../support/webhook-receiver.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const schema = `tw_test_${randomBytes(6).toString('hex')}`;
const probeSchema = `tw_test_${randomBytes(6).toString('hex')}`;
const opened: PostgresStore[] = [];
const receivers: WebhookReceiver[] = [];

after(async () => {
  for (const receiver of receivers) await receiver.close();
  for (const store of opened) await store.close();
  if (DATABASE_URL === undefined) return;
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  for (const name of [schema, probeSchema]) await admin.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
  await admin.end();
});

it('two processes on one schema deliver each event once, each trailer in order', { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false, timeout: 60_000 }, async () => {
  const open = async () => {
    const store = await openPostgresStore({ connectionString: DATABASE_URL!, schema, poolSize: 4 });
    opened.push(store);
    return store;
  };
  const [first, second] = [await open(), await open()];
  const customer = await first.createCustomer({ id: randomUUID(), name: 'Acme', keyHash: randomUUID(), createdAt: Date.now() });
  const fleet = await first.createFleet({ customerId: customer.id, name: 'Reefers', createdAt: Date.now() });
  const vins = Array.from({ length: 6 }, (_, i) => withCheckDigit(`1PGWK000${String(i).padStart(9, '0')}`));
  for (const vin of vins) await first.createTrailer({ id: randomUUID(), fleetId: fleet.id, vin, unitId: null, createdAt: Date.now() });
  for (let i = 0; i < 4; i++) {
    const receiver = await startWebhookReceiver(`/hook-${i}`);
    receivers.push(receiver);
    await first.webhooks.createWebhookEndpoint({ id: randomUUID(), customerId: customer.id, url: receiver.url, events: ['trailer.updated'], fleetIds: null, secret: `whsec_${randomBytes(32).toString('base64')}`, createdAt: Date.now() }, 10);
  }

  const sender = new WebhookSender({ rules: { allowHttp: true, allowPrivate: true }, timeoutMs: 5000 });
  const deliverers = [first, second].map(
    (store, n) =>
      new WebhookDeliverer({ store: store.webhooks, sender, clock: systemClock, owner: `process-${n}`, newId: () => `msg_${randomUUID()}` }, { lingerMs: 0, maxEvents: 5, pollMs: 20 }),
  );
  const sentBy = [0, 0];
  deliverers.forEach((deliverer, n) => deliverer.onAttempt(() => sentBy[n]!++));
  for (const deliverer of deliverers) deliverer.start();

  // Both processes write too: each one's writes reach every endpoint's outbox.
  const rounds = 30;
  const t0 = Date.now() - 60_000;
  for (let round = 0; round < rounds; round++)
    await (round % 2 === 0 ? first : second).applyTelemetryBatch(
      vins.map((vin) => ({ vin, at: Date.now(), telemetry: { gps: [{ timestamp: t0 + round * 1000, lat: 41, long: -87, speed: round, heading: 'N' as const }], devices: [], cargosafe: [] } })),
    );
  const eventsOf = (receiver: WebhookReceiver) => receiver.delivered().flatMap((delivery) => JSON.parse(delivery.body).events as Array<{ data: { id: string; telemetry: { speed: number } } }>);
  await until(() => receivers.every((receiver) => eventsOf(receiver).length === rounds * vins.length), 'every event at every receiver', 30_000, 50);
  await Promise.all(deliverers.map((deliverer) => deliverer.stop()));
  sender.close();

  for (const receiver of receivers) {
    const ids = receiver.received.map((delivery) => String(delivery.headers['webhook-id']));
    assert.equal(new Set(ids).size, ids.length, 'each delivery sent once, by one process');
    const events = eventsOf(receiver);
    const byTrailer = new Map<string, typeof events>();
    for (const event of events) byTrailer.set(event.data.id, [...(byTrailer.get(event.data.id) ?? []), event]);
    assert.equal(byTrailer.size, vins.length);
    for (const trailerEvents of byTrailer.values())
      assert.deepEqual(trailerEvents.map((event) => event.data.telemetry.speed), Array.from({ length: rounds }, (_, round) => round), 'each event once, in order');
  }
  assert.ok(sentBy[0]! + sentBy[1]! === receivers.reduce((sum, receiver) => sum + receiver.received.length, 0));
});

it("a process writes no events for `ENDPOINTS_RECHECK_MS` of its store's clock after it read that no endpoint exists, and then does", { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false, timeout: 30_000 }, async () => {
  const clock = new ManualClock(Date.now());
  const writing = await openPostgresStore({ connectionString: DATABASE_URL!, schema: probeSchema, poolSize: 2, clock });
  const registering = await openPostgresStore({ connectionString: DATABASE_URL!, schema: probeSchema, poolSize: 2 });
  opened.push(writing, registering);
  const customer = await registering.createCustomer({ id: randomUUID(), name: 'Acme', keyHash: randomUUID(), createdAt: clock.now() });
  const fleet = await registering.createFleet({ customerId: customer.id, name: 'Reefers', createdAt: clock.now() });
  const vin = withCheckDigit('1PGPR000000000001');
  await registering.createTrailer({ id: randomUUID(), fleetId: fleet.id, vin, unitId: null, createdAt: clock.now() });
  const write = (second: number) =>
    writing.applyTelemetry({ vin, at: clock.now(), telemetry: { gps: [{ timestamp: clock.now() - 60_000 + second * 1000, lat: 41, long: -87, speed: second, heading: 'N' }], devices: [], cargosafe: [] } });

  await write(1);
  const endpoint = { id: randomUUID(), customerId: customer.id, url: 'https://hooks.example.com/x', events: ['trailer.updated' as const], fleetIds: null, secret: 'whsec_x', createdAt: clock.now() };
  await registering.webhooks.createWebhookEndpoint(endpoint, 10);
  await write(2);
  clock.advance(ENDPOINTS_RECHECK_MS);
  await write(3);

  const batching = { maxEvents: 100, lingerMs: 0 };
  assert.equal((await registering.webhooks.claimWebhookEndpoints('owner', Date.now() + 60_000, 60_000, 10, batching)).length, 1);
  const send = (await registering.webhooks.takeWebhookDelivery(endpoint.id, Date.now() + 60_000, { ...batching, newId: () => `msg_${randomUUID()}` }))!;
  assert.deepEqual(
    (JSON.parse(send.body).events as Array<{ data: { telemetry: { speed: number } } }>).map((event) => event.data.telemetry.speed),
    [3],
    'the write within the recheck interval made no event; the one after it did',
  );
});
