/**
 * The batch policy of every intake queue, once (issue 38): which payloads a batch hands out, which
 * it holds back, and what its commit writes for each. Pure functions over what a storage read; the
 * SQLite log, the PostgreSQL log and the partitioned queue (a log engine beside an index) keep only
 * the primitives: read the candidates, write the parked rows and the positions at once.
 *
 * - Due retries first (they are older than anything past a position), then what follows each
 *   partition's committed position, the oldest `limit` of them (`planBatch`).
 * - A payload past the position whose VIN still has a retry waiting outside the batch is held back:
 *   the batch reads past it (the position moves) and its commit parks it behind that retry, so that
 *   a VIN's payloads are never processed out of order.
 * - At the commit, each outcome becomes a parked row (`settleBatch`): a retry and a dead letter are
 *   parked; an entry the worker did not attempt (`held`, behind a retry of its VIN in the same batch)
 *   is parked as it arrived; a parked payload processed is marked done; a first attempt processed
 *   needs no row where the position says it (`recordProcessed: false`).
 */
import type { IntakeBatch, IntakeEntry, IntakeOutcome } from './intake-queue.ts';

/** A payload a batch may hand out, as a storage read it. */
export interface BatchCandidate {
  readonly partition: number;
  /** Its position in the partition. */
  readonly seq: number;
  readonly vin: string;
}

/** What a storage read for one batch: due retries and what follows the positions, with the VINs that wait for a retry. */
export interface BatchCandidates<T extends BatchCandidate> {
  /** Retries due now, oldest first, each VIN's in order, none behind a retry of its VIN that is not due. */
  readonly due: readonly T[];
  /** Payloads past each partition's committed position, in log order. */
  readonly fresh: readonly T[];
  /** Retries waiting (due or not) per `waitingKey(partition, vin)`: the VIN's later payloads wait behind them. */
  readonly waiting: ReadonlyMap<string, number>;
}

export interface BatchPlan<T extends BatchCandidate> {
  /** Handed out, in order: due retries, then fresh payloads. */
  readonly take: readonly T[];
  /** Fresh payloads read past but held back behind their VIN's retry: parked at the commit. */
  readonly heldBack: readonly T[];
  /** Per partition read past its position: the position after the commit. */
  readonly positions: ReadonlyMap<number, number>;
}

/** The key of a VIN's count in `BatchCandidates.waiting`. */
export function waitingKey(partition: number, vin: string): string {
  return `${partition}\n${vin}`;
}

/** Picks a batch from what a storage read (see the top). */
export function planBatch<T extends BatchCandidate>(candidates: BatchCandidates<T>, limit: number): BatchPlan<T> {
  const bySeq = (a: T, b: T) => a.seq - b.seq;
  const due = [...candidates.due].sort(bySeq).slice(0, limit);
  const fresh = [...candidates.fresh].sort(bySeq).slice(0, limit - due.length);
  // A VIN's retries in this batch no longer hold its later payloads back.
  const waiting = new Map(candidates.waiting);
  for (const row of due) {
    const key = waitingKey(row.partition, row.vin);
    waiting.set(key, (waiting.get(key) ?? 1) - 1);
  }
  const take: T[] = [...due];
  const heldBack: T[] = [];
  const positions = new Map<number, number>();
  for (const row of fresh) {
    positions.set(row.partition, Math.max(positions.get(row.partition) ?? 0, row.seq));
    if ((waiting.get(waitingKey(row.partition, row.vin)) ?? 0) > 0) heldBack.push(row);
    else take.push(row);
  }
  return { take, heldBack, positions };
}

/** A candidate with what its commit needs: the payload as handed out, and whether it came from the parked rows (a retry). */
export interface PlannedEntry extends BatchCandidate {
  readonly entry: IntakeEntry;
  readonly parked: boolean;
}

/** A parked row a commit writes: a new one (`fresh`) or an update of the payload's parked row. */
export interface ParkedWrite {
  readonly fresh: boolean;
  readonly partition: number;
  readonly seq: number;
  readonly vin: string;
  readonly state: 'retry' | 'failed' | 'done';
  readonly attempts: number;
  /** Null keeps the parked row's (an update only; a new row's is its arrival unless a retry says otherwise). */
  readonly nextAttemptAt: number | null;
  readonly error: string | null;
  readonly processedAt: number | null;
}

export interface SettleOptions {
  /** Whether a first attempt processed gets a `done` row (an index beside a log that lets payloads go), or none (the position says it). */
  recordProcessed: boolean;
}

/** The parked rows a commit writes for the batch's outcomes (by `seq`; none is `held`) and the payloads it held back. */
export function settleBatch(
  plan: BatchPlan<PlannedEntry>,
  outcomes: ReadonlyMap<number, IntakeOutcome>,
  now: number,
  options: SettleOptions,
): ParkedWrite[] {
  const writes: ParkedWrite[] = [];
  for (const { entry, partition, parked } of plan.take) {
    const outcome = outcomes.get(entry.seq) ?? HELD;
    const row = { fresh: !parked, partition, seq: entry.seq, vin: entry.vin, attempts: entry.attempts + 1 };
    const unchanged = parked ? null : entry.receivedAt;
    if (outcome.kind === 'processed') {
      if (parked || options.recordProcessed) writes.push({ ...row, state: 'done', nextAttemptAt: unchanged, error: null, processedAt: now });
    } else if (outcome.kind === 'retry') writes.push({ ...row, state: 'retry', nextAttemptAt: outcome.nextAttemptAt, error: outcome.error, processedAt: null });
    else if (outcome.kind === 'failed') writes.push({ ...row, state: 'failed', nextAttemptAt: unchanged, error: outcome.error, processedAt: now });
    // Held: a parked payload stays as it was; a first attempt is parked behind its VIN's retry.
    else if (!parked) writes.push(arrived(partition, entry.seq, entry.vin, entry.receivedAt));
  }
  for (const { entry, partition } of plan.heldBack) writes.push(arrived(partition, entry.seq, entry.vin, entry.receivedAt));
  return writes;
}

/** Whether one of a queue's open batches holds the payload at `seq`: its status is then `processing`. */
export function inOpenBatches(batches: Iterable<IntakeBatch | null>, seq: number): boolean {
  for (const batch of batches) if (batch?.entries.some((entry) => entry.seq === seq)) return true;
  return false;
}

const HELD: IntakeOutcome = { kind: 'held' };

/** A payload parked as it arrived: waiting, never attempted, due at its arrival. */
function arrived(partition: number, seq: number, vin: string, receivedAt: number): ParkedWrite {
  return { fresh: true, partition, seq, vin, state: 'retry', attempts: 0, nextAttemptAt: receivedAt, error: null, processedAt: null };
}
