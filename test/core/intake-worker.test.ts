/**
 * The intake worker over a real (in-memory SQLite) store and log, with a manual clock: what it
 * writes and publishes (one update per changed trailer per batch), per-VIN order, retries with
 * backoff, dead letters and the payloads they no longer hold back, payloads dated in the future,
 * batches that fail as a whole and batches where one payload cannot be written, stopping, wake-ups,
 * trimming and option checks.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSqliteIntakeQueue } from '../../adapters/sqlite/intake-queue.ts';
import { openSqliteStore, type SqliteStore } from '../../adapters/sqlite/index.ts';
import { ManualClock } from '../../core/clock.ts';
import type { IntakeRecord, ProcessableIntakeQueue as IntakeQueue } from '../../core/intake-queue.ts';
import { MAX_READING_LEAD_MS } from '../../core/canonical.ts';
import { IntakeWorker, type IntakeWorkerDependencies, type IntakeWorkerOptions, LINGER_FULL_AT, lingerAfter } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { TelemetryWriteStore } from '../../core/store.ts';
import { createTrailwire, type Trailwire } from '../../core/trailwire.ts';
import { builtInProducts } from '../../products/index.ts';
import { uniqueVin } from '../support/fixtures.ts';
import { flakyProduct } from '../support/flaky-product.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const HOUR = 3_600_000;

/** Fails for `n > 0` while `control.failing` is set: the dead-letter path. */
const { product: flaky, control } = flakyProduct();

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
  it('writes each payload, marks it processed and publishes the latest state of each changed fleet trailer once per batch', async () => {
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
      [[customerId, fleet.id, owned, T0 + 2000]],
      "one update for the fleet trailer, with its state after the batch (its VIN's payloads applied in order); none for the unassigned VIN",
    );
    assert.equal((await s.store.findTrailerByVin(unassigned))?.fleetId, null, 'the unknown VIN became an unassigned trailer');
    assert.deepEqual(s.worker.counts, { processed: 3, failed: 0 });
    assert.equal(await s.worker.drainDue(), 0);
    await s.close();
  });

  it('retries with exponential backoff, then dead-letters with the reason; the VIN waits meanwhile, then moves on', async () => {
    const attempts: Array<[number, boolean]> = [];
    const s = await setup({ onAttemptFailed: (_entry, attempt, _error, deadLettered) => void attempts.push([attempt, deadLettered]) }, { maxAttempts: 3 });
    control.failing = true;
    const vin = uniqueVin();
    const bad = await s.send(vin, { n: 1 });
    const good = await s.send(vin, { n: 0 });
    await s.worker.drainDue();
    assert.deepEqual(await pick(s, bad), { status: 'queued', attempts: 1, nextAttemptAt: T0 + 1000, error: 'product "flaky" failed to transform the payload: flaky refuses 1' });
    assert.deepEqual(await pick(s, good), { status: 'queued', attempts: 0, nextAttemptAt: T0, error: null }, 'held untried behind it');
    const later = await s.send(vin, { n: 0 });
    await s.worker.drainDue();
    assert.equal((await s.statusOf(later)).status, 'queued', 'a newer payload of the VIN waits too');
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
    assert.equal((await s.statusOf(later)).status, 'processed');
    assert.deepEqual(attempts, [[1, false], [2, false], [3, true]]);
    assert.deepEqual(s.worker.counts, { processed: 2, failed: 1 });
    assert.deepEqual((await s.queue.listFailed(10)).map((record) => record.id), [bad]);
    await s.close();
  });

  it('dead-letters at once a payload its transform dates more than the allowed lead after it was received', async () => {
    const s = await setup({}, { maxAttempts: 5 });
    control.failing = false;
    const vin = uniqueVin();
    const future = await s.send(vin, { n: MAX_READING_LEAD_MS + 1000 });
    const onTime = await s.send(vin, { n: MAX_READING_LEAD_MS });
    await s.worker.drainDue();
    const dead = await s.statusOf(future);
    assert.deepEqual([dead.status, dead.attempts], ['failed', 1], 'a retry cannot fix a clock');
    assert.match(dead.error!, /more than 5 minutes after the payload was received/);
    assert.equal((await s.statusOf(onTime)).status, 'processed', 'exactly the allowed lead is fine');
    assert.equal((await s.store.findTrailerByVin(vin))?.telemetry?.timestamp, T0 + MAX_READING_LEAD_MS);
    control.failing = true;
    await s.close();
  });

  it('a batch that fails as a whole is abandoned: nothing written, published or counted, and it is handed out again', async () => {
    let failCommit = true;
    const base = await setup();
    const queue = wrapQueue(base.queue, {
      commitBatch: async (...args) => {
        if (failCommit) {
          failCommit = false;
          throw new Error('disk full');
        }
        return base.queue.commitBatch(...args);
      },
    });
    const events: LiveTrailerEvent[] = [];
    const worker = new IntakeWorker({ queue, store: base.store, products: base.trailwire.products, clock: base.clock, publish: (event) => void events.push(event) });
    const vin = uniqueVin();
    await fleetTrailer(base.trailwire, vin);
    const id = await base.send(vin, { n: 0 });
    const unknownVin = uniqueVin();
    const unknown = await base.send(unknownVin, { n: 0 });
    await assert.rejects(worker.drainDue(), /disk full/);
    assert.deepEqual(await pick(base, id), { status: 'queued', attempts: 0, nextAttemptAt: T0, error: null });
    assert.equal((await base.store.findTrailerByVin(vin))?.telemetry, null, 'the write was rolled back with the batch');
    assert.equal(await base.store.findTrailerByVin(unknownVin), null, 'and so was the trailer it created');
    assert.deepEqual(events, []);
    assert.deepEqual(worker.counts, { processed: 0, failed: 0 });
    assert.equal(await worker.drainDue(), 2);
    assert.deepEqual(await pick(base, id), { status: 'processed', attempts: 1, nextAttemptAt: T0, error: null });
    assert.equal((await base.statusOf(unknown)).status, 'processed', 'the unknown VIN gets its trailer on the second try');
    assert.equal(events.length, 1);
    await base.close();
  });

  it('finds the one payload a batch cannot write: the others are processed, it is retried and its VIN waits', async () => {
    const base = await setup();
    const [good, bad] = [uniqueVin(), uniqueVin()];
    const poisoned = T0 + 7;
    const calls: number[] = [];
    const store: TelemetryWriteStore = {
      applyTelemetry: (item) => base.store.applyTelemetry(item),
      async applyTelemetryBatch(items) {
        calls.push(items.length);
        if (items.some((item) => item.telemetry.gps.some((fix) => fix.timestamp === poisoned))) throw new Error('constraint failed');
        return base.store.applyTelemetryBatch(items);
      },
    };
    const worker = new IntakeWorker({ queue: base.queue, store, products: base.trailwire.products, clock: base.clock }, { retryBaseMs: 1000 });
    control.failing = false;
    const ids = [await base.send(good, { n: 0 }), await base.send(bad, { n: 0 }), await base.send(bad, { n: 7 }), await base.send(bad, { n: 9 }), await base.send(good, { n: 1 })];
    assert.equal(await worker.drainDue(), 5);
    const statuses = await Promise.all(ids.map(async (id) => (await base.statusOf(id)).status));
    assert.deepEqual(statuses, ['processed', 'processed', 'queued', 'queued', 'processed'], 'only the culprit and what follows it in its VIN wait');
    assert.match((await base.statusOf(ids[2]!)).error!, /constraint failed/);
    assert.deepEqual(calls, [5, 2, 3, 1, 1], 'the batch, then each VIN, then the failing VIN payload by payload');
    assert.equal((await base.store.findTrailerByVin(bad))?.telemetry?.timestamp, T0, 'its VIN stopped before the culprit');
    control.failing = true;
    await base.close();
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

  it("publishes a batch's live updates in order without waiting for each one's answer (issue 41)", async () => {
    // Each publish is answered only once every update of the batch was handed to the bus: a worker
    // that awaited them one at a time (a round trip each) would never finish this batch.
    const published: string[] = [];
    const answers: Array<() => void> = [];
    const s = await setup({
      publish: (event) => {
        published.push(event.trailer.vin);
        return new Promise<void>((resolve) => {
          answers.push(resolve);
          if (answers.length === 3) for (const answer of answers) answer();
        });
      },
    });
    const vins = [uniqueVin(), uniqueVin(), uniqueVin()];
    for (const vin of vins) await fleetTrailer(s.trailwire, vin);
    for (const vin of vins) await s.send(vin, { n: 0 });
    assert.equal(await s.worker.drainDue(), 3);
    assert.deepEqual(published, vins, 'one update per trailer, in the order of the batch');
    await s.close();
  });

  it('stops after the batch in hand, leaving the rest queued', async () => {
    const s = await setup({}, { batchSize: 2 });
    for (let i = 0; i < 10; i++) await s.send(uniqueVin(), { n: 0 });
    await s.worker.start();
    await s.worker.stop();
    assert.equal(s.worker.counts.processed, 2);
    assert.equal(await s.queue.depth(), 8);
    assert.equal(s.worker.isRunning, false);
    const rest = await s.queue.nextBatch(100, T0);
    assert.deepEqual(rest?.entries.map((entry) => entry.attempts), Array(8).fill(0), 'the rest was never attempted');
    await s.queue.abandonBatch(rest!);
    await s.close();
  });

  it('does not lose a wake-up that comes while a batch is being read (a payload appended after the read)', async () => {
    let sendDuringRead: (() => Promise<void>) | undefined;
    const base = await setup();
    const queue = wrapQueue(base.queue, {
      // The real log, but the first empty read lets a payload arrive (and notify) right after it.
      nextBatch: async (limit, now) => {
        const batch = await base.queue.nextBatch(limit, now);
        if (batch === null && sendDuringRead) {
          const send = sendDuringRead;
          sendDuringRead = undefined;
          await send();
        }
        return batch;
      },
    });
    // Without the fix the payload would wait for this poll: far longer than the test.
    const worker = new IntakeWorker({ queue, store: base.store, products: base.trailwire.products, clock: base.clock }, { idlePollMs: 600_000 });
    const vin = uniqueVin();
    let id = '';
    sendDuringRead = async () => {
      id = await base.send(vin, { n: 0 });
      worker.notify();
    };
    await worker.start();
    try {
      const deadline = Date.now() + 3_000;
      const processed = async () => id !== '' && (await base.statusOf(id)).status === 'processed';
      while (Date.now() < deadline && !(await processed())) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(await processed(), 'the payload appended during the read was processed without waiting for the idle poll');
    } finally {
      await worker.stop();
      await base.close();
    }
  });

  it('trims payloads processed longer ago than the retention, keeping dead letters', async () => {
    const s = await setup({}, { maxAttempts: 1 });
    control.failing = true;
    const done = await s.send(uniqueVin(), { n: 0 });
    const dead = await s.send(uniqueVin(), { n: 1 });
    const last = await s.send(uniqueVin(), { n: 0 });
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
    assert.equal(await s.queue.get(last), null, "the log's newest payload goes too");
    const next = await s.send(uniqueVin(), { n: 0 });
    assert.equal((await s.statusOf(next)).status, 'queued', 'a later payload never takes a trimmed seq (it would count as processed)');
    await s.close();
  });

  it('refuses bad options, naming the field', async () => {
    const base = await setup();
    const deps = { queue: base.queue, store: base.store, products: base.trailwire.products, clock: base.clock };
    assert.throws(() => new IntakeWorker(deps, { batchSize: 0 }), /`batchSize` must be a positive integer, got 0/);
    assert.throws(() => new IntakeWorker(deps, { retryBaseMs: 1.5 }), /`retryBaseMs`/);
    assert.throws(() => new IntakeWorker(deps, { retentionMs: HOUR }), /`retentionMs` must be at least 24 h/);
    assert.doesNotThrow(() => new IntakeWorker(deps, { batchSize: undefined }));
    await base.close();
  });
});

/** The queue with some methods replaced, the others calling through. */
function wrapQueue(queue: IntakeQueue, overrides: Partial<IntakeQueue>): IntakeQueue {
  const methods = ['enqueue', 'findByIdempotencyKey', 'get', 'getMany', 'nextBatch', 'commitBatch', 'abandonBatch', 'listFailed', 'requeue', 'purgeProcessed', 'depth'] as const;
  return Object.fromEntries(methods.map((name) => [name, overrides[name] ?? (queue[name] as (...args: never[]) => unknown).bind(queue)])) as unknown as IntakeQueue;
}

async function pick(s: Setup, id: string) {
  const { status, attempts, nextAttemptAt, error } = await s.statusOf(id);
  return { status, attempts, nextAttemptAt, error };
}

describe('the linger before a batch', () => {
  it('grows with the last batch: a light load waits a millisecond, a full one the whole linger, 0 reads at once', () => {
    assert.equal(lingerAfter(0, 20), 1, 'after an idle wait: a millisecond for the neighbours of the payload that woke it');
    assert.equal(lingerAfter(10, 20), 2, "ten payloads (LiveFeed's light load) earn two");
    assert.equal(lingerAfter(LINGER_FULL_AT / 2, 20), 10);
    assert.equal(lingerAfter(LINGER_FULL_AT, 20), 20, 'a batch of LINGER_FULL_AT earns the whole linger');
    assert.equal(lingerAfter(2048, 20), 20, 'never more than the setting');
    assert.equal(lingerAfter(2048, 0), 0, 'lingerMs 0 reads at once');
    assert.equal(lingerAfter(0, 0), 0);
  });
});
