/**
 * The conformance suite every `IntakeQueue` passes (SQLite and PostgreSQL): what the 202 promises
 * (a stored record with every field), idempotency keys (per partner, 24 hours, exclusive), batches
 * (arrival order, per-VIN order, a retry holding its VIN's later payloads back — unless the batch
 * takes the retry too — and a dead letter not), every outcome and the status derived from it (one payload's, and many read together),
 * abandoned batches, dead letters listed and re-queued, trimming and depth; and, for a log that
 * several processes share, two instances working through one VIN's payloads at once without ever
 * running two of them together or out of order.
 * A test file calls `runIntakeQueueConformance(...)` once per implementation, naming a reason for
 * any skipped case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  IDEMPOTENCY_WINDOW_MS,
  type IntakeBatch,
  type IntakeOutcome,
  type ProcessableIntakeQueue as IntakeQueue,
  type IntakeRecord,
  type NewIntake,
} from '../../core/intake-queue.ts';

export type IntakeQueueCase =
  | 'stores what it is given'
  | 'idempotency keys'
  | 'batches in arrival order'
  | 'keeps each VIN in order'
  | 'holds a VIN only behind retries outside the batch'
  | 'commits every outcome'
  | 'reads many statuses together'
  | 'abandoned batches come back'
  | 'dead letters'
  | 'trims processed payloads'
  | 'concurrent enqueues'
  | 'instances sharing a log keep each VIN in order';

export interface IntakeQueueConformanceOptions {
  /** Names the implementation in the test titles. */
  name: string;
  /** A fresh, empty queue per case, and how to close it. */
  openQueue(): Promise<{ queue: IntakeQueue; close(): Promise<void> }>;
  /**
   * Two instances on one fresh, empty queue, as two processes would open it, and how to close them.
   * Without it, the sharing case is skipped, saying so (right for an implementation that lives in
   * one process only).
   */
  openSharedQueues?(): Promise<{ queues: readonly [IntakeQueue, IntakeQueue]; close(): Promise<void> }>;
  /** Cases this implementation skips, each with the reason. */
  skip?: Partial<Record<IntakeQueueCase, string>>;
}

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const VIN_A = '1HGCM82633A004352';
const VIN_B = '1M8GDM9AXKP042788';
const VIN_C = '2T1BURHE0JC014709';

const PROCESSED: IntakeOutcome = { kind: 'processed' };
const HELD: IntakeOutcome = { kind: 'held' };

/** Registers the suite's cases with `node:test`. */
export function runIntakeQueueConformance(options: IntakeQueueConformanceOptions): void {
  const caseOf = (name: IntakeQueueCase, body: (queue: IntakeQueue) => Promise<void>) => {
    it(name, { skip: options.skip?.[name] ?? false }, async () => {
      const { queue, close } = await options.openQueue();
      try {
        await body(queue);
      } finally {
        await close();
      }
    });
  };
  let next = 0;
  const item = (overrides: Partial<NewIntake> = {}): NewIntake => ({
    id: `intake-${String(++next).padStart(6, '0')}`,
    partnerId: 'partner-1',
    product: 'gps-basic',
    vin: VIN_A,
    payload: JSON.stringify({ n: next }),
    receivedAt: T0,
    idempotencyKey: null,
    ...overrides,
  });
  /**
   * Enqueues one at a time, so arrival order is the order given; answers the items with the ids the
   * queue gave them (a log engine's id carries the payload's position).
   */
  const enqueueAll = async (queue: IntakeQueue, items: NewIntake[]) => {
    const enqueued: NewIntake[] = [];
    for (const entry of items) enqueued.push({ ...entry, id: (await queue.enqueue(entry)).record.id });
    return enqueued;
  };
  const statusOf = async (queue: IntakeQueue, id: string) => (await queue.get(id))?.status;
  /** Opens a batch and answers its ids (the batch stays open). */
  const open = async (queue: IntakeQueue, limit: number, now: number) => {
    const batch = await queue.nextBatch(limit, now);
    return { batch, ids: batch ? batch.entries.map((entry) => entry.id) : [] };
  };
  /** Commits `batch` with outcomes given by id. */
  const commit = (queue: IntakeQueue, batch: IntakeBatch | null, byId: Record<string, IntakeOutcome>, now = T0) => {
    assert.ok(batch, 'a batch to commit');
    const outcomes = new Map<number, IntakeOutcome>();
    for (const entry of batch.entries) if (byId[entry.id]) outcomes.set(entry.seq, byId[entry.id]!);
    return queue.commitBatch(batch, outcomes, now);
  };
  /** Opens a batch at `now` and commits every payload of it as processed; answers its ids. */
  const processAll = async (queue: IntakeQueue, now = T0) => {
    const { batch, ids } = await open(queue, 100, now);
    if (batch) await commit(queue, batch, Object.fromEntries(ids.map((id) => [id, PROCESSED])), now);
    return ids;
  };

  describe(`IntakeQueue conformance: ${options.name}`, () => {
    caseOf('stores what it is given', async (queue) => {
      const given = item({ idempotencyKey: 'key-1', payload: '{"text":"é ✓ \\u0000"}' });
      const { record, created } = await queue.enqueue(given);
      assert.equal(created, true);
      assert.ok(record.id.startsWith(given.id), "the id given, or the queue's own that begins with it");
      const expected: IntakeRecord = { ...given, id: record.id, status: 'queued', attempts: 0, nextAttemptAt: T0, processedAt: null, error: null };
      assert.deepEqual(record, expected);
      assert.deepEqual(await queue.get(record.id), expected, 'read back with every field');
      assert.equal(await queue.get('no-such-intake'), null);
      assert.equal(await queue.depth(), 1);
      const { batch } = await open(queue, 10, T0);
      assert.deepEqual(
        batch?.entries.map(({ seq, ...entry }) => (assert.ok(Number.isSafeInteger(seq)), entry)),
        [{ id: record.id, partnerId: given.partnerId, product: given.product, vin: given.vin, payload: given.payload, receivedAt: T0, attempts: 0 }],
        'handed out with every field',
      );
      await queue.abandonBatch(batch!);
    });

    caseOf('idempotency keys', async (queue) => {
      const [first] = await enqueueAll(queue, [item({ idempotencyKey: 'order-7' })]);
      const repeat = await queue.enqueue(item({ idempotencyKey: 'order-7', receivedAt: T0 + IDEMPOTENCY_WINDOW_MS - 1 }));
      assert.equal(repeat.created, false);
      assert.equal(repeat.record.id, first!.id, 'the original record answers');
      assert.equal(repeat.record.payload, first!.payload, 'with its payload, to compare');
      assert.equal(await queue.depth(), 1, 'nothing more is stored');
      const otherPartner = await queue.enqueue(item({ idempotencyKey: 'order-7', partnerId: 'partner-2' }));
      assert.equal(otherPartner.created, true, 'keys are per partner');
      const later = await queue.enqueue(item({ idempotencyKey: 'order-7', receivedAt: T0 + IDEMPOTENCY_WINDOW_MS }));
      assert.equal(later.created, true, 'exactly 24 hours later the key is new again');
      const found = await queue.findByIdempotencyKey('partner-1', 'order-7', T0 + IDEMPOTENCY_WINDOW_MS - 1);
      assert.equal(found?.id, later.record.id, 'the key now names the newer payload');
      assert.equal(await queue.findByIdempotencyKey('partner-1', 'order-7', T0 + IDEMPOTENCY_WINDOW_MS), null, 'since is exclusive');
      assert.equal(await queue.findByIdempotencyKey('partner-3', 'order-7', 0), null);
    });

    caseOf('batches in arrival order', async (queue) => {
      const [a, b, c] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_C })]);
      const first = await open(queue, 2, T0);
      assert.deepEqual(first.ids, [a!.id, b!.id], 'oldest first, up to the limit');
      const seqs = first.batch!.entries.map((entry) => entry.seq);
      assert.ok(seqs[0]! < seqs[1]!, 'seq follows arrival');
      assert.ok(['queued', 'processing'].includes((await statusOf(queue, a!.id))!), 'in a batch in hand: queued or processing');
      await commit(queue, first.batch, { [a!.id]: PROCESSED, [b!.id]: PROCESSED }, T0 + 7);
      assert.deepEqual(pick(await queue.get(a!.id)), { status: 'processed', attempts: 1, processedAt: T0 + 7, error: null, nextAttemptAt: T0 });
      assert.equal(await statusOf(queue, c!.id), 'queued');
      assert.equal(await queue.depth(), 1);
      const [d] = await enqueueAll(queue, [item({ vin: VIN_A })]);
      assert.deepEqual(await processAll(queue), [c!.id, d!.id]);
      assert.equal(await queue.nextBatch(10, T0), null, 'nothing left: no batch');
      assert.equal(await queue.depth(), 0);
    });

    caseOf('keeps each VIN in order', async (queue) => {
      const [a1, b1, a2, a3] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_A }), item({ vin: VIN_A })]);
      const first = await open(queue, 10, T0);
      assert.deepEqual(first.ids, [a1!.id, b1!.id, a2!.id, a3!.id], "several of one VIN, in the VIN's order");
      // a1 is to be retried: a2 is held behind it, and a3, without an outcome, is held too.
      await commit(queue, first.batch, { [a1!.id]: { kind: 'retry', error: 'boom', nextAttemptAt: T0 + 1000 }, [a2!.id]: HELD, [b1!.id]: PROCESSED });
      assert.deepEqual(pick(await queue.get(a1!.id)), { status: 'queued', attempts: 1, processedAt: null, error: 'boom', nextAttemptAt: T0 + 1000 });
      assert.deepEqual(pick(await queue.get(a3!.id)), { status: 'queued', attempts: 0, processedAt: null, error: null, nextAttemptAt: T0 });
      assert.equal(await queue.depth(), 3);
      const [a4, b2] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B })]);
      const early = await open(queue, 10, T0 + 999);
      assert.deepEqual(early.ids, [b2!.id], 'VIN A waits for the retry, also with its newer payload; VIN B does not');
      await commit(queue, early.batch, { [b2!.id]: PROCESSED });
      assert.equal(await statusOf(queue, a4!.id), 'queued', 'the payload behind the retry is not processed');
      const due = await open(queue, 10, T0 + 1000);
      assert.deepEqual(due.ids, [a1!.id, a2!.id, a3!.id, a4!.id], 'the retry comes due, and the rest of its VIN follows in order');
      assert.deepEqual(due.batch!.entries.map((entry) => entry.attempts), [1, 0, 0, 0], 'a held payload spent no attempt');
      // A dead letter no longer holds its VIN back.
      await commit(queue, due.batch, { [a1!.id]: { kind: 'failed', error: 'still boom' } }, T0 + 1000);
      assert.equal(await statusOf(queue, a1!.id), 'failed');
      assert.deepEqual(await processAll(queue, T0 + 1000), [a2!.id, a3!.id, a4!.id]);
      assert.equal(await statusOf(queue, a4!.id), 'processed');
      assert.equal(await queue.depth(), 0);
    });

    caseOf('holds a VIN only behind retries outside the batch', async (queue) => {
      const [a1, b1] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B })]);
      const first = await open(queue, 10, T0);
      await commit(queue, first.batch, { [a1!.id]: { kind: 'retry', error: 'boom', nextAttemptAt: T0 + 1000 }, [b1!.id]: PROCESSED });
      const [a2] = await enqueueAll(queue, [item({ vin: VIN_A })]);
      const due = await open(queue, 10, T0 + 1000);
      assert.deepEqual(due.ids, [a1!.id, a2!.id], "the VIN's retry, then its newer payload in the same batch: nothing of the VIN waits outside it");
      // Two retries of VIN A now, the first due before the second.
      await commit(queue, due.batch, { [a1!.id]: { kind: 'retry', error: 'boom', nextAttemptAt: T0 + 2000 }, [a2!.id]: { kind: 'retry', error: 'bang', nextAttemptAt: T0 + 5000 } }, T0 + 1000);
      const [a3, b2] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B })]);
      const partly = await open(queue, 10, T0 + 2000);
      assert.deepEqual(partly.ids, [a1!.id, b2!.id], "the due retry goes; the VIN's newer payload waits behind the retry that is not due");
      await commit(queue, partly.batch, { [a1!.id]: PROCESSED, [b2!.id]: PROCESSED }, T0 + 2000);
      assert.deepEqual(pick(await queue.get(a3!.id)), { status: 'queued', attempts: 0, processedAt: null, error: null, nextAttemptAt: T0 });
      assert.equal(await queue.nextBatch(10, T0 + 4999), null, 'VIN A waits for its second retry');
      const last = await open(queue, 10, T0 + 5000);
      assert.deepEqual(last.ids, [a2!.id, a3!.id], 'then follows it, in order');
      assert.deepEqual(last.batch!.entries.map((entry) => entry.attempts), [1, 0]);
      await commit(queue, last.batch, { [a2!.id]: PROCESSED, [a3!.id]: PROCESSED }, T0 + 5000);
      assert.equal(await queue.depth(), 0);
    });

    caseOf('commits every outcome', async (queue) => {
      const [p, r, f] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_C })]);
      const { batch } = await open(queue, 10, T0);
      await commit(queue, batch, { [p!.id]: PROCESSED, [r!.id]: { kind: 'retry', error: 'transient', nextAttemptAt: T0 + 2000 }, [f!.id]: { kind: 'failed', error: 'poison' } }, T0 + 5);
      assert.deepEqual(pick(await queue.get(p!.id)), { status: 'processed', attempts: 1, processedAt: T0 + 5, error: null, nextAttemptAt: T0 });
      assert.deepEqual(pick(await queue.get(r!.id)), { status: 'queued', attempts: 1, processedAt: null, error: 'transient', nextAttemptAt: T0 + 2000 });
      assert.deepEqual(pick(await queue.get(f!.id)), { status: 'failed', attempts: 1, processedAt: T0 + 5, error: 'poison', nextAttemptAt: T0 });
      assert.equal(await queue.depth(), 1, 'only the retry is still to do');
      assert.equal(await queue.nextBatch(10, T0 + 1999), null, 'the retry is not due yet');
      const retry = await open(queue, 10, T0 + 2000);
      assert.deepEqual(retry.ids, [r!.id]);
      await commit(queue, retry.batch, { [r!.id]: PROCESSED }, T0 + 2001);
      assert.deepEqual(pick(await queue.get(r!.id)), { status: 'processed', attempts: 2, processedAt: T0 + 2001, error: null, nextAttemptAt: T0 + 2000 });
      assert.equal(await queue.depth(), 0);
    });

    caseOf('reads many statuses together', async (queue) => {
      const [p, r, f, q, behind] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_C }), item({ vin: VIN_A }), item({ vin: VIN_B })]);
      const first = await open(queue, 3, T0);
      await commit(queue, first.batch, { [p!.id]: PROCESSED, [r!.id]: { kind: 'retry', error: 'transient', nextAttemptAt: T0 + 2000 }, [f!.id]: { kind: 'failed', error: 'poison' } }, T0 + 5);
      const inHand = await open(queue, 1, T0 + 5);
      assert.deepEqual(inHand.ids, [q!.id]);
      const ids = [p, r, f, q, behind].map((entry) => entry!.id);
      const together = await queue.getMany([...ids, 'no-such-intake', ids[0]!]);
      assert.deepEqual([...together.keys()].sort(), [...ids].sort(), 'each known id once; the unknown one absent');
      for (const id of ids) assert.deepEqual(together.get(id), await queue.get(id), 'read as `get` reads it, every field');
      assert.deepEqual(
        ids.map((id) => together.get(id)!.status),
        ['processed', 'queued', 'failed', together.get(q!.id)!.status, 'queued'],
        'processed, to be retried, a dead letter, in a batch in hand, behind a retry',
      );
      assert.ok(['queued', 'processing'].includes(together.get(q!.id)!.status));
      assert.equal((await queue.getMany([])).size, 0);
      await queue.abandonBatch(inHand.batch!);
    });

    caseOf('abandoned batches come back', async (queue) => {
      const [a, b] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B })]);
      const first = await open(queue, 1, T0);
      assert.deepEqual(first.ids, [a!.id]);
      await queue.abandonBatch(first.batch!);
      assert.equal(await statusOf(queue, a!.id), 'queued');
      const again = await open(queue, 10, T0);
      assert.deepEqual(again.ids, [a!.id, b!.id], 'handed out again, still first');
      assert.equal(again.batch!.entries[0]!.attempts, 0, 'the abandoned attempt is not counted');
      await queue.abandonBatch(again.batch!);
      assert.deepEqual(await processAll(queue), [a!.id, b!.id]);
    });

    caseOf('dead letters', async (queue) => {
      const [first, second, ok] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_C })]);
      const { batch } = await open(queue, 10, T0);
      await commit(queue, batch, { [second!.id]: { kind: 'failed', error: 'two' }, [first!.id]: { kind: 'failed', error: 'one' }, [ok!.id]: PROCESSED }, T0 + 3);
      assert.deepEqual((await queue.listFailed(10)).map((record) => record.id), [first!.id, second!.id], 'oldest (by arrival) first');
      const [listed] = await queue.listFailed(1);
      assert.deepEqual(pick(listed ?? null), { status: 'failed', attempts: 1, processedAt: T0 + 3, error: 'one', nextAttemptAt: T0 });
      assert.equal(listed!.payload, first!.payload, 'with its payload');
      assert.equal(await queue.requeue(first!.id, T0 + 5000), true);
      assert.deepEqual(pick(await queue.get(first!.id)), { status: 'queued', attempts: 0, processedAt: null, error: 'one', nextAttemptAt: T0 + 5000 });
      assert.equal(await queue.requeue(first!.id, T0 + 5000), false, 'only a failed item re-queues');
      assert.equal(await queue.requeue(ok!.id, T0), false);
      assert.equal(await queue.requeue('no-such-intake', T0), false);
      assert.equal(await queue.depth(), 1);
      assert.equal(await queue.nextBatch(10, T0 + 4999), null);
      assert.deepEqual(await processAll(queue, T0 + 5000), [first!.id]);
      assert.equal(await statusOf(queue, first!.id), 'processed');
      assert.deepEqual((await queue.listFailed(10)).map((record) => record.id), [second!.id]);
    });

    caseOf('trims processed payloads', async (queue) => {
      const [old1, old2, recent, failed, retried, queued] = await enqueueAll(queue, [
        item({ vin: VIN_A }),
        item({ vin: VIN_B }),
        item({ vin: VIN_C }),
        item({ vin: VIN_A, receivedAt: T0 + 1 }),
        item({ vin: VIN_B, receivedAt: T0 + 1 }),
        item({ vin: VIN_C, receivedAt: T0 + 1 }),
      ]);
      const one = await open(queue, 2, T0);
      await commit(queue, one.batch, { [old1!.id]: PROCESSED, [old2!.id]: PROCESSED }, T0 + 10);
      const two = await open(queue, 3, T0 + 1);
      assert.deepEqual(two.ids, [recent!.id, failed!.id, retried!.id]);
      await commit(queue, two.batch, { [recent!.id]: PROCESSED, [failed!.id]: { kind: 'failed', error: 'x' }, [retried!.id]: { kind: 'retry', error: 'y', nextAttemptAt: T0 + 99_999 } }, T0 + 30);
      assert.equal(await queue.purgeProcessed(T0 + 30, 1), 1, 'at most the limit');
      assert.equal(await queue.purgeProcessed(T0 + 30, 10), 1);
      assert.equal(await queue.purgeProcessed(T0 + 30, 10), 0);
      assert.equal(await queue.get(old1!.id), null);
      assert.equal(await queue.get(old2!.id), null);
      assert.equal(await statusOf(queue, recent!.id), 'processed', 'processed at the cut-off: kept');
      assert.equal(await statusOf(queue, failed!.id), 'failed', 'dead letters are never trimmed');
      assert.equal(await queue.purgeProcessed(T0 + 1_000_000, 10), 1, 'only the processed one of the newer batch');
      assert.equal(await statusOf(queue, failed!.id), 'failed');
      assert.equal(await statusOf(queue, retried!.id), 'queued', 'nor retries');
      assert.equal(await statusOf(queue, queued!.id), 'queued', 'nor what is still to do');
      assert.deepEqual(await processAll(queue, T0 + 99_999), [retried!.id, queued!.id]);
      const [fresh] = await enqueueAll(queue, [item({ vin: VIN_A, receivedAt: T0 + 2 })]);
      assert.equal(await statusOf(queue, fresh!.id), 'queued', 'a payload after a trim is queued, not taken for processed');
      assert.deepEqual(await processAll(queue, T0 + 99_999), [fresh!.id]);
    });

    const sharing: IntakeQueueCase = 'instances sharing a log keep each VIN in order';
    const sharingSkip = options.skip?.[sharing] ?? (options.openSharedQueues ? false : 'this runner gives no openSharedQueues (a second instance on the same queue)');
    it(sharing, { skip: sharingSkip }, async () => {
      const { queues, close } = await options.openSharedQueues!();
      try {
        await processConcurrently(queues, item);
      } finally {
        await close();
      }
    });

    caseOf('concurrent enqueues', async (queue) => {
      const many = Array.from({ length: 50 }, (_, i) => item({ vin: [VIN_A, VIN_B, VIN_C][i % 3]!, idempotencyKey: i < 10 ? 'same' : null }));
      const results = await Promise.all(many.map((entry) => queue.enqueue(entry)));
      assert.equal(results.filter((result) => result.created).length, 41, 'one of the ten payloads with the same key is stored');
      const original = results.slice(0, 10).find((result) => result.created)!.record.id;
      assert.ok(results.slice(0, 10).every((result) => result.record.id === original), 'the other nine answer that one');
      assert.equal(await queue.depth(), 41);
      assert.deepEqual((await processAll(queue)).sort(), [original, ...results.slice(10).map((result) => result.record.id)].sort());
    });
  });
}

/**
 * Two workers per instance work through three VINs' payloads at once, like workers in two
 * processes: each opens batches of two, works through them in order, retries some once (holding the
 * VIN's later payloads of that batch), commits, and yields before its next batch. Every payload is
 * started only when it is the next unprocessed one of its VIN and no other payload of its VIN is
 * being worked on anywhere.
 */
async function processConcurrently(queues: readonly [IntakeQueue, IntakeQueue], item: (overrides: Partial<NewIntake>) => NewIntake): Promise<void> {
  const vins = [VIN_A, VIN_B, VIN_C];
  const given = Array.from({ length: 60 }, (_, i) => item({ vin: vins[i % vins.length]! }));
  // One at a time, alternating instances: arrival order is the order given.
  const items: NewIntake[] = [];
  for (const [i, entry] of given.entries()) items.push({ ...entry, id: (await queues[i % 2]!.enqueue(entry)).record.id });
  const order = new Map(vins.map((vin) => [vin, items.filter((entry) => entry.vin === vin).map((entry) => entry.id)]));
  const processed = new Map<string, string[]>(vins.map((vin) => [vin, []]));
  const working = new Map<string, string>();
  const retryOnce = new Set(items.filter((_, i) => i % 7 === 3).map((entry) => entry.id));
  const batchedBy = new Set<number>();
  const violations: string[] = [];
  let remaining = items.length;
  let emptyBatches = 0;
  let turn = 0;
  /** Yields to the other workers a varying number of times (their batches run meanwhile). */
  const interleave = async () => {
    for (let i = turn++ % 3; i >= 0; i--) await new Promise((resolve) => setImmediate(resolve));
  };

  const worker = async (instance: 0 | 1) => {
    const queue = queues[instance];
    while (remaining > 0) {
      const batch = await queue.nextBatch(2, T0);
      if (!batch) {
        if (++emptyBatches > 20_000) throw new Error(`no progress: ${remaining} payloads never came out of the queue`);
        await interleave();
        continue;
      }
      batchedBy.add(instance);
      const outcomes = new Map<number, IntakeOutcome>();
      const held = new Set<string>();
      for (const entry of batch.entries) {
        if (held.has(entry.vin)) continue;
        // Several of one VIN in this batch come one after another; another batch's is a violation.
        const other = working.get(entry.vin);
        if (other !== undefined && !batch.entries.some((mine) => mine.id === other)) {
          violations.push(`${entry.id} started while ${other} of its VIN was being worked on`);
        }
        const done = processed.get(entry.vin)!;
        const expected = order.get(entry.vin)![done.length];
        if (entry.id !== expected) violations.push(`${entry.id} started before ${expected}, an earlier payload of its VIN`);
        working.set(entry.vin, entry.id);
        await interleave();
        if (retryOnce.delete(entry.id)) {
          outcomes.set(entry.seq, { kind: 'retry', error: 'once', nextAttemptAt: T0 });
          held.add(entry.vin);
        } else {
          done.push(entry.id);
          outcomes.set(entry.seq, PROCESSED);
        }
      }
      await queue.commitBatch(batch, outcomes, T0);
      // Only once committed may another batch hand out the VIN's next payload.
      for (const entry of batch.entries) if (working.get(entry.vin) === entry.id) working.delete(entry.vin);
      remaining = items.length - [...processed.values()].reduce((sum, ids) => sum + ids.length, 0);
      await interleave();
    }
  };

  await Promise.all([worker(0), worker(1), worker(0), worker(1)]);
  assert.deepEqual(violations, []);
  assert.deepEqual(processed, order, "every payload processed once, in its VIN's order");
  assert.deepEqual([...batchedBy].sort(), [0, 1], 'both instances took part');
  for (const queue of queues) assert.equal(await queue.depth(), 0);
  for (const entry of items) assert.equal((await queues[1].get(entry.id))?.status, 'processed');
  assert.equal((await queues[0].get(items[3]!.id))?.attempts, 2, 'a retried payload was attempted twice');
}

function pick(record: IntakeRecord | null) {
  assert.ok(record);
  const { status, attempts, processedAt, error, nextAttemptAt } = record;
  return { status, attempts, processedAt, error, nextAttemptAt };
}
