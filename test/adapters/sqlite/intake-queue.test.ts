/**
 * The SQLite intake log: the shared conformance suite on a fresh temporary file per case, then what
 * is SQLite's own — group commit, a 202 only after the commit and never a blocked event loop while
 * another connection writes, a batch as one transaction with the store's writes, the upgrade of a
 * file written by the previous (queue-table) version, and the query plans that keep a batch's cost
 * independent of how much the log keeps.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { applyMigrations, openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { attachIntakeLog, intakeLogFile, openSqliteIntakeQueue, QUEUE_COMPONENT, QUEUE_MIGRATIONS } from '../../../adapters/sqlite/intake-queue.ts';
import type { NewIntake } from '../../../core/intake-queue.ts';
import { INTAKE_TIME, newIntake } from '../../support/fixtures.ts';
import { runIntakeQueueConformance } from '../../conformance/intake-queue.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-queue-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;
const freshFile = (): string => join(directory, `queue-${++files}.db`);

runIntakeQueueConformance({
  name: 'sqlite (a temporary file per case)',
  async openQueue() {
    const store = await openSqliteStore({ file: freshFile() });
    return { queue: openSqliteIntakeQueue(store.db), close: () => store.close() };
  },
  // Two connections to one file: two processes sharing it.
  async openSharedQueues() {
    const file = freshFile();
    const [a, b] = [await openSqliteStore({ file }), await openSqliteStore({ file })];
    return {
      queues: [openSqliteIntakeQueue(a.db), openSqliteIntakeQueue(b.db)],
      close: async () => {
        await a.close();
        await b.close();
      },
    };
  },
});

const T0 = INTAKE_TIME;
const item = newIntake;

describe('SQLite intake queue', () => {
  it('writes the enqueues of one event-loop turn in one transaction, in call order, and says so once', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    let wakes = 0;
    const queue = openSqliteIntakeQueue(store.db, { onEnqueued: () => wakes++ });
    const groups: number[] = [];
    // White box: count the group transactions the queue runs.
    const internals = queue as unknown as { appendGroup: (items: NewIntake[], skipExisting: boolean) => unknown };
    const group = internals.appendGroup;
    internals.appendGroup = (items: NewIntake[], skipExisting: boolean) => (groups.push(items.length), group(items, skipExisting));
    const items = Array.from({ length: 20 }, (_, i) => item({ vin: i % 2 ? '1HGCM82633A004352' : '1M8GDM9AXKP042788' }));
    await Promise.all(items.map((entry) => queue.enqueue(entry)));
    assert.deepEqual(groups, [20]);
    assert.equal(wakes, 1);
    await Promise.all([queue.enqueue(item()), queue.enqueue(item({ idempotencyKey: 'k' }))]);
    assert.deepEqual(groups, [20, 2]);
    await queue.enqueue(item({ idempotencyKey: 'k' }));
    assert.equal(wakes, 2, 'a group that stored nothing new wakes nobody');
    const batch = await queue.nextBatch(100, T0);
    assert.deepEqual(
      batch!.entries.slice(0, 20).map((entry) => entry.id),
      items.map((entry) => entry.id),
    );
    await queue.abandonBatch(batch!);
    await store.close();
  });

  it('wakes its processing when a dead letter is requeued, as for a new payload, and not for a requeue that changed nothing', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    let wakes = 0;
    const queue = openSqliteIntakeQueue(store.db, { onEnqueued: () => wakes++ });
    const { record } = await queue.enqueue(item());
    const batch = await queue.nextBatch(10, T0);
    await queue.commitBatch(batch!, new Map([[batch!.entries[0]!.seq, { kind: 'failed', error: 'bad' }]]), T0);
    assert.equal(wakes, 1);
    assert.equal(await queue.requeue(record.id, T0 + 1), true);
    assert.equal(wakes, 2, 'the requeued payload is due: the processing is woken');
    assert.equal(await queue.requeue(record.id, T0 + 2), false);
    assert.equal(wakes, 2, 'nothing requeued, nobody woken');
    await store.close();
  });

  it("resolves an enqueue only once committed, and keeps the event loop free while another connection holds the log file's write lock", async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    const other = new Database(intakeLogFile(file));
    other.exec('BEGIN IMMEDIATE');
    let resolved = false;
    const pending = queue.enqueue(item()).then((result) => ((resolved = true), result));
    // The event loop keeps turning (timers fire) while the queue waits for the lock.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setTimeout(resolve, 2));
    assert.equal(resolved, false, 'no answer before the payload is stored');
    other.exec('COMMIT');
    const { record } = await pending;
    assert.equal(other.prepare('SELECT id FROM intake_log WHERE id = ?').pluck().get(record.id), record.id, 'another connection sees it');
    other.close();
    await store.close();
  });

  it("leaves the connection's busy timeout as the store set it", async () => {
    const store = await openSqliteStore({ file: freshFile(), busyTimeoutMs: 4321 });
    const queue = openSqliteIntakeQueue(store.db);
    await queue.enqueue(item());
    assert.equal(store.db.pragma('busy_timeout', { simple: true }), 4321, 'other writers on this connection still wait for the lock');
    await store.close();
  });

  it('batches the payloads it appended itself from memory, and never misses one another connection appended among or after them', async () => {
    const file = freshFile();
    const [a, b] = [await openSqliteStore({ file }), await openSqliteStore({ file })];
    const [queueA, queueB] = [openSqliteIntakeQueue(a.db), openSqliteIntakeQueue(b.db)];
    const ids = (batch: { entries: readonly { id: string }[] } | null) => batch?.entries.map((entry) => entry.id) ?? [];
    // A's own appends, then one of B's among A's, then one of B's after A's last.
    queueA.enqueueNow([item({ id: 'a1' }), item({ id: 'a2' })]);
    let batch = await queueA.nextBatch(10, T0);
    assert.deepEqual(ids(batch), ['a1', 'a2']);
    await queueA.commitBatch(batch!, new Map(batch!.entries.map((entry) => [entry.seq, { kind: 'processed' as const }])), T0);
    queueA.enqueueNow([item({ id: 'a3' })]);
    queueB.enqueueNow([item({ id: 'b1' })]);
    queueA.enqueueNow([item({ id: 'a4' })]);
    queueB.enqueueNow([item({ id: 'b2' })]);
    batch = await queueA.nextBatch(10, T0);
    assert.deepEqual(ids(batch), ['a3', 'b1', 'a4', 'b2'], 'every payload past the watermark, in log order');
    await queueA.commitBatch(batch!, new Map(batch!.entries.map((entry) => [entry.seq, { kind: 'processed' as const }])), T0);
    // A batch that was abandoned hands the same payloads out again.
    queueA.enqueueNow([item({ id: 'a5' })]);
    batch = await queueA.nextBatch(10, T0);
    await queueA.abandonBatch(batch!);
    batch = await queueA.nextBatch(10, T0);
    assert.deepEqual(ids(batch), ['a5']);
    await queueA.commitBatch(batch!, new Map(batch!.entries.map((entry) => [entry.seq, { kind: 'processed' as const }])), T0);
    // No gap among A's appends, but one of B's after them.
    queueA.enqueueNow([item({ id: 'a6' })]);
    queueB.enqueueNow([item({ id: 'b3' })]);
    assert.deepEqual(ids(await queueA.nextBatch(10, T0)), ['a6', 'b3']);
    await a.close();
    await b.close();
  });

  it('upgrades a file written by the queue-table version in place, keeping every payload and its status', async () => {
    const file = freshFile();
    const db = new Database(file);
    applyMigrations(db, QUEUE_COMPONENT, QUEUE_MIGRATIONS.slice(0, 2));
    const insert = db.prepare(
      `INSERT INTO intake_queue (id, partner_id, product, vin, payload, received_at, idempotency_key, status, attempts, next_attempt_at, processed_at, error)
       VALUES (?, 'p', 'gps-basic', ?, '{}', ?, ?, ?, ?, ?, ?, ?)`,
    );
    const [A, B] = ['1HGCM82633A004352', '1M8GDM9AXKP042788'];
    insert.run('done-1', A, T0, 'key-1', 'processed', 1, T0, T0 + 10, null);
    insert.run('queued-a1', A, T0 + 1, null, 'queued', 2, T0 + 500, null, 'boom');
    insert.run('failed-1', B, T0 + 2, null, 'failed', 5, T0, T0 + 20, 'poison');
    insert.run('processing-b', B, T0 + 3, null, 'processing', 1, T0, null, null);
    insert.run('queued-a2', A, T0 + 4, 'key-2', 'queued', 0, T0 + 4, null, null);
    db.close();

    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    const status = async (id: string) => {
      const record = await queue.get(id);
      return record && [record.status, record.attempts, record.error, record.processedAt];
    };
    assert.deepEqual(await status('done-1'), ['processed', 1, null, T0 + 10]);
    assert.deepEqual(await status('queued-a1'), ['queued', 2, 'boom', null]);
    assert.deepEqual(await status('failed-1'), ['failed', 5, 'poison', T0 + 20]);
    assert.deepEqual(await status('processing-b'), ['queued', 0, null, null], 'an interrupted attempt is not counted');
    assert.equal(await queue.depth(), 3);
    assert.equal((await queue.findByIdempotencyKey('p', 'key-2', 0))?.id, 'queued-a2', 'keys keep answering');
    assert.deepEqual((await queue.listFailed(10)).map((record) => record.id), ['failed-1']);
    const early = await queue.nextBatch(10, T0 + 499);
    assert.deepEqual(early?.entries.map((entry) => entry.id), ['processing-b'], "VIN A's payloads wait for the retry, in order");
    await queue.commitBatch(early!, new Map([[early!.entries[0]!.seq, { kind: 'processed' }]]), T0 + 499);
    const due = await queue.nextBatch(10, T0 + 500);
    assert.deepEqual(due?.entries.map((entry) => [entry.id, entry.attempts]), [['queued-a1', 2], ['queued-a2', 0]]);
    await queue.abandonBatch(due!);
    const appended = item({ vin: B });
    await queue.enqueue(appended);
    assert.equal((await queue.get(appended.id))?.status, 'queued', 'a new append lands past the watermark');
    await store.close();
  });

  it("numbers new payloads past the store's watermark when the log's file was lost or restored older: none is taken for processed", async () => {
    const file = freshFile();
    let store = await openSqliteStore({ file });
    let queue = openSqliteIntakeQueue(store.db);
    for (let i = 0; i < 3; i++) await queue.enqueue(item());
    const batch = await queue.nextBatch(10, T0);
    await queue.commitBatch(batch!, new Map(batch!.entries.map((entry) => [entry.seq, { kind: 'processed' as const }])), T0);
    await queue.purgeProcessed(T0 + 1, 100);
    await store.close();
    for (const lost of [intakeLogFile(file), `${intakeLogFile(file)}-wal`, `${intakeLogFile(file)}-shm`]) rmSync(lost, { force: true });

    store = await openSqliteStore({ file });
    queue = openSqliteIntakeQueue(store.db);
    const { record } = await queue.enqueue(item());
    assert.equal((await queue.get(record.id))?.status, 'queued', 'not below the watermark');
    assert.equal(await queue.depth(), 1);
    assert.deepEqual((await queue.nextBatch(10, T0))?.entries.map((entry) => entry.id), [record.id]);
    await store.close();
  });

  it("moves the log out of the store's file into its own (issue 38), once, even after a crash between the two files' commits", async () => {
    const file = freshFile();
    const db = new Database(file);
    applyMigrations(db, QUEUE_COMPONENT, QUEUE_MIGRATIONS);
    const insert = db.prepare(`INSERT INTO intake_log (seq, id, partner_id, product, vin, payload, received_at, idempotency_key) VALUES (?, ?, 'p', 'gps-basic', ?, '{}', ?, ?)`);
    insert.run(1, 'logged-1', '1HGCM82633A004352', T0, 'key-1');
    insert.run(2, 'logged-2', '1M8GDM9AXKP042788', T0 + 1, null);
    db.prepare(`INSERT INTO intake_idempotency VALUES ('p', 'key-1', 1, ?)`).run(T0);
    // An earlier start copied the first row into the log's file and ended before dropping the store's tables.
    attachIntakeLog(db);
    db.exec('INSERT INTO intake.intake_log SELECT * FROM main.intake_log WHERE seq = 1');
    db.close();

    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    assert.deepEqual(
      store.db.prepare('SELECT seq, id FROM intake.intake_log ORDER BY seq').all(),
      [{ seq: 1, id: 'logged-1' }, { seq: 2, id: 'logged-2' }],
      'each payload once, in its place',
    );
    assert.equal(store.db.prepare("SELECT count(*) FROM main.sqlite_master WHERE name IN ('intake_log', 'intake_idempotency')").pluck().get(), 0, "the store's copies are gone");
    assert.equal((await queue.findByIdempotencyKey('p', 'key-1', 0))?.id, 'logged-1', 'keys keep answering');
    assert.deepEqual((await queue.nextBatch(10, T0))?.entries.map((entry) => entry.id), ['logged-1', 'logged-2']);
    await store.close();
  });

  it('reads a batch by the sequence and the parked indexes, and a status by the id index, whatever the log keeps', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const queue = openSqliteIntakeQueue(store.db);
    const plan = (name: string, params: unknown) => {
      const statement = (queue as unknown as { sql: Record<string, { source: string }> }).sql[name]!;
      return (store.db.prepare(`EXPLAIN QUERY PLAN ${statement.source}`).all(params as never) as { detail: string }[])
        .map((row) => row.detail)
        .join('\n');
    };
    assert.match(plan('afterWatermark', [0, 1]), /SEARCH l USING INTEGER PRIMARY KEY \(rowid>\?\)/);
    assert.match(plan('dueParked', { now: 0, limit: 1 }), /SEARCH e USING (COVERING )?INDEX intake_parked_retry_by_vin \(vin=\? AND seq<\?\)/);
    assert.doesNotMatch(plan('dueParked', { now: 0, limit: 1 }), /SCAN l\b/);
    assert.match(plan('statusById', ['x']), /SEARCH l USING INDEX intake_log_by_id \(id=\?\)/);
    assert.match(plan('watermark', []), /SEARCH intake_batches|SCAN intake_batches|USING INTEGER PRIMARY KEY/);
    await store.close();
  });
});

describe('SQLite intake log: a batch is one transaction with the writes made in it', () => {
  it("commits the store's writes with the batch, rolls them back with an abandoned one, and lets no append join it", async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const queue = openSqliteIntakeQueue(store.db);
    const [first, second] = [item({ vin: '1HGCM82633A004352' }), item({ vin: '1M8GDM9AXKP042788' })];
    for (const entry of [first, second]) await queue.enqueue(entry);
    const write = (vin: string) =>
      store.applyTelemetryBatch([{ vin, at: T0, telemetry: { gps: [{ timestamp: T0, lat: 1, long: 2, speed: 3, heading: 'N' }], devices: [], cargosafe: [] } }]);

    let batch = await queue.nextBatch(10, T0);
    await write(first.vin);
    // An append while the batch is open waits for it, so it never commits (or rolls back) with it.
    const appended = item({ vin: '2T1BURHE0JC014709' });
    let stored = false;
    const appending = queue.enqueue(appended).then(() => (stored = true));
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(stored, false, 'the append waits while the batch is open');
    await queue.abandonBatch(batch!);
    assert.equal(store.db.inTransaction, false);
    assert.equal(await store.findTrailerByVin(first.vin), null, "the batch's write is rolled back with it");
    assert.equal((await queue.get(first.id))?.status, 'queued');
    await appending;
    assert.equal((await queue.get(appended.id))?.status, 'queued', 'the append is stored after all');

    batch = await queue.nextBatch(10, T0);
    assert.deepEqual(batch!.entries.map((entry) => entry.id), [first.id, second.id, appended.id]);
    await write(first.vin);
    await queue.commitBatch(batch!, new Map(batch!.entries.map((entry) => [entry.seq, { kind: 'processed' } as const])), T0 + 1);
    assert.notEqual(await store.findTrailerByVin(first.vin), null, 'committed with the batch');
    assert.equal((await queue.get(first.id))?.status, 'processed');
    await store.close();
  });

  it('answers no batch at once, without blocking the event loop, while another connection holds the write lock', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file, busyTimeoutMs: 5000 });
    const queue = openSqliteIntakeQueue(store.db);
    await queue.enqueue(item());
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    const started = performance.now();
    assert.equal(await queue.nextBatch(10, T0), null);
    assert.ok(performance.now() - started < 1000, 'it did not wait for the busy timeout');
    other.exec('COMMIT');
    other.close();
    const batch = await queue.nextBatch(10, T0);
    assert.equal(batch?.entries.length, 1);
    await queue.abandonBatch(batch!);
    await store.close();
  });
});
