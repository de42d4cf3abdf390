/**
 * The durable intake queue (contract 4): the seam between the HTTP path that accepts a payload and
 * the workers that process it. A payload is `queued` once `enqueue` resolves — durably, so the 202
 * that follows survives a crash — then `processing`, then `processed`, or `failed` with the reason
 * after its retries (a dead letter an operator can list and re-queue). Items of one VIN are handed
 * out in order: a VIN's next item is not claimed while an earlier one is processing or waiting to
 * be retried; a failed item no longer holds its VIN back. Every implementation (SQLite here,
 * PostgreSQL in `adapters/postgres`) passes `test/conformance/intake-queue.ts`.
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
  processedAt: number | null;
  /** Why the last attempt failed, if it did. */
  error: string | null;
}

export interface EnqueueResult {
  record: IntakeRecord;
  /** False when an earlier payload of the same partner carried the same idempotency key (within 24 h). */
  created: boolean;
}

export interface IntakeQueue {
  /**
   * Stores a payload as `queued`. With an idempotency key already used by the same partner in the
   * last 24 hours (relative to `item.receivedAt`), stores nothing and answers the original record.
   */
  enqueue(item: NewIntake): Promise<EnqueueResult>;
  /** The record of the partner's idempotency key used after `since` (exclusive), if any. */
  findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null>;
  get(id: string): Promise<IntakeRecord | null>;
  /**
   * Marks up to `limit` due items `processing` (attempts + 1) and answers them, oldest first, at most
   * one per VIN, and none of a VIN that has an earlier item still queued or processing.
   */
  claim(limit: number, now: number): Promise<IntakeRecord[]>;
  /** processing -> processed. */
  complete(id: string, at: number): Promise<void>;
  /** processing -> queued again, not claimed before `nextAttemptAt`, with the reason kept. */
  retryLater(id: string, error: string, nextAttemptAt: number): Promise<void>;
  /** processing -> failed (a dead letter) with the reason. */
  fail(id: string, error: string, at: number): Promise<void>;
  /** Dead letters, oldest first. */
  listFailed(limit: number): Promise<IntakeRecord[]>;
  /** failed -> queued with attempts reset; false when the item is not failed. */
  requeue(id: string, at: number): Promise<boolean>;
  /** On start-up: items left `processing` by a crashed process go back to `queued`. Answers how many. */
  recoverInFlight(): Promise<number>;
  /** Items queued or processing. */
  depth(): Promise<number>;
}
