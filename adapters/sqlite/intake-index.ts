/**
 * The intake index in the SQLite file (`IntakeIndex` of `core/intake-index.ts`): idempotency keys,
 * each partition's committed position, and a row per payload a batch has been through, in three
 * tables of component `intake-index` — the same shape as PostgreSQL's (`adapters/postgres/intake-index.ts`).
 * With `openSqliteIntakeLog` it makes the file a log + index that `PartitionedIntakeQueue` composes,
 * which is how the file runs the index and composed-queue suites; the server's SQLite intake keeps
 * its fused queue (one transaction per batch for log and index, on the processing thread).
 */
import type Database from 'better-sqlite3';
import type { IndexedIntake, IntakeIndex, KeyHolder } from '../../core/intake-index.ts';
import { applyMigrations, type Migration } from './migrations.ts';
import { INDEX_ROW_COLUMNS, type IndexRow, toIndexed } from '../sql/index-rows.ts';

export const INDEX_COMPONENT = 'intake-index';

export const INDEX_MIGRATIONS: readonly Migration[] = [
  {
    name: '0001_intake_index',
    up: `
      CREATE TABLE intake_index_positions (
        part     INTEGER PRIMARY KEY,
        position INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE intake_index_rows (
        part            INTEGER NOT NULL,
        seq             INTEGER NOT NULL,
        id              TEXT NOT NULL,
        partner_id      TEXT NOT NULL,
        product         TEXT NOT NULL,
        vin             TEXT NOT NULL,
        received_at     INTEGER NOT NULL,
        idempotency_key TEXT,
        payload         TEXT,
        state           TEXT NOT NULL CHECK (state IN ('retry', 'failed', 'done')),
        attempts        INTEGER NOT NULL,
        next_attempt_at INTEGER NOT NULL,
        error           TEXT,
        processed_at    INTEGER,
        PRIMARY KEY (part, seq)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX intake_index_retries ON intake_index_rows (part, vin, seq, next_attempt_at) WHERE state = 'retry';
      CREATE INDEX intake_index_failed ON intake_index_rows (seq) WHERE state = 'failed';
      CREATE INDEX intake_index_done ON intake_index_rows (processed_at) WHERE state = 'done';
      CREATE TABLE intake_index_keys (
        partner_id      TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        id              TEXT,
        vin             TEXT NOT NULL,
        product         TEXT NOT NULL,
        payload         TEXT NOT NULL,
        received_at     INTEGER NOT NULL,
        PRIMARY KEY (partner_id, idempotency_key)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX intake_index_keys_by_age ON intake_index_keys (received_at);
    `,
  },
];

/** Opens the index in a store's database (`store.db`), applying its migrations. */
export function openSqliteIntakeIndex(db: Database.Database): IntakeIndex {
  applyMigrations(db, INDEX_COMPONENT, INDEX_MIGRATIONS);
  const sql = {
    claim: db.prepare(
      `INSERT INTO intake_index_keys AS k (partner_id, idempotency_key, id, vin, product, payload, received_at)
       VALUES (:partnerId, :key, NULL, :vin, :product, :payload, :receivedAt)
       ON CONFLICT (partner_id, idempotency_key) DO UPDATE
         SET id = NULL, vin = excluded.vin, product = excluded.product, payload = excluded.payload, received_at = excluded.received_at
         WHERE k.received_at <= excluded.received_at - :window OR (k.id IS NULL AND k.received_at <= excluded.received_at - :stale)`,
    ),
    findKey: db.prepare<[string, string], { id: string | null; vin: string; product: string; payload: string; received_at: number }>(
      'SELECT id, vin, product, payload, received_at FROM intake_index_keys WHERE partner_id = ? AND idempotency_key = ?',
    ),
    letKeyGo: db.prepare<[string, string]>('DELETE FROM intake_index_keys WHERE partner_id = ? AND idempotency_key = ? AND id IS NULL'),
    nameKey: db.prepare<[string, string, string]>('UPDATE intake_index_keys SET id = ? WHERE partner_id = ? AND idempotency_key = ?'),
    position: db.prepare<[number], { position: number }>('SELECT position FROM intake_index_positions WHERE part = ?'),
    due: db.prepare<{ part: number; now: number; limit: number }, IndexRow>(
      `SELECT ${INDEX_ROW_COLUMNS} FROM intake_index_rows r
       WHERE r.part = :part AND r.state = 'retry' AND r.next_attempt_at <= :now
         AND NOT EXISTS (SELECT 1 FROM intake_index_rows e
                         WHERE e.part = r.part AND e.vin = r.vin AND e.state = 'retry' AND e.seq < r.seq AND e.next_attempt_at > :now)
       ORDER BY r.seq LIMIT :limit`,
    ),
    waiting: db.prepare<[number], { vin: string; n: number }>("SELECT vin, count(*) AS n FROM intake_index_rows WHERE part = ? AND state = 'retry' GROUP BY vin"),
    dueParts: db.prepare<[number], { part: number }>("SELECT DISTINCT part FROM intake_index_rows WHERE state = 'retry' AND next_attempt_at <= ?"),
    write: db.prepare(
      `INSERT INTO intake_index_rows (${INDEX_ROW_COLUMNS})
       VALUES (:partition, :seq, :id, :partnerId, :product, :vin, :receivedAt, :idempotencyKey, :payload, :state, :attempts, :nextAttemptAt, :error, :processedAt)
       ON CONFLICT (part, seq) DO UPDATE SET payload = excluded.payload, state = excluded.state, attempts = excluded.attempts,
         next_attempt_at = excluded.next_attempt_at, error = excluded.error, processed_at = excluded.processed_at`,
    ),
    move: db.prepare<[number, number]>(
      `INSERT INTO intake_index_positions AS p (part, position) VALUES (?, ?)
       ON CONFLICT (part) DO UPDATE SET position = excluded.position WHERE p.position < excluded.position`,
    ),
    row: db.prepare<[number, number], IndexRow>(`SELECT ${INDEX_ROW_COLUMNS} FROM intake_index_rows WHERE part = ? AND seq = ?`),
    failed: db.prepare<[number], IndexRow>(`SELECT ${INDEX_ROW_COLUMNS} FROM intake_index_rows WHERE state = 'failed' ORDER BY seq LIMIT ?`),
    requeue: db.prepare<{ part: number; seq: number; at: number }>(
      "UPDATE intake_index_rows SET state = 'retry', attempts = 0, next_attempt_at = :at, processed_at = NULL WHERE part = :part AND seq = :seq AND state = 'failed'",
    ),
    trimRows: db.prepare<[number, number]>(
      `DELETE FROM intake_index_rows WHERE (part, seq) IN (
         SELECT part, seq FROM intake_index_rows WHERE state = 'done' AND processed_at < ? ORDER BY processed_at LIMIT ?)`,
    ),
    trimKeys: db.prepare<[number, number]>(
      `DELETE FROM intake_index_keys WHERE (partner_id, idempotency_key) IN (
         SELECT partner_id, idempotency_key FROM intake_index_keys WHERE received_at < ? LIMIT ?)`,
    ),
    retries: db.prepare<[], { n: number }>("SELECT count(*) AS n FROM intake_index_rows WHERE state = 'retry'"),
  };
  const holderOf = (row: { id: string | null; vin: string; product: string; payload: string; received_at: number }): KeyHolder => ({
    id: row.id,
    vin: row.vin,
    product: row.product,
    payload: row.payload,
    receivedAt: row.received_at,
  });
  const findKey = (partnerId: string, key: string) => {
    const row = sql.findKey.get(partnerId, key);
    return row ? holderOf(row) : null;
  };
  // One transaction: the rows and the positions past them.
  const commit = db.transaction((rows: readonly IndexedIntake[], positions: ReadonlyMap<number, number>) => {
    for (const row of rows) sql.write.run(row);
    for (const [partition, seq] of positions) sql.move.run(partition, seq);
  });

  return {
    async claimKey(item, windowMs, staleMs) {
      const params = { partnerId: item.partnerId, key: item.idempotencyKey, vin: item.vin, product: item.product, payload: item.payload, receivedAt: item.receivedAt, window: windowMs, stale: staleMs };
      if (sql.claim.run(params).changes > 0) return null;
      return findKey(item.partnerId, item.idempotencyKey!);
    },
    async settleKey(partnerId, key, id) {
      if (id === null) sql.letKeyGo.run(partnerId, key);
      else sql.nameKey.run(id, partnerId, key);
    },
    findKey: async (partnerId, key) => findKey(partnerId, key),
    async partitionState(partition, now, limit) {
      return {
        position: sql.position.get(partition)?.position ?? 0,
        due: sql.due.all({ part: partition, now, limit }).map(toIndexed),
        waiting: new Map(sql.waiting.all(partition).map(({ vin, n }) => [vin, n])),
      };
    },
    async partitionsWithDueRetries(now) {
      return new Set(sql.dueParts.all(now).map((row) => row.part));
    },
    async position(partition) {
      return sql.position.get(partition)?.position ?? 0;
    },
    async commit(rows, positions) {
      commit.immediate(rows, positions);
    },
    async row(partition, seq) {
      const row = sql.row.get(partition, seq);
      return row ? toIndexed(row) : null;
    },
    async listFailed(limit) {
      return sql.failed.all(limit).map(toIndexed);
    },
    async requeue(partition, seq, at) {
      return sql.requeue.run({ part: partition, seq, at }).changes > 0;
    },
    async purge(before, keysBefore, limit) {
      const trimmed = sql.trimRows.run(before, limit).changes;
      sql.trimKeys.run(keysBefore, limit);
      return trimmed;
    },
    async retries() {
      return sql.retries.get()!.n;
    },
    async close() {},
  };
}
