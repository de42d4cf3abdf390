/**
 * The SQLite intake queue: the shared conformance suite on a fresh temporary file per case, then
 * what is SQLite's own — group commit, a 202 only after the commit and never a blocked event loop
 * while another connection writes, the upgrade of a file written before the claim indexes, and the
 * query plan behind a claim whose cost does not grow with the number of processed payloads.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { applyMigrations, openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { openSqliteIntakeQueue, QUEUE_COMPONENT, QUEUE_MIGRATIONS } from '../../../adapters/sqlite/intake-queue.ts';
import type { NewIntake } from '../../../core/intake-queue.ts';
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

const T0 = Date.UTC(2026, 5, 1);
let next = 0;
const item = (overrides: Partial<NewIntake> = {}): NewIntake => ({
  id: `intake-${++next}`,
  partnerId: 'p',
  product: 'gps-basic',
  vin: '1HGCM82633A004352',
  payload: '{}',
  receivedAt: T0,
  idempotencyKey: null,
  ...overrides,
});

describe('SQLite intake queue', () => {
  it('writes the enqueues of one event-loop turn in one transaction, in call order, and says so once', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    let wakes = 0;
    const queue = openSqliteIntakeQueue(store.db, { onEnqueued: () => wakes++ });
    const groups: number[] = [];
    // White box: count the group transactions the queue runs.
    const internals = queue as unknown as { enqueueGroup: { immediate(items: NewIntake[]): unknown } };
    const group = internals.enqueueGroup;
    internals.enqueueGroup = { immediate: (items: NewIntake[]) => (groups.push(items.length), group.immediate(items)) };
    const items = Array.from({ length: 20 }, (_, i) => item({ vin: i % 2 ? '1HGCM82633A004352' : '1M8GDM9AXKP042788' }));
    await Promise.all(items.map((entry) => queue.enqueue(entry)));
    assert.deepEqual(groups, [20]);
    assert.equal(wakes, 1);
    await Promise.all([queue.enqueue(item()), queue.enqueue(item({ idempotencyKey: 'k' }))]);
    assert.deepEqual(groups, [20, 2]);
    await queue.enqueue(item({ idempotencyKey: 'k' }));
    assert.equal(wakes, 2, 'a group that stored nothing new wakes nobody');
    const claimed = await queue.claim(100, T0);
    assert.deepEqual(
      claimed.slice(0, 20).map((record) => record.id),
      items.map((entry) => entry.id),
    );
    await store.close();
  });

  it('resolves an enqueue only once committed, and keeps the event loop free while another connection holds the write lock', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    let resolved = false;
    const pending = queue.enqueue(item()).then((result) => ((resolved = true), result));
    // The event loop keeps turning (timers fire) while the queue waits for the lock.
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setTimeout(resolve, 2));
    assert.equal(resolved, false, 'no answer before the payload is stored');
    other.exec('COMMIT');
    const { record } = await pending;
    assert.equal(other.prepare('SELECT status FROM intake_queue WHERE id = ?').pluck().get(record.id), 'queued', 'another connection sees it');
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

  it('upgrades a file written with the first schema, keeping its payloads claimable', async () => {
    const file = freshFile();
    const db = new Database(file);
    applyMigrations(db, QUEUE_COMPONENT, QUEUE_MIGRATIONS.slice(0, 1));
    db.prepare(
      `INSERT INTO intake_queue (id, partner_id, product, vin, payload, received_at, idempotency_key, status, next_attempt_at)
       VALUES ('old-1', 'p', 'gps-basic', '1HGCM82633A004352', '{}', ?, NULL, 'queued', ?)`,
    ).run(T0, T0);
    db.close();
    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    assert.deepEqual(
      (await queue.claim(10, T0)).map((record) => record.id),
      ['old-1'],
    );
    await store.close();
  });

  it('claims through the index of queued rows, whatever number of processed payloads the table keeps', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const queue = openSqliteIntakeQueue(store.db);
    const plan = (name: string) => {
      const statement = (queue as unknown as { sql: Record<string, { source: string }> }).sql[name]!;
      return (store.db.prepare(`EXPLAIN QUERY PLAN ${statement.source}`).all({ now: 0, limit: 1 }) as { detail: string }[])
        .map((row) => row.detail)
        .join('\n');
    };
    // Without the ready index a claim read every processed payload ever kept (the table scan).
    assert.match(plan('claim'), /SCAN q USING INDEX intake_ready/);
    assert.match(plan('claim'), /SEARCH e USING COVERING INDEX intake_unfinished_by_vin \(vin=\? AND seq<\?\)/);
    assert.doesNotMatch(plan('claim'), /SCAN intake_queue\b(?! USING)/);
    await store.close();
  });
});

describe('SQLite intake queue: the round view (a whole round in one transaction)', () => {
  it('runs a round in one transaction: committed when it returns, rolled back as a whole when it throws', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const queue = openSqliteIntakeQueue(store.db);
    const round = queue.roundView();
    const inRound = queue.roundTransaction();
    const [kept, lost] = [item({ vin: 'VIN-A' }), item({ vin: 'VIN-B' })];
    for (const entry of [kept, lost]) await queue.enqueue(entry);
    await assert.rejects(
      inRound(async () => {
        await round.claim(10, T0);
        await round.settle([{ id: lost.id, kind: 'processed', at: T0 + 1 }]);
        throw new Error('the round failed');
      }),
      /the round failed/,
    );
    assert.equal(store.db.inTransaction, false);
    assert.equal((await queue.get(lost.id))?.status, 'queued', 'a failed round leaves nothing behind');
    const answer = await inRound(async () => {
      await round.claim(10, T0);
      await round.settle([{ id: kept.id, kind: 'processed', at: T0 + 1 }, { id: lost.id, kind: 'processed', at: T0 + 1 }]);
      return 'done';
    });
    assert.equal(answer, 'done');
    for (const entry of [kept, lost]) assert.equal((await queue.get(entry.id))?.status, 'processed');
    await store.close();
  });

  it('claims without marking, settles each payload straight to its outcome with the attempt counted, and leaves everything queued when the round rolls back', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    const queue = openSqliteIntakeQueue(store.db);
    const round = queue.roundView();
    const [first, second, other] = [item({ vin: 'VIN-A' }), item({ vin: 'VIN-A' }), item({ vin: 'VIN-B' })];
    for (const entry of [first, second, other]) await queue.enqueue(entry);
    await assert.rejects(round.claim(10, T0), /outside the round's transaction/);

    store.db.exec('BEGIN IMMEDIATE');
    const claimed = await round.claim(10, T0);
    assert.deepEqual(claimed.map((record) => [record.id, record.status, record.attempts]), [
      [first.id, 'processing', 1],
      [second.id, 'processing', 1],
      [other.id, 'processing', 1],
    ]);
    await round.settle([
      { id: first.id, kind: 'retry', error: 'boom', nextAttemptAt: T0 + 1000 },
      { id: second.id, kind: 'released' },
      { id: other.id, kind: 'processed', at: T0 + 5 },
    ]);
    store.db.exec('ROLLBACK');
    for (const entry of [first, second, other]) assert.deepEqual(pick(await queue.get(entry.id)), { status: 'queued', attempts: 0, error: null });

    store.db.exec('BEGIN IMMEDIATE');
    await round.claim(10, T0);
    await round.settle([
      { id: first.id, kind: 'retry', error: 'boom', nextAttemptAt: T0 + 1000 },
      { id: second.id, kind: 'released' },
      { id: other.id, kind: 'processed', at: T0 + 5 },
    ]);
    store.db.exec('COMMIT');
    assert.deepEqual(pick(await queue.get(first.id)), { status: 'queued', attempts: 1, error: 'boom' });
    assert.deepEqual(pick(await queue.get(second.id)), { status: 'queued', attempts: 0, error: null });
    assert.deepEqual(pick(await queue.get(other.id)), { status: 'processed', attempts: 1, error: null });

    // VIN A's first payload waits for its retry, so neither it nor the payload behind it is due.
    store.db.exec('BEGIN IMMEDIATE');
    assert.deepEqual(await round.claim(10, T0 + 500), []);
    const due = await round.claim(10, T0 + 1000);
    assert.deepEqual(due.map((record) => [record.id, record.attempts]), [[first.id, 2], [second.id, 1]]);
    await round.settle([{ id: first.id, kind: 'failed', error: 'boom again', at: T0 + 1001 }, { id: second.id, kind: 'processed', at: T0 + 1002 }]);
    store.db.exec('COMMIT');
    assert.deepEqual(pick(await queue.get(first.id)), { status: 'failed', attempts: 2, error: 'boom again' });
    assert.deepEqual(pick(await queue.get(second.id)), { status: 'processed', attempts: 1, error: null });
    await store.close();
  });
});

function pick(record: { status: string; attempts: number; error: string | null } | null) {
  return record && { status: record.status, attempts: record.attempts, error: record.error };
}
