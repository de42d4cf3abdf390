/**
 * The intake index's payload rows as both SQL indexes (SQLite and PostgreSQL) read them: the two
 * schemas name and type the columns alike, so one mapping serves both (as `log-rows.ts` does for the log).
 */
import type { IndexedIntake, IndexedState } from '../../core/intake-index.ts';

export interface IndexRow {
  part: number;
  seq: number;
  id: string;
  partner_id: string;
  product: string;
  vin: string;
  received_at: number;
  idempotency_key: string | null;
  payload: string | null;
  state: IndexedState;
  attempts: number;
  next_attempt_at: number;
  error: string | null;
  processed_at: number | null;
}

/** The columns of an `IndexRow`, in its order, for `SELECT` lists. */
export const INDEX_ROW_COLUMNS = 'part, seq, id, partner_id, product, vin, received_at, idempotency_key, payload, state, attempts, next_attempt_at, error, processed_at';

export function toIndexed(row: IndexRow): IndexedIntake {
  return {
    partition: row.part,
    seq: row.seq,
    id: row.id,
    partnerId: row.partner_id,
    product: row.product,
    vin: row.vin,
    receivedAt: row.received_at,
    idempotencyKey: row.idempotency_key,
    payload: row.payload,
    state: row.state,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    error: row.error,
    processedAt: row.processed_at,
  };
}
