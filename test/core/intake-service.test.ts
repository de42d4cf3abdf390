/**
 * The accept path of intake without HTTP: what is stored, every refusal (which stores and counts
 * nothing, a reading dated too far after the clock included), idempotency keys (a replay answers the original and counts nothing, even once the
 * window is used up), the per-(product, VIN) windows, and the status view a partner reads.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { openSqliteIntakeQueue } from '../../adapters/sqlite/intake-queue.ts';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { MAX_READING_LEAD_MS } from '../../core/canonical.ts';
import { ManualClock } from '../../core/clock.ts';
import { isTrailwireError } from '../../core/errors.ts';
import type { AccessClaims } from '../../core/tokens.ts';
import { createTrailwire, type Trailwire } from '../../core/trailwire.ts';
import { builtInProducts } from '../../products/index.ts';
import { uniqueVin } from '../support/fixtures.ts';
import { until } from '../support/until.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const claimsOf = (sub: string, product = 'gps-basic'): AccessClaims =>
  ({ aud: 'partners', sub, scope: `product:${product}`, ver: 1, exp: T0 / 1000 + 1800, iat: T0 / 1000, iss: 'trailwire', jti: 'j' }) as AccessClaims;
const gps = (offsetSeconds = 0, timestamp = T0 / 1000 + offsetSeconds) => ({ timestamp, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 });

function rejectsWith(code: string, check: (error: { errors?: { path: string }[]; rateLimit?: unknown }) => void = () => {}) {
  return (error: unknown) => {
    assert.ok(isTrailwireError(error), `a TrailwireError, got ${String(error)}`);
    assert.equal(error.code, code);
    check(error as never);
    return true;
  };
}

describe('IntakeService', () => {
  let trailwire: Trailwire;
  const clock = new ManualClock(T0);
  before(async () => {
    const store = await openSqliteStore({ file: ':memory:' });
    trailwire = await createTrailwire({
      store,
      clock,
      products: builtInProducts,
      productLimits: { 'gps-basic': { requests: 2, windowSeconds: 60 } },
      intakeQueue: openSqliteIntakeQueue(store.db),
    });
  });
  after(() => trailwire.close());
  const accept = (input: { vin: string; body: unknown; claims?: AccessClaims; idempotencyKey?: string }) =>
    trailwire.intake!.service.accept({ claims: claimsOf('partner-1'), rawBody: JSON.stringify(input.body), ...input });

  it('stores the raw payload under the upper-cased VIN, the partner and the product of the token', async () => {
    const vin = uniqueVin();
    const raw = '{"timestamp": 1780315200, "position": {"latitude": 41.88, "longitude": -87.63}, "speedKph": 88.5, "bearingDeg": 271}';
    const accepted = await trailwire.intake!.service.accept({ claims: claimsOf('partner-1'), vin: vin.toLowerCase(), body: JSON.parse(raw), rawBody: raw });
    assert.equal(accepted.replayed, false);
    assert.deepEqual(accepted.rateLimit, { allowed: true, limit: 2, remaining: 1, resetSeconds: 60 });
    const stored = await trailwire.intake!.queue.get(accepted.record.id);
    assert.deepEqual(
      { ...stored, id: undefined },
      { id: undefined, partnerId: 'partner-1', product: 'gps-basic', vin, payload: raw, receivedAt: T0, idempotencyKey: null, status: 'queued', attempts: 0, nextAttemptAt: T0, processedAt: null, error: null },
    );
    assert.match(accepted.record.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a UUIDv7');
  });

  it('refuses a bad VIN, a payload off the schema, a token without an installed product and a malformed key, storing and counting nothing', async () => {
    const vin = uniqueVin();
    const depth = await trailwire.intake!.queue.depth();
    await assert.rejects(accept({ vin: 'TOO-SHORT', body: gps() }), rejectsWith('validation_failed', (e) => assert.equal(e.errors?.[0]?.path, '/vin')));
    await assert.rejects(accept({ vin: '1HGCM82643A004352', body: gps() }), rejectsWith('validation_failed', (e) => assert.match(JSON.stringify(e.errors), /check digit/)));
    await assert.rejects(
      accept({ vin, body: { ...gps(), speedKph: 'fast', extra: 1 } }),
      rejectsWith('validation_failed', (e) => assert.deepEqual(e.errors?.map((x) => x.path).sort(), ['/extra', '/speedKph'])),
    );
    await assert.rejects(accept({ vin, body: gps(), claims: claimsOf('partner-1', 'unknown-product') }), rejectsWith('forbidden'));
    await assert.rejects(accept({ vin, body: gps(), claims: { ...claimsOf('partner-1'), scope: undefined } }), rejectsWith('forbidden'));
    await assert.rejects(
      accept({ vin, body: gps(), idempotencyKey: 'has space' }),
      rejectsWith('validation_failed', (e) => assert.equal(e.errors?.[0]?.path, '/headers/idempotency-key')),
    );
    await assert.rejects(accept({ vin, body: gps(), idempotencyKey: 'k'.repeat(256) }), rejectsWith('validation_failed'));
    assert.equal(await trailwire.intake!.queue.depth(), depth);
    assert.equal((await accept({ vin, body: gps() })).rateLimit?.remaining, 1, 'none of the refusals used the window');
  });

  it('refuses a reading dated more than 5 minutes after its clock at the field that dates it, storing and counting nothing', async () => {
    const now = T0 + 5 * 3_600_000;
    clock.set(now);
    const iso = (ms: number) => new Date(ms).toISOString();
    const cases = [
      { product: 'gps-basic', path: '/timestamp', at: (ms: number) => gps(0, ms / 1000) },
      { product: 'tpms', path: '/readAt', at: (ms: number) => ({ readAt: iso(ms), sensors: [{ sensorId: 'S1', wheel: 'LF', pressurePsi: 100, temperatureC: 30 }] }) },
      { product: 'cargosafe', path: '/recordedAt', at: (ms: number) => ({ unitSerial: 'CS-1', recordedAt: iso(ms), door: 'closed', loadPercent: 50, temperatureC: 4, humidityPercent: 60 }) },
    ];
    for (const { product, path, at } of cases) {
      const vin = uniqueVin();
      const claims = claimsOf('partner-1', product);
      const depth = await trailwire.intake!.queue.depth();
      for (const lead of [MAX_READING_LEAD_MS + 1_000, MAX_READING_LEAD_MS + 1, 72 * 365 * 86_400_000])
        await assert.rejects(
          accept({ vin, body: at(now + lead), claims }),
          rejectsWith('validation_failed', (e) => {
            assert.deepEqual(e.errors?.map((x) => x.path), [path], `${product} ${lead} ms ahead`);
            assert.match(JSON.stringify(e.errors), /more than 5 minutes after the server's clock \(2026-06-01T17:00:00\.000Z\)/);
          }),
        );
      assert.equal(await trailwire.intake!.queue.depth(), depth, `${product}: nothing stored`);
      const accepted = await accept({ vin, body: at(now + MAX_READING_LEAD_MS), claims });
      assert.equal(accepted.record.status, 'queued', `${product}: exactly 5 minutes ahead is accepted`);
      assert.equal(accepted.rateLimit.remaining, accepted.rateLimit.limit - 1, `${product}: the refusals used none of the window`);
      await accept({ vin, body: at(now - 86_400_000), claims });
      assert.equal(await trailwire.intake!.queue.depth(), depth + 2, `${product}: a late reading is fine`);
    }
  });

  it('limits each (product, VIN) in its own fixed window', async () => {
    clock.set(T0 + 3_600_000);
    const vin = uniqueVin();
    await accept({ vin, body: gps() });
    await accept({ vin, body: gps() });
    await assert.rejects(
      accept({ vin, body: gps() }),
      rejectsWith('rate_limited', (e) => assert.deepEqual(e.rateLimit, { allowed: false, limit: 2, remaining: 0, resetSeconds: 60 })),
    );
    assert.equal((await accept({ vin: uniqueVin(), body: gps() })).rateLimit?.remaining, 1, 'another VIN has its own window');
    const tpms = { readAt: '2026-06-01T13:00:00Z', sensors: [{ sensorId: 'S1', wheel: 'LF', pressurePsi: 100, temperatureC: 30 }] };
    assert.equal((await accept({ vin, body: tpms, claims: claimsOf('partner-2', 'tpms') })).rateLimit?.limit, 30, 'another product has its own');
    clock.advance(60_000);
    assert.equal((await accept({ vin, body: gps() })).rateLimit?.remaining, 1, 'the next window starts afresh');
  });

  it('answers a repeated Idempotency-Key with the original payload, counting nothing, even with the window used up', async () => {
    clock.set(T0 + 2 * 3_600_000);
    const vin = uniqueVin();
    const first = await accept({ vin, body: gps(1), idempotencyKey: 'batch-42' });
    await accept({ vin, body: gps(2) });
    const again = await accept({ vin, body: gps(1), idempotencyKey: 'batch-42' });
    assert.equal(again.replayed, true);
    assert.equal(again.record.id, first.record.id);
    assert.deepEqual(again.rateLimit, { allowed: false, limit: 2, remaining: 0, resetSeconds: 60 }, 'a replay reports the window as it is, using none of it');
    const different = await accept({ vin, body: gps(3), claims: claimsOf('partner-2'), idempotencyKey: 'batch-42' }).catch((error: unknown) => error);
    assert.ok(isTrailwireError(different) && different.code === 'rate_limited', "another partner's key is its own, and so is counted");
  });

  it('lets one of several concurrent requests with one key store its payload; the others answer it', async () => {
    clock.set(T0 + 3 * 3_600_000);
    // The same payload sent twice at once (a client's retry racing its first try): one is stored.
    const vin = uniqueVin();
    const body = gps();
    const results = await Promise.all(Array.from({ length: 2 }, () => accept({ vin, body, idempotencyKey: 'race' })));
    assert.equal(results[0]!.record.id, results[1]!.record.id);
    assert.deepEqual(results.map((result) => result.replayed).sort(), [false, true]);
  });

  it("shows a partner the status of its own payloads only", async () => {
    clock.set(T0 + 4 * 3_600_000);
    const vin = uniqueVin();
    const { record } = await accept({ vin, body: gps() });
    assert.deepEqual(await trailwire.intake!.service.status('partner-1', record.id), {
      id: record.id,
      vin,
      product: 'gps-basic',
      status: 'queued',
      receivedAt: new Date(T0 + 4 * 3_600_000).toISOString(),
      processedAt: null,
      attempts: 0,
      error: null,
    });
    await assert.rejects(trailwire.intake!.service.status('partner-2', record.id), rejectsWith('not_found'));
    await assert.rejects(trailwire.intake!.service.status('partner-1', 'no-such-id'), rejectsWith('not_found'));
  });
});

describe("IntakeService's wake of the core's worker", () => {
  it('wakes an idle worker once the payload is committed, rather than at its idle poll', async () => {
    const store = await openSqliteStore({ file: ':memory:' });
    const queue = openSqliteIntakeQueue(store.db);
    // Seen from the queue: the worker has looked, found nothing and gone idle.
    let emptyReads = 0;
    const nextBatch = queue.nextBatch.bind(queue);
    queue.nextBatch = async (limit, now) => {
      const batch = await nextBatch(limit, now);
      if (batch === null) emptyReads++;
      return batch;
    };
    // Ten minutes of idle poll: only the wake processes the payload in time.
    const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: queue, worker: { idlePollMs: 600_000, lingerMs: 0 } });
    try {
      await trailwire.intake!.worker!.start();
      await until(() => emptyReads > 0, 'the worker to go idle', 5_000);
      const body = { ...gps(), timestamp: Math.floor(Date.now() / 1000) };
      const { record } = await trailwire.intake!.service.accept({ claims: claimsOf('partner-1'), vin: uniqueVin(), body, rawBody: JSON.stringify(body) });
      await until(async () => (await queue.get(record.id))?.status !== 'queued', 'the woken worker to take the payload', 5_000);
    } finally {
      await trailwire.intake!.worker!.stop();
      await trailwire.close();
    }
  });
});
