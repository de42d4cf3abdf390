/**
 * The conformance suite every `IntakeQueue` passes (SQLite now, PostgreSQL later): what the 202
 * promises (a stored record with every field), idempotency keys (per partner, 24 hours, exclusive),
 * claiming (arrival order, per-VIN order, retries and processing holding a VIN back, dead letters
 * not), every settle outcome, dead letters listed and re-queued, crash recovery, purging and depth;
 * and, for a queue that several processes share, two instances claiming from one VIN's payloads at
 * once without ever running two of them together or out of order.
 * A test file calls `runIntakeQueueConformance(...)` once per implementation, naming a reason for
 * any skipped case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IDEMPOTENCY_WINDOW_MS, type IntakeOutcome, type IntakeQueue, type IntakeRecord, type NewIntake } from '../../core/intake-queue.ts';

export type IntakeQueueCase =
  | 'stores what it is given'
  | 'idempotency keys'
  | 'claims in arrival order'
  | 'keeps each VIN in order'
  | 'settles every outcome'
  | 'dead letters'
  | 'recovers in-flight items'
  | 'purges processed items'
  | 'concurrent enqueues'
  | 'instances sharing a queue keep each VIN in order';

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
  /** Enqueues one at a time, so arrival order is the order given. */
  const enqueueAll = async (queue: IntakeQueue, items: NewIntake[]) => {
    for (const entry of items) await queue.enqueue(entry);
    return items;
  };
  const ids = (records: IntakeRecord[]) => records.map((record) => record.id);
  const statusOf = async (queue: IntakeQueue, id: string) => (await queue.get(id))?.status;

  describe(`IntakeQueue conformance: ${options.name}`, () => {
    caseOf('stores what it is given', async (queue) => {
      const given = item({ idempotencyKey: 'key-1', payload: '{"text":"é ✓ \\u0000"}' });
      const { record, created } = await queue.enqueue(given);
      assert.equal(created, true);
      const expected: IntakeRecord = { ...given, status: 'queued', attempts: 0, nextAttemptAt: T0, processedAt: null, error: null };
      assert.deepEqual(record, expected);
      assert.deepEqual(await queue.get(given.id), expected, 'read back with every field');
      assert.equal(await queue.get('no-such-intake'), null);
      assert.equal(await queue.depth(), 1);
    });

    caseOf('idempotency keys', async (queue) => {
      const first = item({ idempotencyKey: 'order-7' });
      await queue.enqueue(first);
      const repeat = await queue.enqueue(item({ idempotencyKey: 'order-7', receivedAt: T0 + IDEMPOTENCY_WINDOW_MS - 1 }));
      assert.equal(repeat.created, false);
      assert.equal(repeat.record.id, first.id, 'the original record answers');
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

    caseOf('claims in arrival order', async (queue) => {
      const [a, b, c, later] = await enqueueAll(queue, [
        item({ vin: VIN_A }),
        item({ vin: VIN_B }),
        item({ vin: VIN_C }),
        item({ vin: VIN_B, receivedAt: T0 + 10_000 }),
      ]);
      assert.deepEqual(await queue.claim(10, T0 - 1), [], 'nothing is due before it was received');
      const claimed = await queue.claim(2, T0);
      assert.deepEqual(ids(claimed), [a!.id, b!.id], 'oldest first, up to the limit');
      assert.ok(claimed.every((record) => record.status === 'processing' && record.attempts === 1));
      assert.equal(await statusOf(queue, a!.id), 'processing');
      assert.deepEqual(ids(await queue.claim(10, T0 + 10_000)), [c!.id], 'VIN B waits for its payload in processing');
      assert.deepEqual(await queue.claim(10, T0 + 10_000), [], 'claimed items are not handed out twice');
      assert.equal(await queue.depth(), 4, 'processing items still count');
      await queue.settle([{ id: b!.id, kind: 'processed', at: T0 + 1 }]);
      assert.deepEqual(ids(await queue.claim(10, T0 + 10_000)), [later!.id]);
    });

    caseOf('keeps each VIN in order', async (queue) => {
      const [a1, b1, a2, a3] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_A }), item({ vin: VIN_A })]);
      assert.deepEqual(ids(await queue.claim(10, T0)), [a1!.id, b1!.id, a2!.id, a3!.id], "several of one VIN, in the VIN's order");
      // a1 is to be retried: a2 and a3 were not attempted (released), and all three wait for a1's retry.
      await queue.settle([
        { id: a1!.id, kind: 'retry', error: 'boom', nextAttemptAt: T0 + 1000 },
        { id: a2!.id, kind: 'released' },
        { id: a3!.id, kind: 'released' },
        { id: b1!.id, kind: 'processed', at: T0 },
      ]);
      const b2 = item({ vin: VIN_B });
      await queue.enqueue(b2);
      assert.deepEqual(ids(await queue.claim(10, T0 + 999)), [b2.id], 'VIN A waits for the retry; VIN B does not');
      const retried = await queue.claim(10, T0 + 1000);
      assert.deepEqual(ids(retried), [a1!.id, a2!.id, a3!.id], 'the retry comes due, and the rest of its VIN follows');
      assert.deepEqual(
        retried.map((record) => record.attempts),
        [2, 1, 1],
        'a released item did not spend an attempt',
      );
      // A dead letter no longer holds its VIN back.
      await queue.settle([
        { id: a1!.id, kind: 'failed', error: 'still boom', at: T0 + 1000 },
        { id: a2!.id, kind: 'released' },
        { id: a3!.id, kind: 'released' },
      ]);
      assert.deepEqual(ids(await queue.claim(10, T0 + 1000)), [a2!.id, a3!.id]);
    });

    caseOf('settles every outcome', async (queue) => {
      const [p, r, f] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_C })]);
      await queue.claim(10, T0);
      await queue.settle([
        { id: p!.id, kind: 'processed', at: T0 + 5 },
        { id: r!.id, kind: 'retry', error: 'transient', nextAttemptAt: T0 + 2000 },
        { id: f!.id, kind: 'failed', error: 'poison', at: T0 + 6 },
      ]);
      assert.deepEqual(pick(await queue.get(p!.id)), { status: 'processed', attempts: 1, processedAt: T0 + 5, error: null, nextAttemptAt: T0 });
      assert.deepEqual(pick(await queue.get(r!.id)), { status: 'queued', attempts: 1, processedAt: null, error: 'transient', nextAttemptAt: T0 + 2000 });
      assert.deepEqual(pick(await queue.get(f!.id)), { status: 'failed', attempts: 1, processedAt: T0 + 6, error: 'poison', nextAttemptAt: T0 });
      assert.equal(await queue.depth(), 1, 'only the retry is still to do');
      // Outcomes of items that are not (or no longer) processing change nothing.
      await queue.settle([
        { id: p!.id, kind: 'retry', error: 'late', nextAttemptAt: T0 },
        { id: r!.id, kind: 'processed', at: T0 },
        { id: 'no-such-intake', kind: 'failed', error: 'x', at: T0 },
      ]);
      assert.equal(await statusOf(queue, p!.id), 'processed');
      assert.equal(await statusOf(queue, r!.id), 'queued');
      await queue.settle([]);
    });

    caseOf('dead letters', async (queue) => {
      const [first, second, ok] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B }), item({ vin: VIN_C })]);
      await queue.claim(10, T0);
      await queue.settle([
        { id: second!.id, kind: 'failed', error: 'two', at: T0 + 2 },
        { id: first!.id, kind: 'failed', error: 'one', at: T0 + 3 },
        { id: ok!.id, kind: 'processed', at: T0 + 3 },
      ]);
      assert.deepEqual(ids(await queue.listFailed(10)), [first!.id, second!.id], 'oldest (by arrival) first');
      assert.deepEqual(ids(await queue.listFailed(1)), [first!.id]);
      assert.equal(await queue.requeue(first!.id, T0 + 5000), true);
      assert.deepEqual(pick(await queue.get(first!.id)), { status: 'queued', attempts: 0, processedAt: null, error: 'one', nextAttemptAt: T0 + 5000 });
      assert.equal(await queue.requeue(first!.id, T0 + 5000), false, 'only a failed item re-queues');
      assert.equal(await queue.requeue(ok!.id, T0), false);
      assert.equal(await queue.requeue('no-such-intake', T0), false);
      assert.deepEqual(await queue.claim(10, T0 + 4999), []);
      assert.deepEqual(ids(await queue.claim(10, T0 + 5000)), [first!.id]);
      assert.deepEqual(ids(await queue.listFailed(10)), [second!.id]);
    });

    caseOf('recovers in-flight items', async (queue) => {
      const [a, b] = await enqueueAll(queue, [item({ vin: VIN_A }), item({ vin: VIN_B })]);
      await queue.claim(1, T0);
      assert.equal(await queue.recoverInFlight(), 1);
      assert.equal(await statusOf(queue, a!.id), 'queued');
      assert.deepEqual(ids(await queue.claim(10, T0)), [a!.id, b!.id], 'taken up again, still first');
      assert.equal((await queue.get(a!.id))?.attempts, 2, 'the interrupted attempt counts');
      assert.equal(await queue.recoverInFlight(), 2);
      assert.equal(await queue.recoverInFlight(), 0);
    });

    caseOf('purges processed items', async (queue) => {
      const [old1, old2, recent, failed, queued] = await enqueueAll(queue, [
        item({ vin: VIN_A }),
        item({ vin: VIN_B }),
        item({ vin: VIN_C }),
        item({ vin: VIN_A, receivedAt: T0 + 1 }),
        item({ vin: VIN_B, receivedAt: T0 + 1 }),
      ]);
      await queue.claim(3, T0);
      await queue.settle([
        { id: old1!.id, kind: 'processed', at: T0 + 10 },
        { id: old2!.id, kind: 'processed', at: T0 + 20 },
        { id: recent!.id, kind: 'processed', at: T0 + 30 },
      ]);
      await queue.claim(1, T0 + 1);
      await queue.settle([{ id: failed!.id, kind: 'failed', error: 'x', at: T0 + 1 }]);
      assert.equal(await queue.purgeProcessed(T0 + 30, 1), 1, 'at most the limit');
      assert.equal(await queue.purgeProcessed(T0 + 30, 10), 1);
      assert.equal(await queue.purgeProcessed(T0 + 30, 10), 0);
      assert.equal(await queue.get(old1!.id), null);
      assert.equal(await queue.get(old2!.id), null);
      assert.equal(await statusOf(queue, recent!.id), 'processed', 'processed at the cut-off: kept');
      assert.equal(await statusOf(queue, failed!.id), 'failed', 'dead letters are never purged');
      assert.equal(await statusOf(queue, queued!.id), 'queued');
    });

    const sharing: IntakeQueueCase = 'instances sharing a queue keep each VIN in order';
    const sharingSkip = options.skip?.[sharing] ?? (options.openSharedQueues ? false : 'this runner gives no openSharedQueues (a second instance on the same queue)');
    it(sharing, { skip: sharingSkip }, async () => {
      const { queues, close } = await options.openSharedQueues!();
      try {
        await claimConcurrently(queues, item);
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
      const claimed = await queue.claim(100, T0);
      assert.deepEqual(ids(claimed).sort(), [original, ...ids(results.slice(10).map((result) => result.record))].sort());
    });
  });
}

/**
 * Two claimers per instance work through three VINs' payloads at once, like workers in two
 * processes: each claims two, works through them in claim order, retries some once (sending the
 * VIN's later payloads of that claim back), settles, and yields before its next claim. Every payload is started only when it is
 * the next unprocessed one of its VIN and no other payload of its VIN is being worked on anywhere.
 * A claim sees another's settle only after that settle committed, which is after its work ended, so
 * the check has no false alarms.
 */
async function claimConcurrently(queues: readonly [IntakeQueue, IntakeQueue], item: (overrides: Partial<NewIntake>) => NewIntake): Promise<void> {
  const vins = [VIN_A, VIN_B, VIN_C];
  const items = Array.from({ length: 60 }, (_, i) => item({ vin: vins[i % vins.length]! }));
  // One at a time, alternating instances: arrival order is the order given.
  for (const [i, entry] of items.entries()) await queues[i % 2]!.enqueue(entry);
  const order = new Map(vins.map((vin) => [vin, items.filter((entry) => entry.vin === vin).map((entry) => entry.id)]));
  const processed = new Map<string, string[]>(vins.map((vin) => [vin, []]));
  const working = new Map<string, string>();
  const retryOnce = new Set(items.filter((_, i) => i % 7 === 3).map((entry) => entry.id));
  const claimedBy = new Set<number>();
  const violations: string[] = [];
  let remaining = items.length;
  let emptyClaims = 0;
  let turn = 0;
  /** Yields to the other claimers a varying number of times (their claims and settles run meanwhile). */
  const interleave = async () => {
    for (let i = turn++ % 3; i >= 0; i--) await new Promise((resolve) => setImmediate(resolve));
  };

  const claimer = async (instance: 0 | 1) => {
    const queue = queues[instance];
    while (remaining > 0) {
      // Two at a time, so a claim leaves a VIN for the others.
      const claimed = await queue.claim(2, T0);
      if (claimed.length === 0) {
        if (++emptyClaims > 20_000) throw new Error(`no progress: ${remaining} payloads never came out of the queue`);
        await interleave();
        continue;
      }
      claimedBy.add(instance);
      const outcomes: IntakeOutcome[] = [];
      const held = new Set<string>();
      for (const record of claimed) {
        if (held.has(record.vin)) {
          outcomes.push({ id: record.id, kind: 'released' });
          continue;
        }
        const other = working.get(record.vin);
        if (other !== undefined) violations.push(`${record.id} started while ${other} of its VIN was being worked on`);
        const done = processed.get(record.vin)!;
        const expected = order.get(record.vin)![done.length];
        if (record.id !== expected) violations.push(`${record.id} started before ${expected}, an earlier payload of its VIN`);
        working.set(record.vin, record.id);
        await interleave();
        working.delete(record.vin);
        if (retryOnce.delete(record.id)) {
          outcomes.push({ id: record.id, kind: 'retry', error: 'once', nextAttemptAt: T0 });
          held.add(record.vin);
        } else {
          done.push(record.id);
          remaining--;
          outcomes.push({ id: record.id, kind: 'processed', at: T0 });
        }
      }
      await queue.settle(outcomes);
      // As the worker does between rounds.
      await interleave();
    }
  };

  await Promise.all([claimer(0), claimer(1), claimer(0), claimer(1)]);
  assert.deepEqual(violations, []);
  assert.deepEqual(processed, order, "every payload processed once, in its VIN's order");
  assert.deepEqual([...claimedBy].sort(), [0, 1], 'both instances took part');
  for (const queue of queues) assert.equal(await queue.depth(), 0);
  for (const entry of items) assert.equal((await queues[1].get(entry.id))?.status, 'processed');
  assert.equal((await queues[0].get(items[3]!.id))?.attempts, 2, 'a retried payload was attempted twice');
}

function pick(record: IntakeRecord | null) {
  assert.ok(record);
  const { status, attempts, processedAt, error, nextAttemptAt } = record;
  return { status, attempts, processedAt, error, nextAttemptAt };
}
