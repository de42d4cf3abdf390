/**
 * The intake index: what the queue keeps beside a log engine's log (issue 30) — idempotency keys,
 * each partition's committed position, and a row per payload that a batch has been through
 * (processed, to be retried, a dead letter), which is what status lookups read once the log has let
 * the payload go. `PartitionedIntakeQueue` (`partitioned-intake-queue.ts`) composes an index with an
 * `IntakeLog` into the core's `IntakeQueue`; SQLite and PostgreSQL provide one each. Every
 * implementation passes `test/conformance/intake-index.ts`, and the composed queue the intake-queue
 * suite.
 *
 * A row keeps the payload itself only while it may be processed again (a retry, a dead letter that
 * may be re-queued): the log may have let it go by then.
 */
import type { LoggedIntake, LogPosition } from './intake-log.ts';
import type { NewIntake } from './intake-queue.ts';

/** What a batch made of a payload: to be retried (or held behind a retry), a dead letter, processed. */
export type IndexedState = 'retry' | 'failed' | 'done';

/** A payload's row: where it is in the log, what it is, and what became of it. */
export interface IndexedIntake extends Omit<LoggedIntake, 'payload'> {
  /** The payload while it may be processed again (`retry`, `failed`); null once `done`. */
  payload: string | null;
  state: IndexedState;
  /** Attempts so far. */
  attempts: number;
  /** Not attempted before this time (a retry's backoff). */
  nextAttemptAt: number;
  error: string | null;
  processedAt: number | null;
}

/** An idempotency key's holder: the payload's queue id once appended (null while its append is in flight), and what to compare a repeat with. */
export interface KeyHolder {
  id: string | null;
  vin: string;
  product: string;
  payload: string;
  receivedAt: number;
}

/** A partition as a batch opens it. */
export interface PartitionState {
  /** Its committed position: everything at or below it has a row, or was trimmed. */
  position: number;
  /** Retries due at `now`, oldest first, each VIN's in order, none behind a retry of its VIN that is not due. */
  due: IndexedIntake[];
  /** Retries waiting per VIN (due or not): the VIN's later payloads wait behind them. */
  waiting: Map<string, number>;
}

export interface IntakeIndex {
  /**
   * Claims the item's idempotency key (atomically): null when it is the item's now — an unused key,
   * one last used `windowMs` or more before `item.receivedAt`, or one whose append was in flight
   * for longer than `staleMs` (its process died before the log answered) — else the key's holder.
   */
  claimKey(item: NewIntake, windowMs: number, staleMs: number): Promise<KeyHolder | null>;
  /** Names the queue id of a claimed key's payload once appended, or (null) lets the claim go when the append was refused. */
  settleKey(partnerId: string, idempotencyKey: string, id: string | null): Promise<void>;
  /** The key's holder, if any (whatever its age). */
  findKey(partnerId: string, idempotencyKey: string): Promise<(KeyHolder & { receivedAt: number }) | null>;
  /** The partition's position, due retries and waiting VINs, read together. */
  partitionState(partition: number, now: number, limit: number): Promise<PartitionState>;
  /** Partitions with a retry due at `now`. */
  partitionsWithDueRetries(now: number): Promise<Set<number>>;
  /** The committed position of a partition. */
  position(partition: number): Promise<number>;
  /**
   * Writes the rows (replacing those at the same positions) and moves each partition's position
   * forward (never back) to the one given, at once: a batch's commit.
   */
  commit(rows: readonly IndexedIntake[], positions: ReadonlyMap<number, number>): Promise<void>;
  /** The row at a position, if any. */
  row(partition: number, seq: number): Promise<IndexedIntake | null>;
  /** The rows at these positions, read together (a bulk status read); positions without a row have none in the answer. */
  rows(positions: readonly LogPosition[]): Promise<IndexedIntake[]>;
  /** Dead letters, oldest (by arrival) first. */
  listFailed(limit: number): Promise<IndexedIntake[]>;
  /** failed -> retry at `at`, attempts reset; false when the row is no dead letter. */
  requeue(partition: number, seq: number, at: number): Promise<boolean>;
  /** Trims up to `limit` rows processed before `before`, and keys received before `keysBefore`; answers how many rows. */
  purge(before: number, keysBefore: number, limit: number): Promise<number>;
  /** Rows waiting for a retry. */
  retries(): Promise<number>;
  /** Ends what the index opened (not a pool it shares). */
  close(): Promise<void>;
}
