/**
 * The log part of the PostgreSQL intake (`IntakeLog` of `core/intake-log.ts`), over the queue's own
 * tables (`intake_log`, `intake_partitions`, migration `0003_intake_log`): 16 partitions by a hash
 * of the VIN (`intake_partition`, md5's first byte), positions from one sequence, the committed
 * position the partition's watermark. A lease is a session advisory lock on the key the queue's
 * batches take, held by one connection of this instance outside the pool: a process that dies, or
 * loses that connection, loses its leases with it. The server's PostgreSQL intake does not go
 * through this view — its queue commits a batch's outcomes and watermarks in one statement — but it
 * is what the database provides as a log, and it passes the log conformance suite.
 *
 * Reads never skip (the "Sequence gaps" rule of `intake-queue.ts`): a sequence hands out numbers at
 * INSERT, so a read first takes the append lock exclusively for an instant — every seq drawn until
 * then is committed or rolled back — and reads nothing past that horizon.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { isTrailwireError, type TrailwireError } from '../../core/errors.ts';
import type { IntakeLog, LoggedIntake, LogPosition, PartitionLease } from '../../core/intake-log.ts';
import { LOG_COLUMNS, type LogRow, toLoggedIntake } from '../sql/log-rows.ts';
import { INTAKE_PARTITIONS } from './intake-queue.ts';
import { applyPostgresMigrations, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS } from './migrations.ts';
import { explainPostgresFailure, quoteSchema, withTransaction } from './pool.ts';
import type { PostgresQueueHost } from './intake-queue.ts';

/** Opens the log view of a PostgreSQL store's schema (applying the queue's migrations); `close()` it (the pool stays open). */
export async function openPostgresIntakeLog(host: PostgresQueueHost): Promise<IntakeLog> {
  await applyPostgresMigrations(host.pool, host.schema, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS);
  const { pool, schema } = host;
  const s = quoteSchema(schema);
  const lockKey = (name: string) => `hashtextextended('trailwire:${name}:' || $1::text, 0)`;
  /** The one session holding this instance's leases, opened at the first lease. */
  let session: Promise<pg.Client> | undefined;
  const leases = new Map<number, { held: boolean }>();
  let closed = false;

  const openSession = () =>
    (session ??= (async () => {
      const client = new pg.Client({ ...pool.options, application_name: 'trailwire:intake-leases' });
      const lose = () => {
        if (session === undefined) return;
        session = undefined;
        // Its locks went with it.
        for (const lease of leases.values()) lease.held = false;
        leases.clear();
        client.end().catch(() => {});
      };
      client.on('error', lose);
      client.on('end', lose);
      try {
        await client.connect();
      } catch (error) {
        session = undefined;
        throw error;
      }
      return client;
    })());

  return {
    partitions: INTAKE_PARTITIONS,
    partitionOf: (vin) => createHash('md5').update(vin).digest()[0]! % INTAKE_PARTITIONS,
    async append(group) {
      try {
        const rows = await withTransaction(pool, async (client) => {
          // Shared with every append; a read takes it exclusively for an instant (see the top).
          await client.query(`SELECT pg_advisory_xact_lock_shared(${lockKey('intake-append')})`, [schema]);
          const inserted = await client.query<{ id: string; part: number; seq: number }>(
            `INSERT INTO ${s}.intake_log (part, seq, id, partner_id, product, vin, payload, received_at, idempotency_key)
             SELECT ${s}.intake_partition(i.vin), nextval('${s}.intake_log_seq'), i.id, i.partner_id, i.product, i.vin, i.payload, i.received_at, i.idempotency_key
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[]) WITH ORDINALITY
               AS i (id, partner_id, product, vin, payload, received_at, idempotency_key, position)
             ORDER BY i.position
             RETURNING id, part, seq`,
            [
              group.map((item) => item.id),
              group.map((item) => item.partnerId),
              group.map((item) => item.product),
              group.map((item) => item.vin),
              group.map((item) => item.payload),
              group.map((item) => item.receivedAt),
              group.map((item) => item.idempotencyKey),
            ],
          );
          return inserted.rows;
        });
        const byId = new Map(rows.map((row) => [row.id, { partition: row.part, seq: row.seq }]));
        return group.map((item) => byId.get(item.id)!);
      } catch (error) {
        const explained = explainPostgresFailure(error);
        if (!isTrailwireError(explained)) throw error;
        return group.map((): LogPosition | TrailwireError => explained);
      }
    },
    async read(partition, after, limit) {
      const client = await pool.connect();
      let rows: LogRow[];
      try {
        await client.query(`SELECT pg_advisory_lock(${lockKey('intake-append')})`, [schema]);
        const horizon = await client.query<{ last_value: number }>(
          `SELECT last_value, pg_advisory_unlock(${lockKey('intake-append')}) FROM ${s}.intake_log_seq`,
          [schema],
        );
        rows = (
          await client.query<LogRow>(`SELECT ${LOG_COLUMNS} FROM ${s}.intake_log l WHERE l.part = $1 AND l.seq > $2 AND l.seq <= $3 ORDER BY l.seq LIMIT $4`, [
            partition,
            after,
            horizon.rows[0]!.last_value,
            limit,
          ])
        ).rows;
        client.release();
      } catch (error) {
        client.release(error instanceof Error ? error : true);
        throw explainPostgresFailure(error);
      }
      return rows.map((row) => toLoggedIntake(row, partition));
    },
    async at({ partition, seq }) {
      const row = (await pool.query<LogRow>(`SELECT ${LOG_COLUMNS} FROM ${s}.intake_log l WHERE l.part = $1 AND l.seq = $2`, [partition, seq])).rows[0];
      return row ? toLoggedIntake(row, partition) : null;
    },
    async pending() {
      const counts = new Array<number>(INTAKE_PARTITIONS).fill(0);
      const rows = await pool.query<{ part: number; n: number }>(
        `SELECT w.part, (SELECT count(*) FROM ${s}.intake_log l WHERE l.part = w.part AND l.seq > w.watermark)::int AS n FROM ${s}.intake_partitions w`,
      );
      for (const { part, n } of rows.rows) counts[part] = n;
      return counts;
    },
    async commit(partition, seq, at) {
      // The batch row keeps the processed time the queue's status reads derive.
      await pool.query(
        `WITH moved AS (UPDATE ${s}.intake_partitions SET watermark = $2 WHERE part = $1 AND watermark < $2 RETURNING part, watermark)
         INSERT INTO ${s}.intake_batches (part, last_seq, processed_at) SELECT part, watermark, $3 FROM moved`,
        [partition, seq, at],
      );
    },
    async committed(partition) {
      return (await pool.query<{ watermark: number }>(`SELECT watermark FROM ${s}.intake_partitions WHERE part = $1`, [partition])).rows[0]?.watermark ?? 0;
    },
    async lease(partition) {
      if (closed || leases.has(partition)) return null;
      const client = await openSession();
      const key = `${schema}:${partition}`;
      const taken = await client.query<{ taken: boolean }>(`SELECT pg_try_advisory_lock(${lockKey('intake-part')}) AS taken`, [key]);
      // Taken twice meanwhile by this instance: a session lock counts, so let the second go.
      if (taken.rows[0]!.taken && leases.has(partition)) await client.query(`SELECT pg_advisory_unlock(${lockKey('intake-part')})`, [key]);
      if (!taken.rows[0]!.taken || leases.has(partition)) return null;
      const state = { held: true };
      leases.set(partition, state);
      const lease: PartitionLease = {
        partition,
        get held() {
          return state.held;
        },
        async release() {
          if (!state.held) return;
          state.held = false;
          leases.delete(partition);
          await client.query(`SELECT pg_advisory_unlock(${lockKey('intake-part')})`, [key]).catch(() => {});
        },
      };
      return lease;
    },
    async close() {
      closed = true;
      const open = session;
      session = undefined;
      for (const lease of leases.values()) lease.held = false;
      leases.clear();
      if (open) await (await open.catch(() => undefined))?.end().catch(() => {});
    },
  };
}
