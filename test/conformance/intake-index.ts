/**
 * The conformance suite every `IntakeIndex` passes (PostgreSQL): idempotency keys claimed atomically
 * (per partner, within the window, an in-flight claim taken over once stale, a refused append's claim
 * let go), rows and positions committed at once with positions moving forward only, rows read at
 * many positions together, due retries in each VIN's order and the VINs waiting behind retries,
 * dead letters listed and re-queued, and trimming. The composed queue's behaviour on top of it is the intake-queue suite's
 * (`test/core/partitioned-intake-queue.test.ts`). A test file calls `runIntakeIndexConformance(...)`
 * once per implementation, naming a reason for any skipped case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IndexedIntake, IntakeIndex } from '../../core/intake-index.ts';
import type { NewIntake } from '../../core/intake-queue.ts';

export type IntakeIndexCase =
  | 'claims idempotency keys atomically'
  | 'commits rows and positions at once'
  | 'reads rows at many positions together'
  | 'hands out due retries in each VIN order'
  | 'lists and re-queues dead letters'
  | 'trims processed rows and old keys';

export interface IntakeIndexConformanceOptions {
  name: string;
  /** A fresh, empty index per case, and how to close it. */
  openIndex(): Promise<{ index: IntakeIndex; close(): Promise<void> }>;
  skip?: Partial<Record<IntakeIndexCase, string>>;
}

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const WINDOW = 24 * 60 * 60 * 1000;
const STALE = 30_000;
const VIN_A = '1HGCM82633A004352';
const VIN_B = '1M8GDM9AXKP042788';

/** Registers the suite's cases with `node:test`. */
export function runIntakeIndexConformance(options: IntakeIndexConformanceOptions): void {
  const caseOf = (name: IntakeIndexCase, body: (index: IntakeIndex) => Promise<void>) =>
    it(name, { skip: options.skip?.[name] ?? false }, async () => {
      const { index, close } = await options.openIndex();
      try {
        await body(index);
      } finally {
        await close();
      }
    });
  const keyed = (overrides: Partial<NewIntake> = {}): NewIntake => ({
    id: 'id-1',
    partnerId: 'partner-1',
    product: 'gps-basic',
    vin: VIN_A,
    payload: '{"n":1}',
    receivedAt: T0,
    idempotencyKey: 'order-7',
    ...overrides,
  });
  const row = (seq: number, overrides: Partial<IndexedIntake> = {}): IndexedIntake => ({
    partition: 3,
    seq,
    id: `id-${seq}`,
    partnerId: 'partner-1',
    product: 'gps-basic',
    vin: VIN_A,
    receivedAt: T0 + seq,
    idempotencyKey: null,
    payload: `{"seq":${seq}}`,
    state: 'retry',
    attempts: 1,
    nextAttemptAt: T0,
    error: 'boom',
    processedAt: null,
    ...overrides,
  });

  describe(`IntakeIndex conformance: ${options.name}`, () => {
    caseOf('claims idempotency keys atomically', async (index) => {
      assert.equal(await index.claimKey(keyed(), WINDOW, STALE), null, 'an unused key is claimed');
      assert.deepEqual(await index.claimKey(keyed({ payload: '{"n":2}' }), WINDOW, STALE), { id: null, vin: VIN_A, product: 'gps-basic', payload: '{"n":1}', receivedAt: T0 }, 'held while its append is in flight, with what to compare');
      await index.settleKey('partner-1', 'order-7', 'id-1.3.9');
      assert.equal((await index.findKey('partner-1', 'order-7'))?.id, 'id-1.3.9', 'named once appended');
      assert.equal((await index.claimKey(keyed({ receivedAt: T0 + WINDOW - 1 }), WINDOW, STALE))?.id, 'id-1.3.9', 'held within the window');
      assert.equal(await index.claimKey(keyed({ partnerId: 'partner-2' }), WINDOW, STALE), null, 'keys are per partner');
      assert.equal(await index.claimKey(keyed({ receivedAt: T0 + WINDOW, payload: '{"n":3}' }), WINDOW, STALE), null, 'exactly the window later, the key is new again');
      assert.equal((await index.findKey('partner-1', 'order-7'))?.payload, '{"n":3}');
      // In flight for longer than the stale time: its process died; another takes the key.
      assert.notEqual(await index.claimKey(keyed({ receivedAt: T0 + WINDOW + STALE - 1 }), WINDOW, STALE), null);
      assert.equal(await index.claimKey(keyed({ receivedAt: T0 + WINDOW + STALE }), WINDOW, STALE), null, 'a stale in-flight claim is taken over');
      // A refused append lets its claim go.
      await index.settleKey('partner-1', 'order-7', null);
      assert.equal(await index.findKey('partner-1', 'order-7'), null);
      const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => index.claimKey(keyed({ idempotencyKey: 'same', id: `c-${i}` }), WINDOW, STALE)));
      assert.equal(claims.filter((claim) => claim === null).length, 1, 'of ten at once, one claims');
    });

    caseOf('commits rows and positions at once', async (index) => {
      assert.equal(await index.position(3), 0);
      assert.equal(await index.row(3, 10), null);
      const done = row(10, { state: 'done', payload: null, error: null, processedAt: T0 + 5 });
      await index.commit([done, row(11)], new Map([[3, 12]]));
      assert.deepEqual(await index.row(3, 10), done, 'every field');
      assert.equal((await index.row(3, 11))?.state, 'retry');
      assert.equal(await index.position(3), 12);
      assert.equal(await index.position(4), 0, 'other partitions keep theirs');
      await index.commit([row(11, { state: 'failed', attempts: 2, error: 'poison', processedAt: T0 + 9 })], new Map([[3, 11]]));
      assert.equal(await index.position(3), 12, 'a position never moves back');
      assert.deepEqual((await index.row(3, 11))?.state, 'failed', 'a row at the same position is replaced');
      assert.equal(await index.retries(), 0);
    });

    caseOf('reads rows at many positions together', async (index) => {
      assert.deepEqual(await index.rows([]), []);
      const rows = [row(1, { state: 'done', payload: null, processedAt: T0 + 1 }), row(2), row(4, { partition: 5, state: 'failed', processedAt: T0 + 2 })];
      await index.commit(rows, new Map([[3, 2], [5, 4]]));
      const read = await index.rows([{ partition: 3, seq: 2 }, { partition: 5, seq: 4 }, { partition: 3, seq: 3 }, { partition: 5, seq: 1 }, { partition: 3, seq: 1 }]);
      const byPosition = (a: IndexedIntake, b: IndexedIntake) => a.partition - b.partition || a.seq - b.seq;
      assert.deepEqual(read.sort(byPosition), rows.sort(byPosition), 'every field of each row there is; positions without one (or of another partition) have none');
    });

    caseOf('hands out due retries in each VIN order', async (index) => {
      await index.commit(
        [
          row(1, { vin: VIN_A, nextAttemptAt: T0 + 1000 }),
          row(2, { vin: VIN_A, attempts: 0, error: null, nextAttemptAt: T0 }),
          row(3, { vin: VIN_B, nextAttemptAt: T0 }),
          row(4, { partition: 5, vin: VIN_B, nextAttemptAt: T0 + 50 }),
        ],
        new Map([[3, 3]]),
      );
      const early = await index.partitionState(3, T0, 10);
      assert.equal(early.position, 3);
      assert.deepEqual(early.due.map((due) => due.seq), [3], "A's second waits behind its first, not due yet");
      assert.deepEqual([...early.waiting].sort(), [[VIN_A, 2], [VIN_B, 1]]);
      assert.deepEqual([...(await index.partitionsWithDueRetries(T0))], [3]);
      assert.deepEqual([...(await index.partitionsWithDueRetries(T0 + 1000))].sort(), [3, 5]);
      assert.deepEqual((await index.partitionState(3, T0 + 1000, 10)).due.map((due) => due.seq), [1, 2, 3], 'oldest first once due');
      assert.deepEqual((await index.partitionState(3, T0 + 1000, 2)).due.map((due) => due.seq), [1, 2], 'up to the limit');
      assert.equal(await index.retries(), 4);
    });

    caseOf('lists and re-queues dead letters', async (index) => {
      await index.commit(
        [row(7, { state: 'failed', processedAt: T0 + 1 }), row(5, { state: 'failed', processedAt: T0 + 2, error: 'first' }), row(6, { state: 'done', payload: null, processedAt: T0 })],
        new Map([[3, 7]]),
      );
      const failed = await index.listFailed(10);
      assert.deepEqual(failed.map((dead) => dead.seq), [5, 7], 'oldest first');
      assert.equal(failed[0]!.payload, '{"seq":5}', 'with its payload');
      assert.deepEqual((await index.listFailed(1)).map((dead) => dead.seq), [5]);
      assert.equal(await index.requeue(3, 5, T0 + 5000), true);
      const requeued = await index.row(3, 5);
      assert.deepEqual([requeued?.state, requeued?.attempts, requeued?.nextAttemptAt, requeued?.processedAt, requeued?.error], ['retry', 0, T0 + 5000, null, 'first']);
      assert.equal(await index.requeue(3, 5, T0), false, 'only a dead letter re-queues');
      assert.equal(await index.requeue(3, 6, T0), false);
      assert.equal(await index.requeue(3, 99, T0), false);
    });

    caseOf('trims processed rows and old keys', async (index) => {
      await index.commit(
        [
          row(1, { state: 'done', payload: null, processedAt: T0 + 1 }),
          row(2, { state: 'done', payload: null, processedAt: T0 + 2 }),
          row(3, { state: 'done', payload: null, processedAt: T0 + 30 }),
          row(4, { state: 'failed', processedAt: T0 + 1 }),
          row(5, { state: 'retry' }),
        ],
        new Map([[3, 5]]),
      );
      await index.claimKey(keyed({ receivedAt: T0 }), WINDOW, STALE);
      await index.claimKey(keyed({ idempotencyKey: 'later', receivedAt: T0 + 100 }), WINDOW, STALE);
      assert.equal(await index.purge(T0 + 30, T0 + 50, 1), 1, 'at most the limit');
      assert.equal(await index.purge(T0 + 30, T0 + 50, 10), 1);
      assert.equal(await index.purge(T0 + 30, T0 + 50, 10), 0, 'processed at the cut-off: kept');
      assert.equal(await index.row(3, 1), null);
      assert.equal((await index.row(3, 3))?.state, 'done');
      assert.equal((await index.row(3, 4))?.state, 'failed', 'dead letters are never trimmed');
      assert.equal((await index.row(3, 5))?.state, 'retry', 'nor retries');
      assert.equal(await index.findKey('partner-1', 'order-7'), null, 'a key received before the cut goes');
      assert.ok(await index.findKey('partner-1', 'later'), 'a later one stays');
    });
  });
}
