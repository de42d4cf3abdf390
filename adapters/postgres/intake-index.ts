/**
 * The intake index on PostgreSQL (`IntakeIndex` of `core/intake-index.ts`): what the queue keeps
 * beside a log engine's log (NATS JetStream) — idempotency keys, each partition's committed
 * position, and a row per payload a batch has been through — in three tables of the store's schema
 * (component `intake-index`). Nothing is written here per payload at intake (a key, when given, is
 * the exception); a batch's rows and positions are one statement at its commit.
 *
 * A deployment that moves its log (from PostgreSQL's own to JetStream, or back) drains the old one
 * first: positions here are the log engine's, not PostgreSQL's sequence.
 */
import type { IntakeIndex, KeyHolder, PartitionState } from '../../core/intake-index.ts';
import type { NewIntake } from '../../core/intake-queue.ts';
import { applyPostgresMigrations, type PostgresMigration } from './migrations.ts';
import { quoteSchema } from './pool.ts';
import type { PostgresQueueHost } from './intake-queue.ts';
import { INDEX_ROW_COLUMNS, type IndexRow, toIndexed } from '../sql/index-rows.ts';

export const POSTGRES_INDEX_COMPONENT = 'intake-index';

export const POSTGRES_INDEX_MIGRATIONS: readonly PostgresMigration[] = [
  {
    name: '0001_intake_index',
    up: `
      CREATE TABLE intake_index_positions (
        part     INTEGER PRIMARY KEY,
        position BIGINT NOT NULL
      );
      -- A payload a batch has been through; its payload only while it may be processed again.
      CREATE TABLE intake_index_rows (
        part            INTEGER NOT NULL,
        seq             BIGINT NOT NULL,
        id              TEXT NOT NULL,
        partner_id      TEXT NOT NULL,
        product         TEXT NOT NULL,
        vin             TEXT NOT NULL,
        received_at     BIGINT NOT NULL,
        idempotency_key TEXT,
        payload         TEXT,
        state           TEXT NOT NULL CHECK (state IN ('retry', 'failed', 'done')),
        attempts        INTEGER NOT NULL,
        next_attempt_at BIGINT NOT NULL,
        error           TEXT,
        processed_at    BIGINT,
        PRIMARY KEY (part, seq)
      );
      CREATE INDEX intake_index_retries ON intake_index_rows (part, vin, seq) INCLUDE (next_attempt_at) WHERE state = 'retry';
      CREATE INDEX intake_index_failed ON intake_index_rows (seq) WHERE state = 'failed';
      CREATE INDEX intake_index_done ON intake_index_rows (processed_at) WHERE state = 'done';
      -- id is NULL while the key's payload is being appended.
      CREATE TABLE intake_index_keys (
        partner_id      TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        id              TEXT,
        vin             TEXT NOT NULL,
        product         TEXT NOT NULL,
        payload         TEXT NOT NULL,
        received_at     BIGINT NOT NULL,
        PRIMARY KEY (partner_id, idempotency_key)
      );
      CREATE INDEX intake_index_keys_by_age ON intake_index_keys (received_at);
    `,
  },
];

/** Opens the index in a PostgreSQL store's schema (applying its migrations); the pool stays the store's. */
export async function openPostgresIntakeIndex(host: PostgresQueueHost): Promise<IntakeIndex> {
  await applyPostgresMigrations(host.pool, host.schema, POSTGRES_INDEX_COMPONENT, POSTGRES_INDEX_MIGRATIONS);
  const { pool } = host;
  const s = quoteSchema(host.schema);
  // The pool explains its failures (an unreachable database is store_unavailable: pool.ts).
  const query = async <R extends object>(text: string, values: unknown[]): Promise<R[]> => (await pool.query<R & import('pg').QueryResultRow>(text, values)).rows;
  const holderOf = (row: { id: string | null; vin: string; product: string; payload: string; received_at: number }): KeyHolder => ({
    id: row.id,
    vin: row.vin,
    product: row.product,
    payload: row.payload,
    receivedAt: row.received_at,
  });
  const findKey = async (partnerId: string, key: string) => {
    const [row] = await query<{ id: string | null; vin: string; product: string; payload: string; received_at: number }>(
      `SELECT id, vin, product, payload, received_at FROM ${s}.intake_index_keys WHERE partner_id = $1 AND idempotency_key = $2`,
      [partnerId, key],
    );
    return row ? holderOf(row) : null;
  };

  return {
    async claimKey(item: NewIntake, windowMs: number, staleMs: number) {
      for (;;) {
        const claimed = await query(
          `INSERT INTO ${s}.intake_index_keys AS k (partner_id, idempotency_key, id, vin, product, payload, received_at)
           VALUES ($1, $2, NULL, $3, $4, $5, $6)
           ON CONFLICT (partner_id, idempotency_key) DO UPDATE
             SET id = NULL, vin = excluded.vin, product = excluded.product, payload = excluded.payload, received_at = excluded.received_at
             WHERE k.received_at <= excluded.received_at - $7 OR (k.id IS NULL AND k.received_at <= excluded.received_at - $8)
           RETURNING 1`,
          [item.partnerId, item.idempotencyKey, item.vin, item.product, item.payload, item.receivedAt, windowMs, staleMs],
        );
        if (claimed.length > 0) return null;
        // Held: by whom (gone again meanwhile, when its claim was let go: claim again).
        const holder = await findKey(item.partnerId, item.idempotencyKey!);
        if (holder) return holder;
      }
    },
    async settleKey(partnerId, key, id) {
      if (id === null) await query(`DELETE FROM ${s}.intake_index_keys WHERE partner_id = $1 AND idempotency_key = $2 AND id IS NULL`, [partnerId, key]);
      else await query(`UPDATE ${s}.intake_index_keys SET id = $3 WHERE partner_id = $1 AND idempotency_key = $2`, [partnerId, key, id]);
    },
    findKey,
    async partitionState(partition, now, limit): Promise<PartitionState> {
      const [positions, due, waiting] = await Promise.all([
        query<{ position: number }>(`SELECT position FROM ${s}.intake_index_positions WHERE part = $1`, [partition]),
        // A retry waits while an earlier one of its VIN is not due.
        query<IndexRow>(
          `SELECT ${INDEX_ROW_COLUMNS} FROM ${s}.intake_index_rows r
           WHERE r.part = $1 AND r.state = 'retry' AND r.next_attempt_at <= $2
             AND NOT EXISTS (SELECT 1 FROM ${s}.intake_index_rows e
                             WHERE e.part = r.part AND e.vin = r.vin AND e.state = 'retry' AND e.seq < r.seq AND e.next_attempt_at > $2)
           ORDER BY r.seq LIMIT $3`,
          [partition, now, limit],
        ),
        query<{ vin: string; n: number }>(`SELECT vin, count(*)::int AS n FROM ${s}.intake_index_rows WHERE part = $1 AND state = 'retry' GROUP BY vin`, [partition]),
      ]);
      return { position: positions[0]?.position ?? 0, due: due.map(toIndexed), waiting: new Map(waiting.map(({ vin, n }) => [vin, n])) };
    },
    async partitionsWithDueRetries(now) {
      return new Set((await query<{ part: number }>(`SELECT DISTINCT part FROM ${s}.intake_index_rows WHERE state = 'retry' AND next_attempt_at <= $1`, [now])).map((row) => row.part));
    },
    async position(partition) {
      return (await query<{ position: number }>(`SELECT position FROM ${s}.intake_index_positions WHERE part = $1`, [partition]))[0]?.position ?? 0;
    },
    async commit(rows, positions) {
      const moved = [...positions];
      // One statement, so one transaction: the rows and the positions past them.
      await query(
        `WITH written AS (
           INSERT INTO ${s}.intake_index_rows (${INDEX_ROW_COLUMNS})
           SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], $9::text[],
                                $10::text[], $11::int[], $12::bigint[], $13::text[], $14::bigint[])
           ON CONFLICT (part, seq) DO UPDATE SET payload = excluded.payload, state = excluded.state, attempts = excluded.attempts,
             next_attempt_at = excluded.next_attempt_at, error = excluded.error, processed_at = excluded.processed_at
         ), moved AS (
           INSERT INTO ${s}.intake_index_positions AS p (part, position) SELECT * FROM unnest($15::int[], $16::bigint[])
           ON CONFLICT (part) DO UPDATE SET position = excluded.position WHERE p.position < excluded.position
         )
         SELECT 1`,
        [
          rows.map((row) => row.partition),
          rows.map((row) => row.seq),
          rows.map((row) => row.id),
          rows.map((row) => row.partnerId),
          rows.map((row) => row.product),
          rows.map((row) => row.vin),
          rows.map((row) => row.receivedAt),
          rows.map((row) => row.idempotencyKey),
          rows.map((row) => row.payload),
          rows.map((row) => row.state),
          rows.map((row) => row.attempts),
          rows.map((row) => row.nextAttemptAt),
          rows.map((row) => row.error),
          rows.map((row) => row.processedAt),
          moved.map(([partition]) => partition),
          moved.map(([, seq]) => seq),
        ],
      );
    },
    async row(partition, seq) {
      const [row] = await query<IndexRow>(`SELECT ${INDEX_ROW_COLUMNS} FROM ${s}.intake_index_rows WHERE part = $1 AND seq = $2`, [partition, seq]);
      return row ? toIndexed(row) : null;
    },
    async rows(positions) {
      if (positions.length === 0) return [];
      const rows = await query<IndexRow>(
        `SELECT ${INDEX_ROW_COLUMNS} FROM ${s}.intake_index_rows JOIN unnest($1::int[], $2::bigint[]) AS wanted (part, seq) USING (part, seq)`,
        [positions.map((at) => at.partition), positions.map((at) => at.seq)],
      );
      return rows.map(toIndexed);
    },
    async listFailed(limit) {
      return (await query<IndexRow>(`SELECT ${INDEX_ROW_COLUMNS} FROM ${s}.intake_index_rows WHERE state = 'failed' ORDER BY seq LIMIT $1`, [limit])).map(toIndexed);
    },
    async requeue(partition, seq, at) {
      const changed = await query(
        `UPDATE ${s}.intake_index_rows SET state = 'retry', attempts = 0, next_attempt_at = $3, processed_at = NULL
         WHERE part = $1 AND seq = $2 AND state = 'failed' RETURNING 1`,
        [partition, seq, at],
      );
      return changed.length > 0;
    },
    async purge(before, keysBefore, limit) {
      const [{ n }] = (await query<{ n: number }>(
        `WITH gone AS (
           DELETE FROM ${s}.intake_index_rows r USING (
             SELECT part, seq FROM ${s}.intake_index_rows WHERE state = 'done' AND processed_at < $1 ORDER BY processed_at LIMIT $2) d
           WHERE r.part = d.part AND r.seq = d.seq RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [before, limit],
      )) as [{ n: number }];
      await query(
        `DELETE FROM ${s}.intake_index_keys WHERE (partner_id, idempotency_key) IN (
           SELECT partner_id, idempotency_key FROM ${s}.intake_index_keys WHERE received_at < $1 LIMIT $2)`,
        [keysBefore, limit],
      );
      return n;
    },
    async retries() {
      return (await query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.intake_index_rows WHERE state = 'retry'`, []))[0]!.n;
    },
    async close() {},
  };
}
