/**
 * The intake worker over a real (in-memory SQLite) store and queue, with a manual clock: what it
 * writes and publishes, per-VIN order, retries with backoff, dead letters and the payloads they no
 * longer hold back, rounds as units of work (and rounds that fail), rounds ended early, settles that
 * fail, the concurrency bound, stopping, crash recovery, purging and option checks.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSqliteIntakeQueue } from '../../adapters/sqlite/intake-queue.ts';
import { openSqliteStore, type SqliteStore } from '../../adapters/sqlite/index.ts';
import { ManualClock } from '../../core/clock.ts';
import type { IntakeQueue, IntakeRecord } from '../../core/intake-queue.ts';
import { IntakeWorker, type IntakeWorkerDependencies, type IntakeWorkerOptions } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-hub.ts';
import { defineProduct } from '../../core/products.ts';
import type { TelemetryWriteStore } from '../../core/store.ts';
import { createTrailwire, type Trailwire } from '../../core/trailwire.ts';
import { builtInProducts } from '../../products/index.ts';
import { uniqueVin } from '../support/fixtures.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const HOUR = 3_600_000;

/** Fails for `n > 0` while `failing` is set: the dead-letter path. */
const control = { failing: true };
const flaky = defineProduct<{ n: number }>({
  name: 'flaky',
  description: 'A test product that fails on demand.',
  schema: { type: 'object', additionalProperties: false, required: ['n'], properties: { n: { type: 'integer' } } },
  limit: { requests: 100, windowSeconds: 60 },
  examples: [{ n: 0 }],
  transform(_vin, payload, receivedAt) {
    if (control.failing && payload.n > 0) throw new Error(`flaky refuses ${payload.n}`);
    return { gps: [{ timestamp: receivedAt + payload.n, lat: 1, long: 2, speed: 3, heading: 'N' }], devices: [], cargosafe: [] };
  },
});

interface Setup {
  store: SqliteStore;
  queue: IntakeQueue;
  trailwire: Trailwire;
  clock: ManualClock;
  events: LiveTrailerEvent[];
  worker: IntakeWorker;
  /** Enqueues a payload of `product` for `vin`, received now. */
  send(vin: string, payload: unknown, product?: string): Promise<string>;
  statusOf(id: string): Promise<IntakeRecord>;
  close(): Promise<void>;
}

let sent = 0;

async function setup(deps: Partial<IntakeWorkerDependencies> = {}, options: IntakeWorkerOptions = {}): Promise<Setup> {
  const store = await openSqliteStore({ file: ':memory:' });
  const queue = openSqliteIntakeQueue(store.db);
  const clock = new ManualClock(T0);
  const trailwire = await createTrailwire({ store, clock, products: [...builtInProducts, flaky], intakeQueue: queue });
  const events: LiveTrailerEvent[] = [];
  const worker = new IntakeWorker(
    { queue, store, products: trailwire.products, clock, publish: (event) => void events.push(event), ...deps },
    { retryBaseMs: 1000, ...options },
  );
  return {
    store,
    queue,
    trailwire,
    clock,
    events,
    worker,
    async send(vin, payload, product = 'flaky') {
      const id = `intake-${String(++sent).padStart(6, '0')}`;
      await queue.enqueue({ id, partnerId: 'p', product, vin, payload: JSON.stringify(payload), receivedAt: clock.now(), idempotencyKey: null });
      return id;
    },
    async statusOf(id) {
      const record = await queue.get(id);
      assert.ok(record, `intake ${id} exists`);
      return record;
    },
    async close() {
      await worker.stop();
      await trailwire.close();
    },
  };
}

async function fleetTrailer(trailwire: Trailwire, vin: string) {
  const { principal } = await trailwire.auth.createCustomer({ name: 'Customer' });
  const fleet = await trailwire.admin.createFleet({ customerId: principal.id, name: 'Fleet' });
  await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
  return { customerId: principal.id, fleet };
}

describe('IntakeWorker', () => {
  it('writes each payload, marks it processed and publishes trailers of a fleet, each VIN in arrival order', async () => {
    const s = await setup();
    const owned = uniqueVin();
    const unassigned = uniqueVin();
    const { customerId, fleet } = await fleetTrailer(s.trailwire, owned);
    const a1 = await s.send(owned, { n: 0 });
    s.clock.advance(1000);
    const b1 = await s.send(unassigned, { n: 0 });
    s.clock.advance(1000);
    const a2 = await s.send(owned, { n: 0 });
    s.clock.advance(5);
    assert.equal(await s.worker.drainDue(), 3);
    for (const id of [a1, b1, a2]) {
      const record = await s.statusOf(id);
      assert.equal(record.status, 'processed');
      assert.equal(record.processedAt, T0 + 2005);
      assert.equal(record.attempts, 1);
    }
    assert.deepEqual(
      s.events.map((event) => [event.customerId, event.fleet.id, event.trailer.vin, event.trailer.telemetry?.timestamp]),
      [
        [customerId, fleet.id, owned, T0],
        [customerId, fleet.id, owned, T0 + 2000],
      ],
      'one update per payload of the fleet trailer, in order; none for the unassigned VIN',
    );
    assert.equal((await s.store.findTrailerByVin(unassigned))?.fleetId, null, 'the unknown VIN became an unassigned trailer');
    assert.deepEqual(s.worker.counts, { processed: 3, failed: 0 });
    assert.equal(await s.worker.drainDue(), 0);
    await s.close();
  });

  it('retries with exponential backoff, then dead-letters with the reason; the VIN waits meanwhile, then moves on', async () => {
    const attempts: boolean[] = [];
    const s = await setup({ onAttemptFailed: (_record, _error, deadLettered) => void attempts.push(deadLettered) }, { maxAttempts: 3 });
    control.failing = true;
    const vin = uniqueVin();
    const bad = await s.send(vin, { n: 1 });
    const good = await s.send(vin, { n: 0 });
    await s.worker.drainDue();
    assert.deepEqual(await pick(s, bad), { status: 'queued', attempts: 1, nextAttemptAt: T0 + 1000, error: 'product "flaky" failed to transform the payload: flaky refuses 1' });
    assert.deepEqual(await pick(s, good), { status: 'queued', attempts: 0, nextAttemptAt: T0, error: null }, 'released untried behind it');
    s.clock.advance(999);
    assert.equal(await s.worker.drainDue(), 0, 'not before the backoff');
    s.clock.advance(1);
    await s.worker.drainDue();
    assert.deepEqual(await pick(s, bad), { status: 'queued', attempts: 2, nextAttemptAt: T0 + 3000, error: 'product "flaky" failed to transform the payload: flaky refuses 1' }, 'the delay doubles');
    s.clock.advance(2000);
    await s.worker.drainDue();
    const dead = await s.statusOf(bad);
    assert.equal(dead.status, 'failed');
    assert.equal(dead.attempts, 3);
    assert.match(dead.error!, /flaky refuses 1/);
    assert.equal((await s.statusOf(good)).status, 'processed', 'the dead letter holds the VIN back no more');
    assert.deepEqual(attempts, [false, false, true]);
    assert.deepEqual(s.worker.counts, { processed: 1, failed: 1 });
    assert.deepEqual(
      (await s.queue.listFailed(10)).map((record) => record.id),
      [bad],
    );
    await s.close();
  });

  it('runs each round in the unit of work; a round that fails as a whole publishes and counts nothing and is claimed again', async () => {
    let failNext = true;
    const s = await setup({
      unitOfWork: async (round) => {
        s.store.db.exec('BEGIN IMMEDIATE');
        try {
          const result = await round();
          if (failNext) throw new Error('disk full');
          s.store.db.exec('COMMIT');
          return result;
        } catch (error) {
          s.store.db.exec('ROLLBACK');
          throw error;
        }
      },
    });
    const vin = uniqueVin();
    await fleetTrailer(s.trailwire, vin);
    const id = await s.send(vin, { n: 0 });
    await assert.rejects(s.worker.drainDue(), /disk full/);
    assert.deepEqual(await pick(s, id), { status: 'queued', attempts: 0, nextAttemptAt: T0, error: null }, 'the claim was rolled back too');
    assert.equal((await s.store.findTrailerByVin(vin))?.telemetry, null, 'and the write');
    assert.deepEqual(s.events, []);
    assert.deepEqual(s.worker.counts, { processed: 0, failed: 0 });
    failNext = false;
    assert.equal(await s.worker.drainDue(), 1);
    assert.equal((await s.statusOf(id)).status, 'processed');
    assert.equal(s.events.length, 1);
    await s.close();
  });

  it('ends a round early when asked to yield, sending its untried payloads back to the queue', async () => {
    let asked = 0;
    const rounds: unknown[] = [];
    const s = await setup({ shouldYield: () => ++asked > 1 && asked <= 3, onRound: (summary) => void rounds.push(summary) });
    const ids = [await s.send(uniqueVin(), { n: 0 }), await s.send(uniqueVin(), { n: 0 }), await s.send(uniqueVin(), { n: 0 })];
    assert.equal(await s.worker.drainDue(), 5);
    assert.deepEqual(rounds, [
      { claimed: 3, processed: 1, retried: 2, failed: 0 },
      { claimed: 2, processed: 2, retried: 0, failed: 0 },
    ]);
    for (const id of ids) assert.equal((await s.statusOf(id)).attempts, 1, 'a payload sent back did not spend an attempt');
    await s.close();
  });

  it('keeps a payload processed when its live update cannot be published', async () => {
    const failures: unknown[] = [];
    const s = await setup({
      publish: () => Promise.reject(new Error('bus down')),
      onPublishFailed: (_event, error) => void failures.push(error),
    });
    const vin = uniqueVin();
    await fleetTrailer(s.trailwire, vin);
    const id = await s.send(vin, { n: 0 });
    await s.worker.drainDue();
    assert.equal((await s.statusOf(id)).status, 'processed');
    assert.match(String(failures[0]), /bus down/);
    await s.close();
  });

  it('settles a round whose settle failed before claiming again, so nothing stays processing', async () => {
    let failSettle = true;
    const base = await setup();
    const queue: IntakeQueue = Object.create(base.queue, {
      settle: {
        value: async (...args: Parameters<IntakeQueue['settle']>) => {
          if (failSettle) {
            failSettle = false;
            throw new Error('SQLITE_BUSY');
          }
          return base.queue.settle(...args);
        },
      },
    });
    const worker = new IntakeWorker({ queue, store: base.store, products: base.trailwire.products, clock: base.clock });
    const id = await base.send(uniqueVin(), { n: 0 });
    await assert.rejects(worker.drainDue(), /SQLITE_BUSY/);
    assert.equal((await base.statusOf(id)).status, 'processing');
    assert.equal(await worker.drainDue(), 0);
    assert.equal((await base.statusOf(id)).status, 'processed', 'settled without a second attempt');
    assert.equal((await base.statusOf(id)).attempts, 1);
    await base.close();
  });

  it('processes different VINs side by side up to `concurrency`, and one VIN one payload at a time', async () => {
    let inFlight = 0;
    let most = 0;
    const inFlightByVin = new Map<string, number>();
    let mostForOneVin = 0;
    const base = await setup();
    const slowStore: TelemetryWriteStore = {
      async applyTelemetry(batch) {
        inFlight++;
        most = Math.max(most, inFlight);
        inFlightByVin.set(batch.vin, (inFlightByVin.get(batch.vin) ?? 0) + 1);
        mostForOneVin = Math.max(mostForOneVin, inFlightByVin.get(batch.vin)!);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight--;
        inFlightByVin.set(batch.vin, inFlightByVin.get(batch.vin)! - 1);
        return base.store.applyTelemetry(batch);
      },
    };
    const worker = new IntakeWorker({ queue: base.queue, store: slowStore, products: base.trailwire.products, clock: base.clock }, { concurrency: 3 });
    const vins = Array.from({ length: 6 }, () => uniqueVin());
    for (let round = 0; round < 3; round++) for (const vin of vins) await base.send(vin, { n: 0 });
    assert.equal(await worker.drainDue(), 18);
    assert.equal(most, 3);
    assert.equal(mostForOneVin, 1);
    await base.close();
  });

  it('stops after the round in hand, leaving the rest queued and nothing in flight', async () => {
    const s = await setup({}, { batchSize: 2 });
    for (let i = 0; i < 10; i++) await s.send(uniqueVin(), { n: 0 });
    await s.worker.start();
    await s.worker.stop();
    assert.equal(s.worker.counts.processed, 2);
    assert.equal(await s.queue.depth(), 8);
    assert.equal(s.worker.isRunning, false);
    assert.deepEqual(
      (await s.queue.claim(100, T0)).map((record) => record.attempts),
      Array(8).fill(1),
      'the rest was never claimed',
    );
    await s.close();
  });

  it('does not lose a wake-up that comes while a round is in hand (a payload enqueued after its claim)', async () => {
    let sendDuringClaim: (() => Promise<void>) | undefined;
    const s = await setup(
      {
        queue: {
          ...({} as IntakeQueue),
          // The real queue, but the first empty claim lets a payload arrive (and notify) right after it read the queue.
          claim: async (limit, now) => {
            const claimed = await s.queue.claim(limit, now);
            if (claimed.length === 0 && sendDuringClaim) {
              const send = sendDuringClaim;
              sendDuringClaim = undefined;
              await send();
            }
            return claimed;
          },
          settle: (outcomes) => s.queue.settle(outcomes),
          recoverInFlight: () => s.queue.recoverInFlight(),
          purgeProcessed: (before, limit) => s.queue.purgeProcessed(before, limit),
        },
      },
      // Without the fix the payload would wait for this poll: far longer than the test.
      { idlePollMs: 600_000 },
    );
    const vin = uniqueVin();
    let id = '';
    sendDuringClaim = async () => {
      id = await s.send(vin, { n: 0 });
      s.worker.notify();
    };
    await s.worker.start();
    try {
      const deadline = Date.now() + 3_000;
      const processed = async () => id !== '' && (await s.statusOf(id)).status === 'processed';
      while (Date.now() < deadline && !(await processed())) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(await processed(), 'the payload enqueued during the round was processed without waiting for the idle poll');
    } finally {
      await s.close();
    }
  });

  it('takes up on start what a crashed worker left processing', async () => {
    const s = await setup();
    const ids = [await s.send(uniqueVin(), { n: 0 }), await s.send(uniqueVin(), { n: 0 })];
    await s.queue.claim(10, T0);
    await s.worker.start();
    for (let turn = 0; turn < 1000 && s.worker.counts.processed < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    for (const id of ids) assert.equal((await s.statusOf(id)).status, 'processed');
    await s.close();
  });

  it('purges payloads processed longer ago than the retention, keeping dead letters', async () => {
    const s = await setup({}, { maxAttempts: 1 });
    control.failing = true;
    const done = await s.send(uniqueVin(), { n: 0 });
    const dead = await s.send(uniqueVin(), { n: 1 });
    await s.worker.drainDue();
    s.clock.advance(24 * HOUR);
    await s.worker.start();
    await s.worker.stop();
    assert.equal((await s.statusOf(done)).status, 'processed', 'exactly 24 hours: kept');
    s.clock.advance(1);
    const later = new IntakeWorker({ queue: s.queue, store: s.store, products: s.trailwire.products, clock: s.clock });
    await later.start();
    await later.stop();
    assert.equal(await s.queue.get(done), null);
    assert.equal((await s.statusOf(dead)).status, 'failed');
    await s.close();
  });

  it('refuses bad options, naming the field', async () => {
    const base = await setup();
    const deps = { queue: base.queue, store: base.store, products: base.trailwire.products, clock: base.clock };
    assert.throws(() => new IntakeWorker(deps, { batchSize: 0 }), /`batchSize` must be a positive integer, got 0/);
    assert.throws(() => new IntakeWorker(deps, { retryBaseMs: 1.5 }), /`retryBaseMs`/);
    assert.throws(() => new IntakeWorker(deps, { retentionMs: HOUR }), /`retentionMs` must be at least 24 h/);
    assert.doesNotThrow(() => new IntakeWorker(deps, { concurrency: undefined }));
    await base.close();
  });
});

async function pick(s: Setup, id: string) {
  const { status, attempts, nextAttemptAt, error } = await s.statusOf(id);
  return { status, attempts, nextAttemptAt, error };
}
