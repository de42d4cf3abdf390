import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SqliteStore } from '../../../adapters/sqlite/index.ts';
import { builtInProducts } from '../../../products/index.ts';
import { assertProblem, uniqueVin } from '../../support/fixtures.ts';
import { flakyProduct } from '../../support/flaky-product.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

function gps(secondsAfterT0: number, overrides: Record<string, unknown> = {}) {
  return { timestamp: T0 / 1000 + secondsAfterT0, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90, ...overrides };
}

function tpms(pressures: number[], at = '2026-06-01T12:00:00Z') {
  return { readAt: at, sensors: pressures.map((pressurePsi, i) => ({ sensorId: `S${i}`, wheel: `W${i}`, pressurePsi, temperatureC: 30 })) };
}

/** A product whose transform throws while `broken.failing` is set: the dead-letter path. */
const { product: flaky, control: broken } = flakyProduct();

describe('partner intake over HTTP', () => {
  let app: TestApp;
  let gpsPartner: { id: string; apiKey: string; token: string };
  let tpmsPartner: { id: string; apiKey: string; token: string };
  let flakyPartner: { id: string; apiKey: string; token: string };

  before(async () => {
    app = await startTestApp({
      core: { products: [...builtInProducts, flaky], productLimits: { 'gps-basic': { requests: 3, windowSeconds: 60 } }, worker: { maxAttempts: 2, retryBaseMs: 1000 } },
      app: { intakeBodyLimitBytes: 2048 },
    });
    app.clock.set(T0);
    gpsPartner = await partnerWithToken(app, 'gps-basic', 'GPS Co');
    tpmsPartner = await partnerWithToken(app, 'tpms', 'Tire Co');
    flakyPartner = await partnerWithToken(app, 'flaky', 'Flaky Co');
  });
  after(() => app.close());
  /** Payloads of `vin` in the intake log, whatever their status (the worker runs beside the test). */
  const logged = (vin: string) => (app.trailwire.store as SqliteStore).db.prepare('SELECT COUNT(*) FROM intake_log WHERE vin = ?').pluck().get(vin);

  const post = (token: string, vin: string, body: unknown, headers: Record<string, string> = {}) =>
    app.call('POST', `/api/v1/telemetry/intake/${vin}`, { token, body, headers });
  const drain = () => app.trailwire.intake!.worker!.drainDue();
  /** Moves the clock to T0 + `hours` and re-authenticates the partners (tokens live 30 minutes). */
  async function at(hours: number) {
    app.clock.set(T0 + hours * 3_600_000);
    for (const partner of [gpsPartner, tpmsPartner, flakyPartner]) {
      const response = await app.call('POST', '/api/v1/partners/authenticate', { apiKey: partner.apiKey });
      partner.token = response.body.access_token;
    }
  }

  it('answers 202 with the id, Location and RateLimit headers once the payload is queued; the status endpoint follows it', async () => {
    const vin = uniqueVin();
    const response = await post(gpsPartner.token, vin.toLowerCase(), gps(1), { 'x-request-id': 'partner-run-7' });
    assert.equal(response.status, 202);
    assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(response.headers.get('x-request-id'), 'partner-run-7');
    assert.deepEqual(Object.keys(response.body).sort(), ['id', 'status']);
    assert.equal(response.body.status, 'queued');
    assert.equal(response.headers.get('location'), `/api/v1/telemetry/intake/status/${response.body.id}`);
    assert.equal(response.headers.get('ratelimit-limit'), '3');
    assert.equal(response.headers.get('ratelimit-remaining'), '2');
    assert.match(response.headers.get('ratelimit-reset') ?? '', /^[1-9][0-9]*$/);

    const queued = await app.call('GET', response.headers.get('location')!, { token: gpsPartner.token });
    assert.equal(queued.status, 200);
    assert.equal(queued.body.vin, vin, 'the VIN is upper-cased');
    assert.equal(queued.body.product, 'gps-basic');
    await drain();
    const processed = await app.call('GET', response.headers.get('location')!, { token: gpsPartner.token });
    assert.equal(processed.body.status, 'processed');
    assert.equal(processed.body.attempts, 1);
    assert.equal(processed.body.error, null);
    // Another partner cannot see it.
    assertProblem(await app.call('GET', response.headers.get('location')!, { token: tpmsPartner.token }), 404);
  });

  it('refuses bad input with the right problem, and stores nothing', async () => {
    const vin = uniqueVin();
    const before = await app.trailwire.intake!.queue.depth();
    assertProblem(await post(gpsPartner.token, 'NOTAVIN', gps(1)), 400, '/vin');
    assertProblem(await post(gpsPartner.token, '1HGCM82643A004352', gps(1)), 400, '/vin');
    assertProblem(await post(gpsPartner.token, vin, { ...gps(1), speedKph: 'fast' }), 400, '/speedKph');
    const missing = await post(gpsPartner.token, vin, { timestamp: T0 / 1000 });
    assertProblem(missing, 400);
    assert.ok(missing.body.errors.some((e: { path: string }) => e.path === '/position'));
    assertProblem(await post(gpsPartner.token, vin, '{"timestamp": ', { 'content-type': 'application/json' }), 400);
    assertProblem(await post(gpsPartner.token, vin, JSON.stringify(gps(1)), { 'content-type': 'text/plain' }), 415);
    assertProblem(await post(gpsPartner.token, vin, { ...gps(1), padding: 'x'.repeat(4096) }), 413);
    assertProblem(await post(gpsPartner.token, vin, tpms([100])), 400); // a tpms payload on a gps-basic token
    assert.equal(await app.trailwire.intake!.queue.depth(), before);
  });

  it("refuses a reading dated more than 5 minutes after the server's clock: 400 at its time field, for each built-in product, nothing enqueued", async () => {
    await at(0.25);
    const now = app.clock.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    const cargosafePartner = await partnerWithToken(app, 'cargosafe', 'Cargo Co');
    const cases = [
      { partner: gpsPartner, path: '/timestamp', body: (ms: number) => gps((ms - T0) / 1000) },
      { partner: tpmsPartner, path: '/readAt', body: (ms: number) => tpms([100], iso(ms)) },
      {
        partner: cargosafePartner,
        path: '/recordedAt',
        body: (ms: number) => ({ unitSerial: 'CS-9', recordedAt: iso(ms), door: 'open', loadPercent: 10, temperatureC: 5, humidityPercent: 50 }),
      },
    ];
    for (const { partner, path, body } of cases) {
      const vin = uniqueVin();
      for (const ahead of [5 * 60_000 + 1_000, Date.UTC(2098, 0, 1) - now]) {
        const refused = await post(partner.token, vin, body(now + ahead));
        assertProblem(refused, 400, path);
        assert.equal(refused.body.errors.length, 1);
        assert.equal(
          refused.body.errors[0].message,
          `is ${iso(now + ahead)}, more than 5 minutes after the server's clock (${iso(now)}): check the device's clock`,
        );
        assert.match(refused.body.detail, /dated more than 5 minutes after the server's clock/);
        assert.equal(refused.headers.get('location'), null);
      }
      assert.equal(logged(vin), 0, `${path}: nothing enqueued`);
      const accepted = await post(partner.token, vin, body(now + 5 * 60_000));
      assert.equal(accepted.status, 202, `${path}: exactly 5 minutes ahead is accepted`);
      assert.equal(accepted.headers.get('ratelimit-remaining'), String(Number(accepted.headers.get('ratelimit-limit')) - 1), 'the refusals used none of the window');
    }
  });

  it('reads the body itself: charset parameters, compressed or chunked oversized bodies, header checks', async () => {
    await at(0.5);
    const vin = uniqueVin();
    const ok = await post(gpsPartner.token, vin, JSON.stringify(gps(2)), { 'content-type': 'application/json; charset=utf-8' });
    assert.equal(ok.status, 202);
    assertProblem(await post(gpsPartner.token, vin, JSON.stringify(gps(3)), { 'content-type': 'application/json', 'content-encoding': 'gzip' }), 415);
    // No Content-Length: the limit is enforced while the body streams in.
    const chunked = await fetch(`${app.url}/api/v1/telemetry/intake/${vin}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gpsPartner.token}`, 'content-type': 'application/json' },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 8; i++) controller.enqueue(new TextEncoder().encode(' '.repeat(512)));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    assert.equal(chunked.status, 413);
    assertProblem(await post(gpsPartner.token, vin, gps(4), { 'idempotency-key': 'x'.repeat(256) }), 400, '/headers/idempotency-key');
    assertProblem(await app.call('GET', '/api/v1/telemetry/intake/status/no-such-id', { token: gpsPartner.token }), 404);
    assert.equal(logged(vin), 1, 'only the accepted payload was stored');
  });

  it('answers 401 without a valid partner token and 403 for a customer token', async () => {
    const vin = uniqueVin();
    const missing = await app.call('POST', `/api/v1/telemetry/intake/${vin}`, { body: gps(1) });
    assertProblem(missing, 401);
    assertProblem(await post('not-a-token', vin, gps(1)), 401);
    const customer = await customerWithToken(app, 'Reader');
    assertProblem(await post(customer.token, vin, gps(1)), 403);
  });

  // Intake POSTs skip the root router's other routes (app.ts, routeByPathStart): they must still be
  // routed as the root router routes them.
  it('routes intake paths as every other route: the route template in the metrics, 405 and 404 from the root router', async () => {
    assert.equal((await post(gpsPartner.token, uniqueVin(), gps(5))).status, 202);
    const metrics = await app.call('GET', '/metrics');
    assert.match(metrics.body, /trailwire_http_requests_total\{method="POST",route="\/api\/v1\/telemetry\/intake\/:VIN",status="202"\} \d+/);
    const wrongMethod = await app.call('POST', '/api/v1/telemetry/intake/status/some-id', { token: gpsPartner.token, body: gps(5) });
    assertProblem(wrongMethod, 405);
    assert.equal(wrongMethod.headers.get('allow'), 'HEAD, GET');
    assertProblem(await app.call('POST', `/api/v1/telemetry/intake/${uniqueVin()}/extra`, { token: gpsPartner.token, body: gps(5) }), 404);
    assertProblem(await app.call('PUT', `/api/v1/telemetry/intake/${uniqueVin()}`, { token: gpsPartner.token, body: gps(5) }), 405);
  });

  it('limits per (product, VIN) in fixed windows: other VINs and products keep their quota', async () => {
    await at(1);
    const noisy = uniqueVin();
    for (let i = 0; i < 3; i++) assert.equal((await post(gpsPartner.token, noisy, gps(100 + i))).status, 202);
    const limited = await post(gpsPartner.token, noisy, gps(200));
    assertProblem(limited, 429);
    assert.equal(limited.headers.get('retry-after'), '60');
    assert.equal(limited.headers.get('ratelimit-remaining'), '0');
    assert.equal((await post(gpsPartner.token, uniqueVin(), gps(300))).status, 202, 'another VIN is untouched');
    assert.equal((await post(tpmsPartner.token, noisy, tpms([100]))).status, 202, 'another product is untouched');
    app.clock.advance(60_000);
    assert.equal((await post(gpsPartner.token, noisy, gps(400))).status, 202, 'the next window resets');
  });

  it('answers a repeated Idempotency-Key with the original 202 and enqueues nothing', async () => {
    await at(2);
    const vin = uniqueVin();
    const first = await post(gpsPartner.token, vin, gps(500), { 'idempotency-key': 'order-1' });
    const again = await post(gpsPartner.token, vin, gps(500), { 'idempotency-key': 'order-1' });
    assert.equal(again.status, 202);
    assert.equal(again.body.id, first.body.id);
    assert.equal(again.headers.get('location'), first.headers.get('location'));
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('ratelimit-remaining'), first.headers.get('ratelimit-remaining'), 'the replay used none of the window');
    assert.equal(first.headers.get('idempotent-replayed'), null);
    assert.equal(logged(vin), 1, 'stored once');
    const other = await post(tpmsPartner.token, vin, tpms([100]), { 'idempotency-key': 'order-1' });
    assert.equal(other.status, 202);
    assert.notEqual(other.body.id, first.body.id, 'keys are per partner');
    await at(26);
    const later = await post(gpsPartner.token, vin, gps(501), { 'idempotency-key': 'order-1' });
    assert.equal(later.status, 202);
    assert.notEqual(later.body.id, first.body.id, 'after 24 hours the key is new again');
  });

  it('refuses an Idempotency-Key reused with another VIN or body: 422 idempotency_key_reused, nothing enqueued', async () => {
    await at(3);
    const vin = uniqueVin();
    const first = await post(gpsPartner.token, vin, gps(600), { 'idempotency-key': 'order-2' });
    assert.equal(first.status, 202);
    const otherBody = await post(gpsPartner.token, vin, gps(601), { 'idempotency-key': 'order-2' });
    assertProblem(otherBody, 422);
    assert.equal(otherBody.body.type, 'https://trailwire.dev/problems/idempotency-key-reused');
    const secondVin = uniqueVin();
    const otherVin = await post(gpsPartner.token, secondVin, gps(600), { 'idempotency-key': 'order-2' });
    assertProblem(otherVin, 422);
    assert.match(otherVin.body.detail, /another VIN/);
    assert.deepEqual([logged(vin), logged(secondVin)], [1, 0], 'nothing enqueued');
    // The same JSON value, re-serialized with other whitespace and key order, is still the same body.
    const { timestamp, ...rest } = gps(600);
    const reserialized = JSON.stringify({ ...rest, timestamp }, null, 2);
    const replay = await post(gpsPartner.token, vin, reserialized, { 'idempotency-key': 'order-2', 'content-type': 'application/json' });
    assert.equal(replay.status, 202);
    assert.equal(replay.body.id, first.body.id);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  });

  it('processes one VIN in arrival order, and derives the trailer status from the tire sensors', async () => {
    await at(30);
    const customer = await customerWithToken(app, 'Status Co');
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'F' });
    const vin = uniqueVin();
    const trailer = await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    await post(tpmsPartner.token, vin, tpms([100, 100], '2026-06-01T12:31:00Z'));
    await post(tpmsPartner.token, vin, tpms([100, 85], '2026-06-01T12:32:00Z'));
    await post(tpmsPartner.token, vin, tpms([60, 85], '2026-06-01T12:33:00Z'));
    await drain();
    const faulted = await app.call('GET', `/api/v1/trailers/${trailer.id}`, { token: customer.token });
    assert.deepEqual(faulted.body.status, { name: 'Faulted', isWarning: false, isFault: true });
    assert.equal(faulted.body.faultedDevices, 1);
    assert.equal(faulted.body.warningDevices, 1);
    const devices = await app.call('GET', `/api/v1/devices/${trailer.id}`, { token: customer.token });
    const s0 = devices.body.data.find((d: { serial: string }) => d.serial === 'S0');
    const readings = await app.call('GET', `/api/v1/devices/telemetry/${s0.id}?from=2026-06-01T00:00:00Z&to=2026-06-02T00:00:00Z`, { token: customer.token });
    assert.deepEqual(readings.body.data.map((r: { metrics: { pressurePsi: number } }) => r.metrics.pressurePsi), [100, 100, 60], 'in arrival order');

    await post(tpmsPartner.token, vin, tpms([100, 100], '2026-06-01T12:34:00Z'));
    await drain();
    const ok = await app.call('GET', `/api/v1/trailers/${trailer.id}`, { token: customer.token });
    assert.equal(ok.body.status.name, 'OK');
    assert.equal(ok.body.statusDate, new Date(app.clock.now()).toISOString());
  });

  it('keeps an unknown VIN as an unassigned trailer that an operator assigns later, with its history', async () => {
    await at(31);
    const vin = uniqueVin();
    await post(gpsPartner.token, vin, gps(2400));
    await drain();
    const unassigned = await app.trailwire.store.findTrailerByVin(vin);
    assert.equal(unassigned?.fleetId, null);
    const customer = await customerWithToken(app, 'Late Co');
    assertProblem(await app.call('GET', `/api/v1/trailers/${unassigned!.id}`, { token: customer.token }), 404);
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'F' });
    const assigned = await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    assert.equal(assigned.id, unassigned!.id);
    const seen = await app.call('GET', `/api/v1/trailers/${assigned.id}`, { token: customer.token });
    assert.equal(seen.body.telemetry.speed, 62.1);
    assert.equal(seen.body.telemetry.timestamp, new Date(T0 + 2_400_000).toISOString());
  });

  it('retries a failing payload with backoff, dead-letters it with the reason, never blocks the VIN, and re-queues on request', async () => {
    await at(32);
    broken.failing = true;
    const vin = uniqueVin();
    const bad = await post(flakyPartner.token, vin, { n: 5 });
    const good = await post(flakyPartner.token, vin, { n: 0 });
    await drain();
    const statusOf = async (id: string) => (await app.call('GET', `/api/v1/telemetry/intake/status/${id}`, { token: flakyPartner.token })).body;
    assert.equal((await statusOf(bad.body.id)).status, 'queued', 'waiting for its retry');
    assert.equal((await statusOf(good.body.id)).status, 'queued', 'held behind the earlier payload of its VIN');
    assert.match((await statusOf(bad.body.id)).error, /flaky refuses 5/);
    app.clock.advance(999);
    await drain();
    assert.equal((await statusOf(bad.body.id)).attempts, 1, 'not before the backoff');
    app.clock.advance(1);
    await drain();
    const failed = await statusOf(bad.body.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.attempts, 2);
    await drain();
    assert.equal((await statusOf(good.body.id)).status, 'processed', 'the VIN moves on after the dead letter');

    const deadLetters = await app.trailwire.intake!.queue.listFailed(10);
    assert.ok(deadLetters.some((record) => record.id === bad.body.id));
    broken.failing = false;
    assert.equal(await app.trailwire.intake!.queue.requeue(bad.body.id, app.clock.now()), true);
    await drain();
    assert.equal((await statusOf(bad.body.id)).status, 'processed');
    assert.equal(await app.trailwire.intake!.queue.requeue(bad.body.id, app.clock.now()), false, 'only failed payloads re-queue');
  });

  it("reads up to 100 of the partner's payloads in one request, counted as one read; another partner's are not found, never shown", async () => {
    await at(34);
    const sentAt = 34 * 3600;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await post(gpsPartner.token, uniqueVin(), gps(sentAt + i))).body.id);
    const theirs = (await post(tpmsPartner.token, uniqueVin(), tpms([100], new Date((T0 / 1000 + sentAt) * 1000).toISOString()))).body.id as string;
    await drain();
    // Sent after the drain: queued, or processed by now (the worker runs beside the test).
    const later = (await post(gpsPartner.token, uniqueVin(), gps(sentAt + 5))).body.id as string;
    const read = (query: string, token = gpsPartner.token) => app.call('GET', `/api/v1/telemetry/intake/status${query}`, { token });

    const answer = await read(`?ids=${[...ids, theirs, 'no-such-id', later].join(',')}`);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('cache-control'), 'no-store');
    assert.deepEqual(answer.body.data.map((view: { id: string }) => view.id), [...ids, later], 'in the order asked');
    assert.deepEqual(answer.body.data.slice(0, 3).map((view: { status: string }) => view.status), ['processed', 'processed', 'processed']);
    assert.deepEqual(answer.body.notFound, [theirs, 'no-such-id'], "another partner's id is as unknown as one that never was");
    assert.ok(!JSON.stringify(answer.body.data).includes('tpms'), "nothing of the other partner's payload");
    const single = await app.call('GET', `/api/v1/telemetry/intake/status/${ids[0]}`, { token: gpsPartner.token });
    assert.deepEqual(answer.body.data[0], single.body, 'each as the single status read shows it');
    const theirView = await read(`?ids=${theirs}&ids=${ids[0]}`, tpmsPartner.token);
    assert.deepEqual([theirView.body.data.map((view: { id: string }) => view.id), theirView.body.notFound], [[theirs], [ids[0]]], 'the other partner sees its own only (the parameter repeated)');

    // One read however many ids, on the limiter the single status read uses.
    const remaining = Number(single.headers.get('ratelimit-remaining'));
    const hundred = Array.from({ length: 100 }, (_, i) => (i < 3 ? ids[i]! : `unknown-${i}`));
    const full = await read(`?ids=${hundred.join(',')}`);
    assert.equal(full.status, 200);
    assert.equal(full.body.data.length + full.body.notFound.length, 100);
    assert.equal(full.headers.get('ratelimit-limit'), single.headers.get('ratelimit-limit'));
    assert.equal(Number(full.headers.get('ratelimit-remaining')), remaining - 1, '100 ids cost one read');
    assert.equal(Number((await app.call('GET', `/api/v1/telemetry/intake/status/${ids[1]}`, { token: gpsPartner.token })).headers.get('ratelimit-remaining')), remaining - 2);

    assertProblem(await read(''), 400, '/ids');
    assertProblem(await read('?ids='), 400, '/ids/0');
    assertProblem(await read(`?ids=${[...hundred, 'one-more'].join(',')}`), 400, '/ids');
    assertProblem(await read(`?ids=${ids[0]},not%20an%20id`), 400, '/ids/1');
    assertProblem(await read(`?ids=${ids[0]},,${ids[1]}`), 400, '/ids/1');
    const repeated = await read(`?ids=${ids[0]},${ids[1]},${ids[0]}`);
    assertProblem(repeated, 400, '/ids/2');
    assert.match(repeated.body.errors[0].message, /repeats \/ids\/0/);
    assertProblem(await app.call('GET', `/api/v1/telemetry/intake/status?ids=${ids[0]}`), 401);
    assertProblem(await read(`?ids=${ids[0]}`, (await customerWithToken(app, 'Status Reader')).token), 403);
  });

  it('publishes the new trailer state to the live hub for the owning customer only', async () => {
    await at(33);
    const customer = await customerWithToken(app, 'Live Co');
    const fleet = await app.trailwire.admin.createFleet({ customerId: customer.id, name: 'Live fleet' });
    const vin = uniqueVin();
    await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    const events: unknown[] = [];
    const sink = { write: (event: unknown) => (events.push(event), true), end: () => {} };
    const subscription = await app.trailwire.live.subscribe(customer.id, sink as never);
    await post(gpsPartner.token, vin, gps(3600));
    await drain();
    subscription.unsubscribe();
    assert.equal(events.length, 1);
    const event = events[0] as { customerId: string; fleet: { id: number; name: string }; trailer: { vin: string; telemetry: { speed: number } } };
    assert.equal(event.customerId, customer.id);
    assert.deepEqual(event.fleet, { id: fleet.id, name: 'Live fleet' });
    assert.equal(event.trailer.vin, vin);
    assert.equal(event.trailer.telemetry.speed, 62.1);
    const other = await customerWithToken(app, 'Other Live Co');
    const otherEvents: unknown[] = [];
    const otherSubscription = await app.trailwire.live.subscribe(other.id, { write: (e: unknown) => (otherEvents.push(e), true), end: () => {} } as never);
    await post(gpsPartner.token, vin, gps(3601));
    await drain();
    otherSubscription.unsubscribe();
    assert.equal(otherEvents.length, 0, 'another customer hears nothing');
  });
});
