/**
 * Intake processing in a worker thread: it writes what the main thread accepts (durably, before the
 * enqueue resolves, idempotency keys included), processes it, wakes on notify, sends live updates and
 * counts back, stops cleanly; while it is not running, the main thread writes enqueues itself. With
 * the intake journal, a payload is answered once the journal has it, found while staged, and never
 * lost when the thread ends before it answers or cannot store it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { openSqliteIntakeQueue } from '../../../adapters/sqlite/intake-queue.ts';
import { IntakeThread, type IntakeThreadLog } from '../../../adapters/sqlite/intake-thread.ts';
import { ThreadedIntakeQueue } from '../../../adapters/sqlite/threaded-intake-queue.ts';
import { IntakeJournal } from '../../../adapters/sqlite/intake-journal.ts';
import { encodeIntakeGroup } from '../../../adapters/sqlite/intake-group-codec.ts';
import Database from 'better-sqlite3';
import type { LiveTrailerEvent } from '../../../core/live-hub.ts';
import { createTrailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { uniqueVin } from '../../support/fixtures.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-thread-'));
/** Every thread a test starts: a failed assertion must not leave one running and the file never ending. */
const started: IntakeThread[] = [];
after(async () => {
  await Promise.all(started.map((thread) => thread.stop()));
  rmSync(directory, { recursive: true, force: true });
});
const startThread = async (options: Parameters<typeof IntakeThread.start>[0]): Promise<IntakeThread> => {
  const thread = await IntakeThread.start(options);
  started.push(thread);
  return thread;
};
let files = 0;
const freshFile = (): string => join(directory, `thread-${++files}.db`);

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('IntakeThread', () => {
  it('processes what the main thread queues, wakes on notify, sends live updates back and stops cleanly', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    let thread: IntakeThread | undefined;
    const local = openSqliteIntakeQueue(store.db, { onEnqueued: () => thread?.notify() });
    const queue = new ThreadedIntakeQueue(local);
    const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: queue });
    const { principal } = await trailwire.auth.createCustomer({ name: 'Threaded' });
    const fleet = await trailwire.admin.createFleet({ customerId: principal.id, name: 'F' });
    const vin = uniqueVin();
    await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    const events: LiveTrailerEvent[] = [];
    const logs: IntakeThreadLog[] = [];
    const claims = { aud: 'partners', sub: 'partner-1', scope: 'product:gps-basic', ver: 1 } as never;
    const send = (seconds: number) => {
      const body = { timestamp: 1780315200 + seconds, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 };
      return trailwire.intake!.service.accept({ claims, vin, body, rawBody: JSON.stringify(body) });
    };
    const first = await send(0);
    // A long idle poll: only a notify can get the later payloads processed within the test's time.
    thread = await startThread({ file, worker: { idlePollMs: 600_000 }, onEvents: (batch) => events.push(...batch), onLog: (entry) => logs.push(entry) });
    queue.attach(thread);
    assert.equal(thread.isRunning, true);
    await until(() => thread!.counts.processed === 1, 'the payload queued before the start');
    const later = await Promise.all([send(1), send(2), send(3)]);
    await until(() => thread!.counts.processed === 4, 'the payloads queued after a notify');
    for (const { record } of [first, ...later]) assert.equal((await queue.get(record.id))?.status, 'processed');
    const seen = events.map((event) => event.trailer.telemetry?.timestamp);
    assert.equal(seen[0], 1780315200 * 1000, 'the first batch: the first payload');
    assert.equal(seen.at(-1), (1780315200 + 3) * 1000, "the last update carries the trailer's latest state");
    assert.deepEqual([...seen].sort(), seen, 'updates in order (one per trailer per batch: the three later payloads may share one)');
    assert.equal(events[0]!.customerId, principal.id);
    await thread.stop();
    assert.equal(thread.isRunning, false);
    const afterStop = await send(4);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal((await queue.get(afterStop.record.id))?.status, 'queued', 'a stopped thread processes nothing');
    assert.deepEqual(logs, []);
    await trailwire.close();
  });

  it('loads the product modules it is given besides the built-in products', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    const reefer = { reeferId: 'RF-1', reportedAt: '2026-06-01T12:00:00Z', setpointC: -18, returnAirC: -17, fuelPercent: 80 };
    const gps = { timestamp: 1780315200, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 };
    for (const [id, product, payload] of [['reefer-1', 'reefer', reefer], ['gps-1', 'gps-basic', gps]] as const)
      await queue.enqueue({ id, partnerId: 'p', product, vin: uniqueVin(), payload: JSON.stringify(payload), receivedAt: Date.now(), idempotencyKey: null });
    const thread = await startThread({
      file,
      productModules: ['./examples/custom-product/index.ts'],
      cwd: fileURLToPath(new URL('../../../', import.meta.url)),
      onEvents: () => {},
    });
    await until(() => thread.counts.processed === 2, 'both payloads');
    await thread.stop();
    await store.close();
  });

  it('refuses a database it cannot share', async () => {
    await assert.rejects(IntakeThread.start({ file: ':memory:', onEvents: () => {} }), /in-memory database cannot be shared/);
  });
});

describe('IntakeThread as the intake writer', () => {
  const gps = (seconds: number) =>
    JSON.stringify({ timestamp: 1780315200 + seconds, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 });
  const item = (id: string, vin: string, seconds: number, idempotencyKey: string | null = null) => ({
    id,
    partnerId: 'p',
    product: 'gps-basic',
    vin,
    payload: gps(seconds),
    receivedAt: Date.now(),
    idempotencyKey,
  });

  it('resolves an enqueue only once the payload is committed, and keeps idempotency keys atomic within a group', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const queue = new ThreadedIntakeQueue(openSqliteIntakeQueue(store.db));
    // The thread does not process here (an idle poll it never reaches): only its writes are looked at.
    const thread = await startThread({ file, worker: { idlePollMs: 600_000 }, onEvents: () => {} });
    queue.attach(thread);
    const vin = uniqueVin();
    const [first, replay, second] = await Promise.all([
      queue.enqueue(item('a', vin, 0, 'key-1')),
      queue.enqueue(item('b', vin, 1, 'key-1')),
      queue.enqueue(item('c', vin, 2)),
    ]);
    assert.equal(first.created, true);
    // Only a replay's record crosses back from the thread; a new payload's is built from the item,
    // and must be the stored one as it was stored (the thread may have processed it since).
    const { status, attempts, nextAttemptAt, processedAt, error, ...stored } = (await queue.get('a'))!;
    assert.deepEqual(first.record, { ...stored, status: 'queued', attempts: 0, nextAttemptAt: stored.receivedAt, processedAt: null, error: null });
    assert.ok(status === 'queued' || status === 'processed', status);
    assert.deepEqual({ created: replay.created, id: replay.record.id }, { created: false, id: 'a' }, 'the same key in the same group answers the first');
    assert.deepEqual(replay.record, first.record);
    assert.equal(second.created, true);
    // Another connection (another process, after a crash) sees what was acknowledged.
    const reader = new Database(file, { readonly: true });
    const ids = reader.prepare('SELECT id FROM intake_log ORDER BY seq').all().map((row) => (row as { id: string }).id);
    reader.close();
    assert.deepEqual(ids, ['a', 'c']);
    await thread.stop();
    await store.close();
  });

  it('lets the main thread write enqueues itself while the thread is stopped', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const queue = new ThreadedIntakeQueue(openSqliteIntakeQueue(store.db));
    const thread = await startThread({ file, onEvents: () => {} });
    queue.attach(thread);
    await thread.stop();
    const { record, created } = await queue.enqueue(item('after-stop', uniqueVin(), 0));
    assert.equal(created, true);
    assert.equal((await queue.get(record.id))?.status, 'queued');
    await assert.rejects(thread.enqueue(encodeIntakeGroup([item('direct', uniqueVin(), 0)])), /not running/);
    await store.close();
  });

  const logIds = (file: string): string[] => {
    const reader = new Database(file, { readonly: true });
    try {
      return reader.prepare('SELECT id FROM intake_log ORDER BY seq').all().map((row) => (row as { id: string }).id);
    } finally {
      reader.close();
    }
  };
  const openJournal = (file: string): IntakeJournal => {
    const journal = IntakeJournal.open(file);
    journal.clear();
    return journal;
  };
  /** A queue with a journal on a fresh file, and `enqueue` standing in for the thread as the queue sees it. */
  const journaledQueue = async (enqueue: IntakeThread['enqueue']) => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const local = openSqliteIntakeQueue(store.db);
    const journal = openJournal(file);
    const logs: string[] = [];
    const queue = new ThreadedIntakeQueue(local, { journal, onLog: (entry) => logs.push(entry.message) });
    queue.attach({ isRunning: true, enqueue } as unknown as IntakeThread);
    return { file, store, local, journal, logs, queue };
  };

  it('with a journal, answers a payload once the journal has it, finds it while staged, and lets the journal go once the log has it', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const journal = openJournal(file);
    const queue = new ThreadedIntakeQueue(openSqliteIntakeQueue(store.db), { journal });
    const thread = await startThread({ file, worker: { idlePollMs: 600_000 }, onEvents: () => {} });
    queue.attach(thread);
    // Another connection holds the write lock: the thread cannot append until it is released.
    const blocker = new Database(file);
    blocker.exec('BEGIN IMMEDIATE');
    const vin = uniqueVin();
    let keyedSettled = false;
    const keyed = queue.enqueue(item('k1', vin, 2, 'key-1')).finally(() => (keyedSettled = true));
    const answers = await Promise.all([queue.enqueue(item('s1', vin, 0)), queue.enqueue(item('s2', vin, 1))]);
    assert.deepEqual(answers.map((answer) => [answer.record.id, answer.created, answer.record.status]), [['s1', true, 'queued'], ['s2', true, 'queued']]);
    assert.deepEqual(logIds(file), [], 'answered before the log has them');
    assert.equal((await queue.get('s2'))?.status, 'queued', 'the status endpoint finds a staged payload');
    assert.equal(await queue.depth(), 3);
    assert.equal(journal.unconfirmedGroups, 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(keyedSettled, false, 'a payload with an Idempotency-Key waits for the log, which alone knows the key');
    blocker.exec('COMMIT');
    blocker.close();
    assert.equal((await keyed).created, true);
    await until(() => journal.unconfirmedGroups === 0, 'the thread to confirm the group');
    assert.deepEqual(logIds(file), ['k1', 's1', 's2'], 'one group, in arrival order');
    assert.equal((await queue.get('s1'))?.id, 's1');
    await thread.stop();
    journal.close();
    await store.close();
  });

  it('appends here, in order, the groups of a thread that ended before it answered, skipping what it had appended', async () => {
    // The thread ends before it answers: it had appended the first payload.
    const { file, store, local, journal, queue } = await journaledQueue(() => Promise.reject(new Error('the intake thread ended')));
    const vin = uniqueVin();
    const first = item('e1', vin, 0);
    local.enqueueNow([first]);
    const answers = await Promise.all([queue.enqueue(first), queue.enqueue(item('e2', vin, 1, 'key-2')), queue.enqueue(item('e3', vin, 2))]);
    assert.deepEqual(answers.map((answer) => answer.created), [true, true, true]);
    await until(() => journal.unconfirmedGroups === 0, 'the group to be confirmed');
    assert.deepEqual(logIds(file), ['e1', 'e2', 'e3']);
    assert.equal((await queue.findByIdempotencyKey('p', 'key-2', 0))?.id, 'e2');
    journal.close();
    await store.close();
  });

  it('answers through the thread when the journal cannot take a group (a full disk), saying so', async () => {
    let answer: (outcomes: null) => void = () => {};
    const { store, journal, logs, queue } = await journaledQueue(() => new Promise((resolve) => (answer = resolve)));
    journal.close(); // every append now fails, as on a full disk
    let settled = false;
    const accepted = queue.enqueue(item('j1', uniqueVin(), 0)).finally(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(settled, false, 'not answered before the thread has stored it');
    assert.match(logs[0] ?? '', /the intake journal could not be written; 202s wait for the intake log/);
    answer(null);
    assert.equal((await accepted).created, true);
    await store.close();
  });

  it('keeps in the journal, for the next start, an acknowledged payload the thread could not store', async () => {
    const { file, store, journal, logs, queue } = await journaledQueue(async () => [{ created: true }, { error: 'disk I/O error' }]);
    const lost = item('f2', uniqueVin(), 1);
    const answers = await Promise.all([queue.enqueue(item('f1', uniqueVin(), 0)), queue.enqueue(lost)]);
    assert.deepEqual(answers.map((answer) => answer.created), [true, true], 'both were acknowledged from the journal');
    await until(() => logs.length > 0, 'the error to be told');
    assert.match(logs[0]!, /1 acknowledged payloads could not be appended .* the intake journal keeps them/);
    assert.equal((await queue.get('f2'))?.status, 'queued', 'still staged');
    assert.equal(journal.unconfirmedGroups, 1);
    journal.close();
    const reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered.flat().map((entry) => entry.id), ['f1', 'f2']);
    reopened.close();
    await store.close();
  });
});
