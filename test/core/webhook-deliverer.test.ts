/**
 * The deliverer's retry schedule and settings (contract 14): delays double from the first up to the
 * ceiling, each drawn between half and all of it; with the defaults about 24 hours hold a few dozen
 * attempts; a bad setting is refused naming it. Its batching, on an SQLite store with a clock that
 * never moves unless the test moves it: an idle endpoint is sent a lone event at once, events that
 * come while a delivery is in flight go together in the next (up to `maxEvents`), and `lingerMs`
 * holds an idle endpoint's lone event that long. And the address rules: which addresses are public.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { ManualClock } from '../../core/clock.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { DEFAULT_WEBHOOK_DELIVERER_OPTIONS, resolveWebhookDelivererOptions, retryDelay, WebhookDeliverer, type WebhookDelivererOptions } from '../../core/webhook-deliverer.ts';
import type { WebhookPost, WebhookPostResult } from '../../core/webhook-sender.ts';
import { isNonPublicAddress } from '../../core/webhook-address.ts';

describe('retryDelay', () => {
  it('doubles from the first delay to the ceiling, drawn between half and all of it', () => {
    assert.deepEqual([1, 2, 3, 4].map((attempt) => retryDelay(attempt, 5000, 3_600_000, 1)), [5000, 10_000, 20_000, 40_000]);
    assert.deepEqual([1, 2, 3].map((attempt) => retryDelay(attempt, 5000, 3_600_000, 0)), [2500, 5000, 10_000]);
    assert.equal(retryDelay(30, 5000, 3_600_000, 1), 3_600_000);
    assert.equal(retryDelay(1000, 5000, 3_600_000, 0.5), 2_700_000, 'no overflow far out');
  });

  it('with the defaults, the 24 hours hold a few dozen attempts, the last an hour apart', () => {
    const { retryFirstMs, retryMaxMs, retryPeriodMs } = DEFAULT_WEBHOOK_DELIVERER_OPTIONS;
    for (const random of [0, 1]) {
      let elapsed = 0;
      let attempts = 1;
      while (elapsed < retryPeriodMs) elapsed += retryDelay(attempts++, retryFirstMs, retryMaxMs, random);
      assert.ok(attempts > 20 && attempts < 60, `${attempts} attempts at jitter ${random}`);
    }
  });
});

describe('resolveWebhookDelivererOptions', () => {
  it('fills in the defaults and refuses a bad setting by name', () => {
    assert.deepEqual(resolveWebhookDelivererOptions({ lingerMs: 250 }), { ...DEFAULT_WEBHOOK_DELIVERER_OPTIONS, lingerMs: 250 });
    assert.throws(() => resolveWebhookDelivererOptions({ maxEvents: 0 }), /`maxEvents` must be a positive integer, got 0/);
    assert.throws(() => resolveWebhookDelivererOptions({ concurrency: 1.5 }), /`concurrency`/);
    assert.throws(() => resolveWebhookDelivererOptions({ maxEvents: 5000 }), /`maxEvents` must be at most 1000/);
  });
});

describe('isNonPublicAddress', () => {
  it('tells public unicast addresses from everything else', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '203.0.114.7', '2606:4700:4700::1111', '2001:4860:4860::8888']) assert.equal(isNonPublicAddress(address), false, address);
    for (const address of ['127.0.0.1', '10.0.0.1', '172.31.255.255', '192.168.0.1', '169.254.169.254', '100.100.100.200', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', '::', 'fd00:ec2::254', 'fe80::1', '::ffff:7f00:1', 'ff02::1', 'not an address'])
      assert.equal(isNonPublicAddress(address), true, address);
  });
});

const T0 = Date.UTC(2026, 5, 1);

/** A post the test answers when it chooses: the delivery's events, told by their fixes' seconds after T0. */
interface HeldPost {
  seconds: number[];
  answer(result: WebhookPostResult): void;
}

/**
 * A deliverer on an in-memory SQLite store with one customer, one trailer and one endpoint; its sender
 * holds every post until the test answers it. `write(second)` processes a GPS fix of that second (one
 * `trailer.updated` event in the outbox), stamped with the clock's time as processing stamps it.
 */
async function deliveryBench(options: WebhookDelivererOptions = {}) {
  const clock = new ManualClock(T0);
  const store = await openSqliteStore({ file: ':memory:' });
  const customer = await store.createCustomer({ id: 'customer-1', name: 'Acme', keyHash: 'h', createdAt: T0 });
  const fleet = await store.createFleet({ customerId: customer.id, name: 'North', createdAt: T0 });
  const vin = withCheckDigit('1HWKB000000000001');
  await store.createTrailer({ id: 'trailer-1', fleetId: fleet.id, vin, unitId: 'T-1', createdAt: T0 });
  await store.webhooks.createWebhookEndpoint(
    { id: 'hook-1', customerId: customer.id, url: 'https://hooks.example.com/x', events: ['trailer.updated'], fleetIds: null, secret: 'whsec_x', createdAt: T0 },
    10,
  );
  const posts: HeldPost[] = [];
  const sender = {
    post: (delivery: WebhookPost) =>
      new Promise<WebhookPostResult>((answer) => {
        const events = (JSON.parse(delivery.body) as { events: Array<{ data: { telemetry: { timestamp: string } } }> }).events;
        posts.push({ seconds: events.map((event) => (Date.parse(event.data.telemetry.timestamp) - T0) / 1000), answer });
      }),
  };
  let ids = 0;
  const deliverer = new WebhookDeliverer({ store: store.webhooks, sender, clock, owner: 'test', newId: () => `msg_${++ids}` }, options);
  const write = (second: number) =>
    store.applyTelemetry({ vin, at: clock.now(), telemetry: { gps: [{ timestamp: T0 + second * 1000, lat: 41, long: -87, speed: 50, heading: 'N' }], devices: [], cargosafe: [] } });
  /** Lets the deliverer's store calls and sends run (the store answers in microtasks and immediates) until `posts` holds `count`. */
  const postsReach = async (count: number) => {
    for (let turn = 0; turn < 1000 && posts.length < count; turn++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(posts.length, count, `${count} posts`);
  };
  return { clock, store, deliverer, posts, write, postsReach };
}

const DELIVERED: WebhookPostResult = { delivered: true, status: 204 };

describe('WebhookDeliverer batching', () => {
  it('with the defaults, sends an idle endpoint a lone event at once: no linger', async () => {
    const { store, deliverer, posts, write, postsReach } = await deliveryBench();
    await write(1);
    const draining = deliverer.drainDue();
    await postsReach(1);
    assert.deepEqual(posts[0]!.seconds, [1], 'sent without the clock moving');
    posts[0]!.answer(DELIVERED);
    await draining;
    await store.close();
  });

  it('gathers the events that come while a delivery is in flight into the next, up to maxEvents, in order', async () => {
    const { store, deliverer, posts, write, postsReach } = await deliveryBench({ maxEvents: 4 });
    await write(1);
    const draining = deliverer.drainDue();
    await postsReach(1);
    for (let second = 2; second <= 7; second++) await write(second);
    assert.equal(posts.length, 1, 'one delivery in flight at most: the new events wait for it');
    posts[0]!.answer(DELIVERED);
    await postsReach(2);
    assert.deepEqual(posts[1]!.seconds, [2, 3, 4, 5], 'the next takes what gathered, up to maxEvents');
    posts[1]!.answer(DELIVERED);
    await postsReach(3);
    assert.deepEqual(posts[2]!.seconds, [6, 7]);
    posts[2]!.answer(DELIVERED);
    await draining;
    assert.equal(posts.length, 3);
    await store.close();
  });

  it('a failed delivery holds back what came after it, which goes together once it is delivered', async () => {
    const { clock, store, deliverer, posts, write, postsReach } = await deliveryBench({ retryFirstMs: 1000 });
    await write(1);
    let draining = deliverer.drainDue();
    await postsReach(1);
    posts[0]!.answer({ delivered: false, status: 503, error: 'answered 503' });
    await draining;
    for (let second = 2; second <= 4; second++) await write(second);
    clock.advance(1000);
    draining = deliverer.drainDue();
    await postsReach(2);
    assert.deepEqual(posts[1]!.seconds, [1], 'the retry first, alone, with its own body');
    posts[1]!.answer(DELIVERED);
    await postsReach(3);
    assert.deepEqual(posts[2]!.seconds, [2, 3, 4]);
    posts[2]!.answer(DELIVERED);
    await draining;
    await store.close();
  });

  it('lingerMs holds an idle endpoint\'s lone event that long, and no longer than maxEvents take to wait', async () => {
    const { clock, store, deliverer, posts, write, postsReach } = await deliveryBench({ lingerMs: 1000, maxEvents: 3 });
    await write(1);
    await deliverer.drainDue();
    clock.advance(999);
    await deliverer.drainDue();
    assert.equal(posts.length, 0, 'lingering');
    clock.advance(1);
    let draining = deliverer.drainDue();
    await postsReach(1);
    assert.deepEqual(posts[0]!.seconds, [1]);
    posts[0]!.answer(DELIVERED);
    await draining;
    for (let second = 2; second <= 4; second++) await write(second);
    draining = deliverer.drainDue();
    await postsReach(2);
    assert.deepEqual(posts[1]!.seconds, [2, 3, 4], 'a full delivery goes at once');
    posts[1]!.answer(DELIVERED);
    await draining;
    await store.close();
  });
});
