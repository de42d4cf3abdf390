/**
 * The intake queue's row as both SQL queues (SQLite and PostgreSQL) read it, the columns they
 * select, and its mapping to the core's `IntakeRecord`. The two schemas name and type the columns
 * alike (epoch-ms integers arrive as numbers from both drivers), so one mapping serves both.
 */
import type { IntakeRecord, IntakeStatus } from '../../core/intake-queue.ts';

export interface QueueRow {
  seq: number;
  id: string;
  partner_id: string;
  product: string;
  vin: string;
  payload: string;
  received_at: number;
  idempotency_key: string | null;
  status: IntakeStatus;
  attempts: number;
  next_attempt_at: number;
  processed_at: number | null;
  error: string | null;
}

/** The columns of a `QueueRow`, in its order, for `SELECT` and `RETURNING` lists. */
export const QUEUE_COLUMNS = `seq, id, partner_id, product, vin, payload, received_at, idempotency_key, status, attempts,
  next_attempt_at, processed_at, error`;

export function toIntakeRecord(row: QueueRow): IntakeRecord {
  return {
    id: row.id,
    partnerId: row.partner_id,
    product: row.product,
    vin: row.vin,
    payload: row.payload,
    receivedAt: row.received_at,
    idempotencyKey: row.idempotency_key,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    processedAt: row.processed_at,
    error: row.error,
  };
}
