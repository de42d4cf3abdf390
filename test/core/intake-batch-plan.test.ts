/**
 * The batch policy every intake queue shares (`core/intake-batch-plan.ts`), as pure functions: due
 * retries first and the oldest `limit`, a VIN held back behind its waiting retry (and not behind one
 * in the batch), positions moved past what was held, and what a commit parks for each outcome. The
 * conformance suite holds each storage to the same policy end to end; this holds the policy itself.
 * Also the partitioned queue's key wait, which reads the injected clock (not `Date.now()`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { isTrailwireError } from '../../core/errors.ts';
import { type PlannedEntry, planBatch, settleBatch, waitingKey } from '../../core/intake-batch-plan.ts';
import type { IntakeIndex, KeyHolder } from '../../core/intake-index.ts';
import type { IntakeLog } from '../../core/intake-log.ts';
import type { IntakeOutcome } from '../../core/intake-queue.ts';
import { PartitionedIntakeQueue } from '../../core/partitioned-intake-queue.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

function entry(seq: number, vin: string, { partition = 0, attempts = 0, parked = false } = {}): PlannedEntry {
  return {
    partition,
    seq,
    vin,
    parked,
    entry: { seq, id: `intake-${seq}`, partnerId: 'p', product: 'gps-basic', vin, payload: '{}', receivedAt: T0 + seq, attempts },
  };
}
const seqs = (entries: readonly PlannedEntry[]) => entries.map((candidate) => candidate.seq);

describe('planBatch', () => {
  it('hands out due retries first, then what follows the positions, the oldest `limit`', () => {
    const plan = planBatch({ due: [entry(7, 'A', { parked: true, attempts: 1 })], fresh: [entry(12, 'B'), entry(10, 'C'), entry(11, 'D')], waiting: new Map() }, 3);
    assert.deepEqual(seqs(plan.take), [7, 10, 11]);
    assert.deepEqual([...plan.positions], [[0, 11]], 'the position moves past what was read, no further');
  });

  it("holds a VIN's later payloads behind a retry that waits outside the batch, and reads past them", () => {
    const waiting = new Map([[waitingKey(0, 'A'), 1]]);
    const plan = planBatch({ due: [], fresh: [entry(10, 'A'), entry(11, 'B'), entry(12, 'A')], waiting }, 10);
    assert.deepEqual(seqs(plan.take), [11]);
    assert.deepEqual(seqs(plan.heldBack), [10, 12]);
    assert.deepEqual([...plan.positions], [[0, 12]]);
  });

  it('lets a VIN go on once its waiting retry is in the batch, and counts VINs per partition', () => {
    const waiting = new Map([
      [waitingKey(0, 'A'), 1],
      [waitingKey(1, 'B'), 1],
    ]);
    const plan = planBatch(
      { due: [entry(5, 'A', { parked: true, attempts: 1 })], fresh: [entry(10, 'A'), entry(11, 'B', { partition: 0 }), entry(12, 'B', { partition: 1 })], waiting },
      10,
    );
    assert.deepEqual(seqs(plan.take), [5, 10, 11]);
    assert.deepEqual(seqs(plan.heldBack), [12], "partition 1's B waits; partition 0's B has no retry");
    assert.deepEqual(new Map(plan.positions), new Map([[0, 11], [1, 12]]));
  });
});

describe('settleBatch', () => {
  const plan = {
    take: [entry(1, 'A', { parked: true, attempts: 2 }), entry(2, 'B'), entry(3, 'C'), entry(4, 'D'), entry(5, 'E'), entry(6, 'F', { parked: true, attempts: 1 })],
    heldBack: [entry(9, 'G')],
    positions: new Map([[0, 9]]),
  };
  const outcomes = new Map<number, IntakeOutcome>([
    [1, { kind: 'processed' }],
    [2, { kind: 'processed' }],
    [3, { kind: 'retry', error: 'later', nextAttemptAt: T0 + 60_000 }],
    [4, { kind: 'failed', error: 'bad' }],
    // 5 and 6 not attempted: held behind a retry of their VIN in this batch.
  ]);

  it('parks retries, dead letters and what was held; marks a parked payload done; leaves a first attempt to the position', () => {
    const writes = settleBatch(plan, outcomes, T0 + 1000, { recordProcessed: false });
    assert.deepEqual(writes, [
      { fresh: false, partition: 0, seq: 1, vin: 'A', attempts: 3, state: 'done', nextAttemptAt: null, error: null, processedAt: T0 + 1000 },
      { fresh: true, partition: 0, seq: 3, vin: 'C', attempts: 1, state: 'retry', nextAttemptAt: T0 + 60_000, error: 'later', processedAt: null },
      { fresh: true, partition: 0, seq: 4, vin: 'D', attempts: 1, state: 'failed', nextAttemptAt: T0 + 4, error: 'bad', processedAt: T0 + 1000 },
      { fresh: true, partition: 0, seq: 5, vin: 'E', attempts: 0, state: 'retry', nextAttemptAt: T0 + 5, error: null, processedAt: null },
      { fresh: true, partition: 0, seq: 9, vin: 'G', attempts: 0, state: 'retry', nextAttemptAt: T0 + 9, error: null, processedAt: null },
    ]);
  });

  it('records a processed first attempt where the log lets it go', () => {
    const writes = settleBatch(plan, outcomes, T0 + 1000, { recordProcessed: true });
    assert.deepEqual(
      writes.find((write) => write.seq === 2),
      { fresh: true, partition: 0, seq: 2, vin: 'B', attempts: 1, state: 'done', nextAttemptAt: T0 + 2, error: null, processedAt: T0 + 1000 },
    );
  });
});

describe('PartitionedIntakeQueue key wait', () => {
  it("gives up on a key another process is appending by the injected clock's deadline", async () => {
    const clock = new ManualClock(T0);
    let looks = 0;
    const holder: KeyHolder = { id: null, vin: 'A', product: 'gps-basic', payload: '{}', receivedAt: T0 };
    // Only what a repeat of an in-flight key reaches: the claim answers its holder, whose id never comes.
    const index = {
      claimKey: async () => holder,
      findKey: async () => {
        looks++;
        clock.advance(2000);
        return holder;
      },
    } as unknown as IntakeIndex;
    const log = { partitions: 1 } as unknown as IntakeLog;
    const queue = new PartitionedIntakeQueue(log, index, { clock, keyWaitMs: 5000, keyPollMs: 1 });
    const item = { id: 'i-1', partnerId: 'p', product: 'gps-basic', vin: 'A', payload: '{}', receivedAt: T0, idempotencyKey: 'k' };
    await assert.rejects(queue.enqueue(item), (error) => isTrailwireError(error) && error.code === 'store_unavailable');
    assert.equal(looks, 3, 'looked at 2 s, 4 s and 6 s of the clock, then gave up (past 5 s)');
  });
});
