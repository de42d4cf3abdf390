/**
 * Webhooks over HTTP (contract 14, issue 40): registering, listing, reading, deleting an endpoint and
 * its deliveries list, the per-customer cap and customer isolation; URLs refused without the
 * operator's flags (http, loopback, private, link-local, the metadata address, names resolving to
 * them); deliveries signed as Standard Webhooks specifies and verified by its own library; a receiver
 * down for a while then up getting every event once per `webhook-id`, each trailer's in order;
 * redirects not followed; a receiver that never answers costing another customer's nothing; a failing
 * endpoint and its resumption by a test delivery.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../../core/clock.ts';
import type { Trailwire } from '../../../core/trailwire.ts';
import { applyTelemetry, assertProblem, gpsFix, mintToken, tpmsReading, uniqueVin } from '../../support/fixtures.ts';
import { customerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';
import { pino } from 'pino';
import { logLines } from '../../support/log-lines.ts';
import { until } from '../../support/until.ts';
import { type ReceivedDelivery, startWebhookReceiver, type WebhookReceiver } from '../../support/webhook-receiver.ts';

const MINUTE = 60_000;
/** Local receivers: http on 127.0.0.1, allowed as `serve --webhook-allow-http --webhook-allow-private` would. */
const LOCAL_RECEIVERS = { rules: { allowHttp: true, allowPrivate: true }, deliverer: { lingerMs: 0, retryFirstMs: 1000, retryMaxMs: 60_000, retryPeriodMs: 30 * MINUTE } };

interface Event {
  type: string;
  timestamp: string;
  data: any;
}
const eventsOf = (delivery: ReceivedDelivery): Event[] => JSON.parse(delivery.body).events;

async function registerFleetTrailer(trailwire: Trailwire, customerId: string) {
  const fleet = await trailwire.admin.createFleet({ customerId, name: 'Reefers' });
  const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() });
  return { fleet, trailer };
}

describe('webhook endpoints', () => {
  let app: TestApp;
  let acme: Awaited<ReturnType<typeof customerWithToken>>;
  let other: Awaited<ReturnType<typeof customerWithToken>>;
  before(async () => {
    app = await startTestApp({ core: { webhooks: { ...LOCAL_RECEIVERS, maxEndpointsPerCustomer: 3 } } });
    acme = await customerWithToken(app, 'Acme');
    other = await customerWithToken(app, 'Other');
  });
  after(() => app.close());

  it('registers an endpoint, shows its whsec_ secret once, lists, reads and deletes it', async () => {
    const { fleet } = await registerFleetTrailer(app.trailwire, acme.id);
    const created = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url: 'http://127.0.0.1:9/hook', fleetIds: [fleet.id], events: ['trailer.status_changed'] } });
    assert.equal(created.status, 201);
    assert.match(created.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(created.headers.get('location'), `/api/v1/webhooks/${created.body.id}`);
    assert.equal(created.headers.get('cache-control'), 'no-store');
    assert.deepEqual(
      { ...created.body, id: undefined, secret: undefined, createdAt: undefined },
      { id: undefined, secret: undefined, createdAt: undefined, url: 'http://127.0.0.1:9/hook', events: ['trailer.status_changed'], fleetIds: [fleet.id], status: 'active', failingSince: null },
    );
    const one = await app.call('GET', `/api/v1/webhooks/${created.body.id}`, { token: acme.token });
    assert.equal(one.status, 200);
    assert.equal(one.body.secret, undefined, 'the secret is shown only at creation');
    const { secret: _shownOnce, ...withoutSecret } = created.body;
    assert.deepEqual(one.body, withoutSecret);
    const list = await app.call('GET', '/api/v1/webhooks', { token: acme.token });
    assert.deepEqual(list.body.data.map((webhook: { id: string }) => webhook.id), [created.body.id]);
    // Another customer sees nothing of it.
    assertProblem(await app.call('GET', `/api/v1/webhooks/${created.body.id}`, { token: other.token }), 404);
    assertProblem(await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token: other.token }), 404);
    assertProblem(await app.call('GET', `/api/v1/webhooks/${created.body.id}/deliveries`, { token: other.token }), 404);
    assertProblem(await app.call('POST', `/api/v1/webhooks/${created.body.id}/test`, { token: other.token }), 404);
    assert.deepEqual((await app.call('GET', '/api/v1/webhooks', { token: other.token })).body, { data: [] });

    assert.equal((await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token: acme.token })).status, 204);
    assertProblem(await app.call('GET', `/api/v1/webhooks/${created.body.id}`, { token: acme.token }), 404);
  });

  it('caps the endpoints of a customer (409), and pages the list', async () => {
    const customer = await customerWithToken(app, 'Capped');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await app.call('POST', '/api/v1/webhooks', { token: customer.token, body: { url: `http://127.0.0.1:9/hook${i}` } })).body.id);
    assertProblem(await app.call('POST', '/api/v1/webhooks', { token: customer.token, body: { url: 'http://127.0.0.1:9/one-more' } }), 409);
    const first = await app.call('GET', '/api/v1/webhooks?take=2', { token: customer.token });
    const second = await app.call('GET', `/api/v1/webhooks?next=${encodeURIComponent(first.body.next)}`, { token: customer.token });
    assert.deepEqual([...first.body.data, ...second.body.data].map((webhook: { id: string }) => webhook.id), [...ids].sort());
    assert.equal(second.body.next, undefined);
  });

  it('refuses a bad body with the field named', async () => {
    const cases: [unknown, string][] = [
      [{}, '/url'],
      [{ url: 'not a url' }, '/url'],
      [{ url: 'ftp://127.0.0.1/hook' }, '/url'],
      [{ url: 'http://user:pw@127.0.0.1/hook' }, '/url'],
      [{ url: 'http://127.0.0.1/hook', events: ['trailer.exploded'] }, '/events/0'],
      [{ url: 'http://127.0.0.1/hook', events: [] }, '/events'],
      [{ url: 'http://127.0.0.1/hook', fleetIds: [999_999] }, '/fleetIds/0'],
      [{ url: 'http://127.0.0.1/hook', fleetIds: ['1'] }, '/fleetIds/0'],
      [{ url: 'http://127.0.0.1/hook', secret: 'mine' }, '/secret'],
    ];
    for (const [body, path] of cases) assertProblem(await app.call('POST', '/api/v1/webhooks', { token: acme.token, body }), 400, path);
    assertProblem(await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: '{"url":', headers: { 'content-type': 'application/json' } }), 400);
    assertProblem(await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: 'url=x', headers: { 'content-type': 'text/plain' } }), 415);
  });
});

describe('webhook addresses without the operator flags', () => {
  let app: TestApp;
  let acme: Awaited<ReturnType<typeof customerWithToken>>;
  before(async () => {
    app = await startTestApp();
    acme = await customerWithToken(app);
  });
  after(() => app.close());

  it('takes https only, and refuses loopback, private, link-local and metadata addresses, by literal or by name', async () => {
    const refused = [
      'http://203.0.114.1/hook',
      'https://127.0.0.1/hook',
      'https://127.1.2.3:8443/hook',
      'https://10.1.2.3/hook',
      'https://172.16.0.1/hook',
      'https://192.168.1.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://100.64.0.1/hook',
      'https://0.0.0.0/hook',
      'https://[::1]/hook',
      'https://[fd00:ec2::254]/hook',
      'https://[fe80::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://localhost/hook',
      'https://2130706433/hook',
    ];
    for (const url of refused) {
      const answer = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url } });
      assertProblem(answer, 400, '/url');
    }
    assert.deepEqual((await app.call('GET', '/api/v1/webhooks', { token: acme.token })).body, { data: [] });
    // A public address is taken, IPv4 and IPv6 (literals: no DNS in the test).
    for (const url of ['https://8.8.8.8/hook', 'https://[2606:4700:4700::1111]:8443/hook']) {
      const created = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url } });
      assert.equal(created.status, 201, url);
      await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token: acme.token });
    }
  });

  it('refuses at connect time an address that became private after registration (the sender checks after DNS)', async () => {
    const sender = app.trailwire.webhooks.service;
    assert.deepEqual(sender.addressRules, { allowHttp: false, allowPrivate: false });
    const { WebhookSender } = await import('../../../core/webhook-sender.ts');
    const receiver = await startWebhookReceiver();
    try {
      const guarded = new WebhookSender({ rules: { allowHttp: true, allowPrivate: false }, timeoutMs: 2000 });
      // By name (the lookup refuses what it resolves to) and by literal.
      const byName = await guarded.post({ url: receiver.url.replace('127.0.0.1', 'localhost'), secret: 'whsec_AAAA', id: 'msg_1', body: '{}', at: Date.now() });
      const byLiteral = await guarded.post({ url: receiver.url, secret: 'whsec_AAAA', id: 'msg_2', body: '{}', at: Date.now() });
      guarded.close();
      assert.equal(byName.delivered, false);
      assert.match((byName as { error: string }).error, /not a public address/);
      assert.equal(byLiteral.delivered, false);
      assert.equal(receiver.received.length, 0, 'nothing reached the private address');
    } finally {
      await receiver.close();
    }
  });
});

describe('webhook deliveries', () => {
  let app: TestApp;
  let clock: ManualClock;
  let receiver: WebhookReceiver;
  let acme: Awaited<ReturnType<typeof customerWithToken>>;
  const log = logLines();
  before(async () => {
    // Near the real time: the Standard Webhooks library refuses a timestamp more than 5 minutes off.
    clock = new ManualClock(Date.now());
    app = await startTestApp({ clock, core: { webhooks: LOCAL_RECEIVERS }, app: { logger: pino(log.stream) } });
    acme = await customerWithToken(app);
    receiver = await startWebhookReceiver();
  });
  after(async () => {
    await receiver.close();
    await app.close();
  });

  it('signs each delivery as Standard Webhooks specifies: the library verifies it with the secret', async () => {
    receiver.received.length = 0;
    const { trailer } = await registerFleetTrailer(app.trailwire, acme.id);
    const created = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url: receiver.url } });
    await applyTelemetry(app.trailwire, trailer.vin, { gps: [gpsFix(clock.now() - 1000)] });
    await app.trailwire.webhooks.deliverer.drainDue();
    assert.equal(receiver.received.length, 1);
    const [delivery] = receiver.received;
    const verified = new Webhook(created.body.secret).verify(delivery!.body, delivery!.headers as Record<string, string>) as { events: Event[] };
    assert.equal(verified.events.length, 1);
    assert.equal(verified.events[0]!.type, 'trailer.updated');
    // The same JSON as the read API's (and the SSE update's).
    const read = await app.call('GET', `/api/v1/trailers/${trailer.id}`, { token: acme.token });
    assert.deepEqual(verified.events[0]!.data, read.body);
    assert.match(String(delivery!.headers['webhook-id']), /^msg_/);
    // A wrong secret does not verify.
    assert.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(delivery!.body, delivery!.headers as Record<string, string>));
    const metrics = String((await app.call('GET', '/metrics')).body);
    assert.match(metrics, /^trailwire_webhook_attempts_total\{outcome="delivered"\} 1$/m);
    assert.match(metrics, /^trailwire_webhook_events_delivered_total 1$/m);
    const audit = log.lines.find((line) => line.event === 'webhook.created');
    assert.deepEqual([audit?.audit, audit?.webhookId, audit?.customerId, audit?.origin], [true, created.body.id, acme.id, new URL(receiver.url).origin]);
    assert.ok(!JSON.stringify(log.lines).includes(created.body.secret), 'the secret is never logged');
    const deliveries = await app.call('GET', `/api/v1/webhooks/${created.body.id}/deliveries`, { token: acme.token });
    assert.equal(deliveries.status, 200);
    assert.deepEqual(
      deliveries.body.data.map((d: any) => ({ id: d.id, state: d.state, attempts: d.attempts, events: d.events, lastStatus: d.lastStatus })),
      [{ id: delivery!.headers['webhook-id'], state: 'delivered', attempts: 1, events: 1, lastStatus: 204 }],
    );
    await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token: acme.token });
  });

  it('tells trailer.status_changed when a device fault changes the status, to endpoints that ask for it', async () => {
    receiver.received.length = 0;
    const { trailer } = await registerFleetTrailer(app.trailwire, acme.id);
    const created = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url: receiver.url, events: ['trailer.status_changed'] } });
    await applyTelemetry(app.trailwire, trailer.vin, { gps: [gpsFix(clock.now() - 2000)] });
    clock.advance(1000);
    await applyTelemetry(app.trailwire, trailer.vin, { devices: [tpmsReading('T-1', clock.now() - 1000, { isWarning: false, isFault: true })] });
    await app.trailwire.webhooks.deliverer.drainDue();
    const events = receiver.delivered().flatMap(eventsOf);
    assert.deepEqual(events.map((event) => [event.type, event.data.status.name]), [['trailer.status_changed', 'Faulted']]);
    await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token: acme.token });
  });

  it('a receiver down for a while, then up, gets every event once per webhook-id, each trailer in order', async () => {
    receiver.received.length = 0;
    const { fleet } = await registerFleetTrailer(app.trailwire, acme.id);
    const trailers = [await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() }), await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: uniqueVin() })];
    const created = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url: receiver.url, events: ['trailer.updated'], fleetIds: [fleet.id] } });
    receiver.answer = 503;
    const written: string[] = [];
    for (let round = 0; round < 5; round++) {
      for (const trailer of trailers) {
        await applyTelemetry(app.trailwire, trailer.vin, { gps: [gpsFix(clock.now() - 1000, { speed: round })] });
        written.push(`${trailer.id}:${round}`);
      }
      await app.trailwire.webhooks.deliverer.drainDue();
      clock.advance(2 * 60_000);
    }
    assert.ok(receiver.received.length >= 3, 'attempts were made while the receiver was down');
    assert.equal(receiver.delivered().length, 0);
    const pending = await app.call('GET', `/api/v1/webhooks/${created.body.id}/deliveries`, { token: acme.token });
    assert.equal(pending.body.data[0].state, 'pending');
    assert.equal(pending.body.data[0].lastStatus, 503);

    receiver.answer = 200;
    for (let i = 0; i < 10 && receiver.delivered().flatMap(eventsOf).length < written.length; i++) {
      clock.advance(2 * 60_000);
      await app.trailwire.webhooks.deliverer.drainDue();
    }
    const delivered = receiver.delivered();
    const ids = delivered.map((delivery) => String(delivery.headers['webhook-id']));
    assert.equal(new Set(ids).size, ids.length, 'each webhook-id delivered once');
    const events = delivered.flatMap(eventsOf);
    assert.deepEqual(events.map((event) => `${event.data.id}:${event.data.telemetry.speed}`).sort(), [...written].sort(), 'every event, once');
    for (const trailer of trailers)
      assert.deepEqual(
        events.filter((event) => event.data.id === trailer.id).map((event) => event.data.telemetry.speed),
        [0, 1, 2, 3, 4],
        'each trailer in order',
      );
    // A retry sends the same id and the same bytes.
    const firstId = ids[0]!;
    const attempts = receiver.received.filter((delivery) => delivery.headers['webhook-id'] === firstId);
    assert.ok(attempts.length > 1);
    assert.equal(new Set(attempts.map((attempt) => attempt.body)).size, 1);
    await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token: acme.token });
  });

  it('follows no redirect: a 3xx is a failed attempt', async () => {
    receiver.received.length = 0;
    const { trailer } = await registerFleetTrailer(app.trailwire, acme.id);
    const created = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url: receiver.url } });
    receiver.answer = 307;
    await applyTelemetry(app.trailwire, trailer.vin, { gps: [gpsFix(clock.now() - 1000)] });
    await app.trailwire.webhooks.deliverer.drainDue();
    assert.equal(receiver.received.length, 1, 'the Location was not followed');
    const [delivery] = (await app.call('GET', `/api/v1/webhooks/${created.body.id}/deliveries`, { token: acme.token })).body.data;
    assert.equal(delivery.state, 'pending');
    assert.match(delivery.lastError, /redirects are not followed/);
    receiver.answer = 204;
    await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token: acme.token });
  });

  it('marks an endpoint failing after the retry period, and a test answered 2xx resumes it and sends what waited', async () => {
    receiver.received.length = 0;
    const { trailer } = await registerFleetTrailer(app.trailwire, acme.id);
    const created = await app.call('POST', '/api/v1/webhooks', { token: acme.token, body: { url: receiver.url } });
    receiver.answer = 500;
    await applyTelemetry(app.trailwire, trailer.vin, { gps: [gpsFix(clock.now() - 1000)] });
    for (let i = 0; i < 60; i++) {
      await app.trailwire.webhooks.deliverer.drainDue();
      clock.advance(60_000);
    }
    // Past the token's lifetime: a fresh one.
    let token = await mintToken(app.trailwire, 'customers', acme.id);
    const failing = await app.call('GET', `/api/v1/webhooks/${created.body.id}`, { token });
    assert.equal(failing.body.status, 'failing');
    assert.ok(failing.body.failingSince);
    const attemptsWhileFailing = receiver.received.length;
    clock.advance(60 * 60_000);
    await app.trailwire.webhooks.deliverer.drainDue();
    assert.equal(receiver.received.length, attemptsWhileFailing, 'a failing endpoint is sent nothing');
    token = await mintToken(app.trailwire, 'customers', acme.id);

    const refusedTest = await app.call('POST', `/api/v1/webhooks/${created.body.id}/test`, { token });
    assert.equal(refusedTest.status, 200);
    assert.deepEqual([refusedTest.body.delivered, refusedTest.body.status, refusedTest.body.webhook.status], [false, 500, 'failing']);

    receiver.answer = 204;
    const test = await app.call('POST', `/api/v1/webhooks/${created.body.id}/test`, { token });
    assert.deepEqual([test.body.delivered, test.body.status, test.body.error, test.body.webhook.status], [true, 204, null, 'active']);
    const testDelivery = receiver.received.at(-1)!;
    assert.deepEqual(eventsOf(testDelivery).map((event) => event.type), ['webhook.test']);
    assert.equal(testDelivery.headers['webhook-id'], test.body.webhookId);
    await app.trailwire.webhooks.deliverer.drainDue();
    assert.deepEqual(eventsOf(receiver.received.at(-1)!).map((event) => [event.type, event.data.id]), [['trailer.updated', trailer.id]]);
    await app.call('DELETE', `/api/v1/webhooks/${created.body.id}`, { token });
  });
});

describe('a receiver that never answers', () => {
  let app: TestApp;
  let clock: ManualClock;
  const receivers: WebhookReceiver[] = [];
  before(async () => {
    clock = new ManualClock(Date.now());
    app = await startTestApp({ clock, core: { webhooks: { ...LOCAL_RECEIVERS, timeoutMs: 3000 } } });
  });
  after(async () => {
    await app.close();
    for (const receiver of receivers) await receiver.close();
  });

  it("holds only its own endpoint: another customer's deliveries go out while it hangs", { timeout: 20_000 }, async () => {
    const [stuck, prompt] = [await startWebhookReceiver(), await startWebhookReceiver()];
    receivers.push(stuck, prompt);
    stuck.answer = 'hang';
    const slow = await customerWithToken(app, 'Slow');
    const fast = await customerWithToken(app, 'Fast');
    const slowTrailer = (await registerFleetTrailer(app.trailwire, slow.id)).trailer;
    const fastTrailer = (await registerFleetTrailer(app.trailwire, fast.id)).trailer;
    await app.call('POST', '/api/v1/webhooks', { token: slow.token, body: { url: stuck.url } });
    await app.call('POST', '/api/v1/webhooks', { token: fast.token, body: { url: prompt.url } });
    app.trailwire.webhooks.deliverer.start();

    await applyTelemetry(app.trailwire, slowTrailer.vin, { gps: [gpsFix(clock.now() - 1000)] });
    await until(() => stuck.received.length === 1, 'the stuck receiver to be called');
    const waits: number[] = [];
    for (let round = 0; round < 5; round++) {
      clock.advance(1);
      await applyTelemetry(app.trailwire, fastTrailer.vin, { gps: [gpsFix(clock.now() - 1000)] });
      const written = performance.now();
      await until(() => prompt.delivered().length === round + 1, `delivery ${round + 1} to the prompt receiver`);
      waits.push(performance.now() - written);
    }
    assert.equal(stuck.delivered().length, 0, 'the stuck receiver is still being waited for');
    // The deliverer looks for work every 200 ms: each delivery within that and its own round trip.
    assert.ok(Math.max(...waits) < 1000, `deliveries to the prompt receiver took ${waits.map(Math.round).join(', ')} ms`);
  });
});
