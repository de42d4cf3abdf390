/**
 * The durable intake queue (contract 4): the seam between the HTTP path that accepts a payload and
 * the workers that process it. A payload is `queued` once `enqueue` resolves — durably, so the 202
 * that follows survives a crash — then `processing`, then `processed`, or `failed` with the reason
 * after its retries (a dead letter an operator can list and re-queue). Items of one VIN are handed
 * out in order: a VIN's next item is not claimed while an earlier one is processing or waiting to
 * be retried; a failed item no longer holds its VIN back. Every implementation (SQLite in
 * `adapters/sqlite`, PostgreSQL later) passes the conformance suite `test/conformance/intake-queue.ts`.
 */

export const INTAKE_STATUSES = ['queued', 'processing', 'processed', 'failed'] as const;
export type IntakeStatus = (typeof INTAKE_STATUSES)[number];

/** How long an `Idempotency-Key` answers the original 202 (contract 4: 24 hours). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface NewIntake {
  id: string;
  partnerId: string;
  product: string;
  vin: string;
  /** The payload as received: JSON text, parsed again by the worker. */
  payload: string;
  receivedAt: number;
  idempotencyKey: string | null;
}

export interface IntakeRecord extends NewIntake {
  status: IntakeStatus;
  /** Processing attempts started so far. */
  attempts: number;
  /** Not claimed before this time (epoch ms): the retry backoff. */
  nextAttemptAt: number;
  /** When it was processed, or dead-lettered. */
  processedAt: number | null;
  /** Why the last attempt failed, if it did. */
  error: string | null;
}

export interface EnqueueResult {
  record: IntakeRecord;
  /** False when an earlier payload of the same partner carried the same idempotency key (within 24 h). */
  created: boolean;
}

/** The record of an item just stored: queued, due at once, never attempted. */
export function queuedRecord(item: NewIntake): IntakeRecord {
  return { ...item, status: 'queued', attempts: 0, nextAttemptAt: item.receivedAt, processedAt: null, error: null };
}

/** What became of one claimed item: the transition `settle` records. */
export type IntakeOutcome =
  | { id: string; kind: 'processed'; at: number }
  /** Back to `queued`, not claimed before `nextAttemptAt`; the reason is kept for the status endpoint. */
  | { id: string; kind: 'retry'; error: string; nextAttemptAt: number }
  /** A dead letter, with the reason. */
  | { id: string; kind: 'failed'; error: string; at: number }
  /** Not attempted after all (an earlier item of its VIN is to be retried): back to `queued`, the attempt uncounted. */
  | { id: string; kind: 'released' };

export interface IntakeQueue {
  /**
   * Stores a payload as `queued` and resolves once it is durable. With an idempotency key already
   * used by the same partner in the 24 hours before `item.receivedAt`, stores nothing and answers
   * the original record (`created: false`); this check is atomic with the insert.
   */
  enqueue(item: NewIntake): Promise<EnqueueResult>;
  /** The record of the partner's idempotency key if it was used after `since` (exclusive). */
  findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null>;
  get(id: string): Promise<IntakeRecord | null>;
  /**
   * Marks up to `limit` due items `processing` (attempts + 1) and answers them in arrival order.
   * Several items of one VIN may come in one claim — the caller processes them one after another,
   * and releases the rest when one is to be retried — but none of a VIN that has an earlier item
   * processing or waiting for its retry.
   */
  claim(limit: number, now: number): Promise<IntakeRecord[]>;
  /** Records the outcomes of claimed (`processing`) items, all at once; others are left alone. */
  settle(outcomes: readonly IntakeOutcome[]): Promise<void>;
  /** Dead letters, oldest first. */
  listFailed(limit: number): Promise<IntakeRecord[]>;
  /** failed -> queued, due at `at`, with attempts reset; false when the item is not failed. */
  requeue(id: string, at: number): Promise<boolean>;
  /** On start-up: items left `processing` by a crashed worker go back to `queued`. Answers how many. */
  recoverInFlight(): Promise<number>;
  /** Deletes up to `limit` items processed before `before`; answers how many. Dead letters stay. */
  purgeProcessed(before: number, limit: number): Promise<number>;
  /** Items queued or processing. */
  depth(): Promise<number>;
}
