/**
 * The log part of the SQLite intake (`IntakeLog` of `core/intake-log.ts`), over the tables the intake
 * queue keeps in the store's file: `intake_log` (the payloads, by rowid) and `intake_batches` (the
 * committed position is the greatest `last_seq`). One partition: a file has one intake writer, so
 * its rowid order is already every VIN's order, and leases are held within the process (the file's
 * processing process is one: docs/intake-path.md). The server's SQLite intake does not go through
 * this view — its queue commits a batch's outcomes and the position in one transaction — but it
 * shows what the file provides as a log, and it passes the log conformance suite.
 */
import type Database from 'better-sqlite3';
import type { TrailwireError } from '../../core/errors.ts';
import type { IntakeLog, LoggedIntake, LogPosition, PartitionLease } from '../../core/intake-log.ts';
import type { NewIntake } from '../../core/intake-queue.ts';
import { LOG_COLUMNS, type LogRow, toLoggedIntake } from '../sql/log-rows.ts';
import { QUEUE_COMPONENT, QUEUE_MIGRATIONS } from './intake-queue.ts';
import { applyMigrations } from './migrations.ts';
import { storageFaultError } from './storage-faults.ts';

/** Leased partitions per database file, across the instances of this process. */
const leasedFiles = new Map<unknown, Set<number>>();

/** Opens the log view of a store's database (`store.db`), applying the queue's migrations. */
export function openSqliteIntakeLog(db: Database.Database): IntakeLog {
  applyMigrations(db, QUEUE_COMPONENT, QUEUE_MIGRATIONS);
  const sql = {
    append: db.prepare<[string, string, string, string, string, number, string | null]>(
      'INSERT INTO intake_log (id, partner_id, product, vin, payload, received_at, idempotency_key) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    read: db.prepare<[number, number], LogRow>(`SELECT ${LOG_COLUMNS} FROM intake_log l WHERE l.seq > ? ORDER BY l.seq LIMIT ?`),
    at: db.prepare<[number], LogRow>(`SELECT ${LOG_COLUMNS} FROM intake_log l WHERE l.seq = ?`),
    pending: db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM intake_log WHERE seq > ?'),
    committed: db.prepare<[], { seq: number | null }>('SELECT max(last_seq) AS seq FROM intake_batches'),
    commit: db.prepare<[number, number]>('INSERT OR IGNORE INTO intake_batches (last_seq, processed_at) VALUES (?, ?)'),
  };
  const appendGroup = db.transaction((group: readonly NewIntake[]) =>
    group.map((item) => Number(sql.append.run(item.id, item.partnerId, item.product, item.vin, item.payload, item.receivedAt, item.idempotencyKey).lastInsertRowid)),
  );
  // Connections to one file share its leases; an in-memory database is its connection's alone.
  const file: unknown = db.memory ? db : db.name;
  const leased = leasedFiles.get(file) ?? new Set<number>();
  leasedFiles.set(file, leased);
  const mine = new Set<PartitionLease>();
  const committed = () => sql.committed.get()!.seq ?? 0;

  return {
    partitions: 1,
    partitionOf: () => 0,
    async append(group) {
      let seqs: number[];
      try {
        seqs = appendGroup.immediate(group);
      } catch (error) {
        const fault = storageFaultError(error, 'the intake log');
        if (!fault) throw error;
        return group.map((): LogPosition | TrailwireError => fault);
      }
      return seqs.map((seq) => ({ partition: 0, seq }));
    },
    async read(_partition, after, limit) {
      return sql.read.all(after, limit).map((row) => toLoggedIntake(row, 0));
    },
    async at({ partition, seq }) {
      const row = partition === 0 ? sql.at.get(seq) : undefined;
      return row ? toLoggedIntake(row, 0) : null;
    },
    async pending() {
      return [sql.pending.get(committed())!.n];
    },
    async commit(_partition, seq) {
      // A row per commit, as the queue's batches write them; an older position adds nothing that counts.
      if (seq > committed()) sql.commit.run(seq, Date.now());
    },
    async committed() {
      return committed();
    },
    async lease(partition) {
      if (leased.has(partition)) return null;
      leased.add(partition);
      let held = true;
      const lease: PartitionLease = {
        partition,
        get held() {
          return held;
        },
        async release() {
          if (!held) return;
          held = false;
          leased.delete(partition);
          mine.delete(lease);
        },
      };
      mine.add(lease);
      return lease;
    },
    async close() {
      for (const lease of [...mine]) await lease.release();
    },
  };
}
