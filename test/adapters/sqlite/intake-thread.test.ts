/**
 * The SQLite intake with its processing thread, through its front door (`openSqliteIntake`): what
 * the intake-queue conformance suite asks of accepting (every field stored and read back, idempotency
 * keys per partner across turns and within one, depth) with the thread beside it (the processing
 * itself is the SQLite log's, which passes the whole suite in intake-queue.test.ts); a payload is
 * answered once the log's file has it, and appends never wait for the store's write lock, which the
 * thread's batches hold; the thread processes, sends live updates back and stops cleanly; a thread
 * that dies is restarted and nothing accepted is lost, `/readyz`'s check saying so in between.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { openSqliteIntake, openSqliteStore, type SqliteIntake } from '../../../adapters/sqlite/index.ts';
import { IntakeThread } from '../../../adapters/sqlite/intake-thread.ts';
import { isProcessable } from '../../../core/intake-queue.ts';
import type { LiveTrailerEvent } from '../../../core/live-bus.ts';
import { createTrailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { newIntake, uniqueVin } from '../../support/fixtures.ts';
import { assertLateRegistrationRefused } from '../../support/late-registration.ts';
import { until } from '../../support/until.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-thread-'));
/** Every intake a test opens: a failed assertion must not leave a thread running and the file never ending. */
const opened: Array<{ stop(): Promise<void> }> = [];
after(async () => {
  await Promise.all(opened.map((intake) => intake.stop()));
  rmSync(directory, { recursive: true, force: true });
});
let files = 0;
const freshFile = (): string => join(directory, `thread-${++files}.db`);


const gpsPayload = (at = Math.floor(Date.now() / 1000)) => JSON.stringify({ timestamp: at, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 });

/** A core over a file's store, taking intake through the SQLite intake's front door. */
async function openServerCore(options: { productModules?: string[] } = {}) {
  const file = freshFile();
  const store = await openSqliteStore({ file });
  const events: LiveTrailerEvent[] = [];
  const logs: string[] = [];
  const counts = { processed: 0, failed: 0 };
  const intake = openSqliteIntake({
    store,
    productModules: options.productModules,
    worker: { lingerMs: 0 },
    onEvents: (batch) => events.push(...batch),
    onRound: (round) => ((counts.processed += round.processed), (counts.failed += round.failed)),
    log: (entry) => logs.push(entry.message),
  });
  const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: intake.queue, worker: false });
  await intake.start();
  const closable = {
    stop: async () => {
      await trailwire.close();
      await intake.stop();
    },
  };
  opened.push(closable);
  return { file, store, intake, trailwire, events, logs, counts, close: closable.stop };
}

describe('SQLite intake with its processing thread', () => {
  it('processes what the core accepts, sends live updates back, counts, and stops cleanly', async () => {
    const { trailwire, intake, events, counts, close } = await openServerCore();
    const { principal } = await trailwire.auth.createCustomer({ name: 'Threaded' });
    const fleet = await trailwire.admin.createFleet({ customerId: principal.id, name: 'F' });
    const vin = uniqueVin();
    await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    for (let i = 0; i < 3; i++) await intake.queue.enqueue(newIntake({ vin, payload: gpsPayload(Math.floor(Date.now() / 1000) - 10 + i), receivedAt: Date.now() }));
    await until(() => counts.processed === 3, 'three payloads processed', 10_000);
    await until(() => events.length > 0, 'a live update', 10_000);
    assert.equal(events.at(-1)!.trailer.vin, vin);
    assert.equal(await intake.queue.depth(), 0);
    for (const check of Object.values(intake.readinessChecks)) await check();
    await close();
  });

  it('answers a payload once the log has it, finds it at once, then processed', async () => {
    const { intake, close } = await openServerCore();
    const item = newIntake({ vin: uniqueVin(), payload: gpsPayload(), receivedAt: Date.now() });
    const result = await intake.queue.enqueue(item);
    assert.deepEqual([result.created, result.record.status], [true, 'queued']);
    assert.equal((await intake.queue.get(item.id))?.id, item.id, 'in the log as soon as it is answered');
    await until(async () => (await intake.queue.get(item.id))?.status === 'processed', 'processed', 10_000);
    await close();
  });

  it("appends while another connection holds the store file's write lock (as a batch does): the log is a file of its own", async () => {
    const { file, intake, close } = await openServerCore();
    const batch = new Database(file, { timeout: 0 });
    try {
      batch.exec('BEGIN IMMEDIATE');
      const item = newIntake({ vin: uniqueVin(), idempotencyKey: 'while-locked', payload: gpsPayload(), receivedAt: Date.now() });
      const answered = await Promise.race([intake.queue.enqueue(item), new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 2000))]);
      assert.notEqual(answered, 'waited', 'the append did not wait for the store lock');
      assert.equal(answered !== 'waited' && answered.created, true);
      batch.exec('ROLLBACK');
      await until(async () => (await intake.queue.get(item.id))?.status === 'processed', 'processed once the lock is let go', 10_000);
    } finally {
      batch.close();
      await close();
    }
  });

  it('stores every field, answers a key reused in a later turn with the original record (per partner), and counts what waits', async () => {
    const { intake, close } = await openServerCore();
    const vin = uniqueVin();
    const given = newIntake({ vin, idempotencyKey: 'order-7', payload: gpsPayload(), receivedAt: Date.now() });
    const { record, created } = await intake.queue.enqueue(given);
    assert.equal(created, true);
    const expected = { ...given, status: 'queued', attempts: 0, nextAttemptAt: given.receivedAt, processedAt: null, error: null };
    assert.deepEqual(record, expected);
    const { status: _status, attempts: _attempts, processedAt: _processedAt, ...stored } = (await intake.queue.get(given.id))!;
    const { status: _s, attempts: _a, processedAt: _p, ...expectedStored } = expected;
    assert.deepEqual(stored, expectedStored, 'read back with every field, staged or logged');
    const repeat = await intake.queue.enqueue(newIntake({ vin, idempotencyKey: 'order-7', payload: gpsPayload(), receivedAt: Date.now() }));
    assert.deepEqual([repeat.created, repeat.record.id, repeat.record.payload], [false, given.id, given.payload], 'the original record answers');
    assert.equal((await intake.queue.findByIdempotencyKey(given.partnerId, 'order-7', 0))?.id, given.id);
    const otherPartner = await intake.queue.enqueue(newIntake({ vin, partnerId: 'partner-2', idempotencyKey: 'order-7', payload: gpsPayload(), receivedAt: Date.now() }));
    assert.equal(otherPartner.created, true, 'keys are per partner');
    assert.ok((await intake.queue.depth()) <= 2, 'two stored, none twice');
    await until(async () => (await intake.queue.depth()) === 0 && (await intake.queue.get(otherPartner.record.id))?.status === 'processed', 'both processed', 10_000);
    await close();
  });

  it('wakes its idle thread after each commit, rather than at the idle poll', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    let settled = 0;
    // Ten minutes of idle poll: only the queue's wake processes a payload in time.
    const intake = openSqliteIntake({ store, worker: { idlePollMs: 600_000, lingerMs: 0 }, onRound: (round) => (settled += round.processed + round.failed) });
    opened.push(intake);
    await intake.start();
    const vin = uniqueVin();
    for (const expected of [1, 2]) {
      // The second payload comes after the thread's round that settled the first: the thread is idle, or about to be.
      await intake.queue.enqueue(newIntake({ vin, payload: gpsPayload(), receivedAt: Date.now() }));
      await until(() => settled === expected, `payload ${expected} settled by a woken thread`, 5_000);
    }
    await intake.stop();
    await store.close();
  });

  it('refuses to be given a core worker: its thread processes it', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const intake = openSqliteIntake({ store });
    await assert.rejects(createTrailwire({ store, products: builtInProducts, intakeQueue: intake.queue }), /no process role/);
    await intake.stop();
    await store.close();
  });

  it('keeps idempotency keys atomic within one turn: the second use of a key answers the first record', async () => {
    const { intake, close } = await openServerCore();
    const vin = uniqueVin();
    const [first, second] = await Promise.all([
      intake.queue.enqueue(newIntake({ vin, idempotencyKey: 'k-1', payload: gpsPayload(), receivedAt: Date.now() })),
      intake.queue.enqueue(newIntake({ vin, idempotencyKey: 'k-1', payload: gpsPayload(), receivedAt: Date.now() })),
    ]);
    assert.equal(first.created, true);
    assert.equal(second.created, false);
    assert.equal(second.record.id, first.record.id);
    await close();
  });

  it('loads the product modules it is given besides the built-in products', async () => {
    const { intake, counts, close } = await openServerCore({ productModules: [fileURLToPath(new URL('../../../examples/custom-product/index.ts', import.meta.url))] });
    const reefer = { reeferId: 'RF-1', reportedAt: new Date(Date.now() - 1000).toISOString(), setpointC: -18, returnAirC: -17, fuelPercent: 80 };
    await intake.queue.enqueue(newIntake({ product: 'reefer', vin: uniqueVin(), payload: JSON.stringify(reefer), receivedAt: Date.now() }));
    await intake.queue.enqueue(newIntake({ vin: uniqueVin(), payload: gpsPayload(), receivedAt: Date.now() }));
    await until(() => counts.processed === 2, 'both payloads', 10_000);
    await close();
  });

  it('restarts a thread that dies, says so in its readiness check meanwhile, and loses nothing accepted', { timeout: 60_000 }, async () => {
    const { intake, close, logs } = await openServerCore();
    const ids: string[] = [];
    const accept = async (n: number) => {
      const items = Array.from({ length: n }, () => newIntake({ vin: uniqueVin(), payload: gpsPayload(), receivedAt: Date.now() }));
      ids.push(...items.map((item) => item.id));
      await Promise.all(items.map((item) => intake.queue.enqueue(item)));
    };
    await accept(20);
    const killed = intake.killThread();
    await accept(20); // appended to the log while the thread ends and restarts
    await killed;
    const found = await intake.queue.getMany(ids);
    assert.deepEqual(ids.filter((id) => !found.has(id)), [], 'every accepted payload found while the thread is down');
    await assert.rejects(intake.readinessChecks['intake-thread']!(), /not running/);
    await until(async () => intake.readinessChecks['intake-thread']!().then(() => true, () => false), 'the thread restarted', 30_000);
    await accept(20);
    await until(async () => (await Promise.all(ids.map((id) => intake.queue.get(id)))).every((record) => record?.status === 'processed'), 'all 60 processed', 30_000);
    assert.ok(logs.some((line) => /intake thread exited/.test(line)), 'the restart is logged');
    await close();
  });

  it("times a thread's run by its clock: a run of a minute resets the restart delay, shorter ones double it", { timeout: 60_000 }, async () => {
    const file = freshFile();
    await (await openSqliteStore({ file })).close();
    let now = 0;
    const restarts: string[] = [];
    const thread = await IntakeThread.start({
      file,
      onEvents: () => {},
      restartDelayMs: 10,
      clock: { now: () => now },
      onLog: (entry) => void (/restarting in/.test(entry.message) && restarts.push(entry.message.replace(/.*restarting in /, ''))),
    });
    opened.push(thread);
    const killAndRestart = async () => {
      const before = restarts.length;
      await thread.kill();
      await until(() => restarts.length > before && thread.isRunning, 'the thread restarted', 30_000);
    };
    await killAndRestart();
    await killAndRestart();
    now += 60_000; // a minute by the thread's clock, however long the test takes
    await killAndRestart();
    assert.deepEqual(restarts, ['10 ms', '20 ms', '10 ms']);
    await thread.stop();
  });

  it('dead-letters a payload accepted before its VIN was registered to a customer that did not grant its partner (issue 37)', { timeout: 60_000 }, async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const events: LiveTrailerEvent[] = [];
    const intake = openSqliteIntake({ store, requireGrants: true, worker: { lingerMs: 0 }, onEvents: (batch) => events.push(...batch) });
    const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: intake.queue, worker: false, partnerIntake: { requireGrants: true } });
    opened.push({ stop: async () => (await trailwire.close(), await intake.stop()) });
    // The thread starts after the accept and the registration: the payload waits in the log meanwhile.
    let started: Promise<void> | undefined;
    const process = async (id: string) => {
      await (started ??= intake.start());
      await until(async () => ['processed', 'failed'].includes((await intake.queue.get(id))?.status ?? ''), 'the payload settled', 30_000);
    };
    await assertLateRegistrationRefused({ trailwire, process, published: () => events });
  });

  it('refuses a database it cannot share', async () => {
    await assert.rejects(IntakeThread.start({ file: ':memory:', onEvents: () => {} }), /in-memory database cannot be shared/);
    const store = await openSqliteStore({ file: ':memory:' });
    const intake: SqliteIntake = openSqliteIntake({ store });
    assert.equal(isProcessable(intake.queue), true, "an in-memory store's queue is processed by the core's worker on the event loop");
    await store.close();
  });
});
