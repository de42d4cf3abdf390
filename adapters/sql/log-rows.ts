/**
 * The intake log's rows as both SQL logs (SQLite and PostgreSQL) read them, and the one place a
 * payload's status is derived from them (see `core/intake-queue.ts`): a parked row says retry
 * (`queued`), dead letter (`failed`) or processed after a retry (`done`); a payload never parked is
 * `processed` at or below the watermark, else `queued`. The two schemas name and type the columns
 * alike (epoch-ms integers arrive as numbers from both drivers), so one mapping serves both.
 */
import type { PlannedEntry } from '../../core/intake-batch-plan.ts';
import type { LoggedIntake } from '../../core/intake-log.ts';
import type { IntakeEntry, IntakeRecord, NewIntake } from '../../core/intake-queue.ts';

/** A payload as appended. */
export interface LogRow {
  seq: number;
  id: string;
  partner_id: string;
  product: string;
  vin: string;
  payload: string;
  received_at: number;
  idempotency_key: string | null;
}

/** The states of the parked table: waiting for a retry (or behind one), a dead letter, done after parking. */
export type ParkedState = 'retry' | 'failed' | 'done';

/** A payload with what decides its status: its parked row if any, and the watermark. */
export interface LogStatusRow extends LogRow {
  state: ParkedState | null;
  attempts: number | null;
  next_attempt_at: number | null;
  error: string | null;
  parked_processed_at: number | null;
  /** The log's watermark: every payload at or below it has been through a committed batch. */
  watermark: number | null;
  /** When the batch that moved the watermark past this payload was committed. */
  batch_processed_at: number | null;
}

/** The columns of a `LogRow` of table alias `l`, in its order, for `SELECT` lists. */
export const LOG_COLUMNS = 'l.seq, l.id, l.partner_id, l.product, l.vin, l.payload, l.received_at, l.idempotency_key';

/** The parked columns of a `LogStatusRow`, of alias `p`. */
export const PARKED_COLUMNS = 'p.state, p.attempts, p.next_attempt_at, p.error, p.processed_at AS parked_processed_at';

/** The payload of a row, as it was appended. */
export function toNewIntake(row: LogRow): NewIntake {
  return {
    id: row.id,
    partnerId: row.partner_id,
    product: row.product,
    vin: row.vin,
    payload: row.payload,
    receivedAt: row.received_at,
    idempotencyKey: row.idempotency_key,
  };
}

/** The payload of a row with its place in the log (the SQL logs number a partition's rows by `seq`). */
export function toLoggedIntake(row: LogRow, partition: number): LoggedIntake {
  return { ...toNewIntake(row), partition, seq: row.seq };
}

/** The payload's record with its derived status; `inFlight` when a batch in hand holds it. */
export function toIntakeRecord(row: LogStatusRow, inFlight = false): IntakeRecord {
  const base = toNewIntake(row);
  const nextAttemptAt = row.next_attempt_at ?? row.received_at;
  switch (row.state) {
    case 'retry':
      return { ...base, status: inFlight ? 'processing' : 'queued', attempts: row.attempts!, nextAttemptAt, processedAt: null, error: row.error };
    case 'failed':
      return { ...base, status: 'failed', attempts: row.attempts!, nextAttemptAt, processedAt: row.parked_processed_at, error: row.error };
    case 'done':
      return { ...base, status: 'processed', attempts: row.attempts!, nextAttemptAt, processedAt: row.parked_processed_at, error: null };
    default:
      if (row.watermark !== null && row.seq <= row.watermark)
        return { ...base, status: 'processed', attempts: 1, nextAttemptAt, processedAt: row.batch_processed_at, error: null };
      return { ...base, status: inFlight ? 'processing' : 'queued', attempts: 0, nextAttemptAt, processedAt: null, error: null };
  }
}

/** A payload handed out in a batch, after `attempts` failed attempts. */
export function toIntakeEntry(row: LogRow, attempts: number): IntakeEntry {
  return {
    seq: row.seq,
    id: row.id,
    partnerId: row.partner_id,
    product: row.product,
    vin: row.vin,
    payload: row.payload,
    receivedAt: row.received_at,
    attempts,
  };
}

/** A log row as the core's batch plan takes it (`core/intake-batch-plan.ts`): from the parked rows (a retry) or past the position. */
export function toPlannedEntry(row: LogRow, partition: number, attempts: number, parked: boolean): PlannedEntry {
  return { partition, seq: row.seq, vin: row.vin, entry: toIntakeEntry(row, attempts), parked };
}
