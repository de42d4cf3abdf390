/**
 * The durable intake log on PostgreSQL (`IntakeQueue` of `core/intake-queue.ts`), shared by any
 * number of Trailwire processes (contract 11). It lives in the store's schema and uses the store's
 * pool (tables and functions: migration `0003_intake_log`).
 *
 * APPENDS. Enqueues arriving in the same event-loop turn are written together, by one call of
 * `intake_append` (one multi-row INSERT, autocommitted: a group commit), and each resolves once that
 * commit is done, so a 202 follows a durable append. The log row has one index besides its
 * (partition, seq) key, the id the status endpoint looks up; an idempotency key, when given, goes
 * to its own small table in the same transaction, which is what makes the check atomic with the
 * append. A VIN belongs to one of 16 partitions (a hash of it, `intake_partition`).
 *
 * BATCHES, and why no payload is ever skipped or run beside another of its VIN:
 * - Sharing. A batch leases the partitions it reads (`intake_batch_candidates`): session advisory locks
 *   of the pool connection the batch keeps until it ends. A VIN lives in one partition, so no two
 *   batches anywhere ever hold one VIN. A process that dies (or loses the connection) loses its
 *   leases with the connection, not data: its batch was never committed, so the payloads are still
 *   above the watermark, or still parked, for the next batch to take. Nothing has to be recovered,
 *   hence no "abandoned check" interval: the lease ends with the session.
 * - The watermark. Each partition's watermark only moves past what a batch read, at its commit,
 *   and the lease is let go only after the commit, so the next batch of the partition (whose
 *   reading statement starts after it got the lease) sees that commit.
 * - Sequence gaps. A sequence hands out numbers at INSERT, not at COMMIT: an append may commit seq
 *   12 while seq 11 is still in flight, and a reader that moved the watermark past 12 would lose 11.
 *   So appends take a shared advisory lock before they draw a seq, and a batch first takes it
 *   exclusively for an instant: then no append is in flight, every seq up to the sequence's last
 *   value is committed or rolled back, and the batch reads nothing beyond that horizon.
 * - Order. The batch policy is the core's (`planBatch` and `settleBatch`, core/intake-batch-plan.ts),
 *   as on SQLite: due retries first, each VIN's in order; a log payload whose VIN still has a
 *   retry waiting outside the batch is held back and parked behind it at the commit. The statement
 *   only reads what the plan picks from, in the same round trip that leases: the due retries (a
 *   parked payload is not due while an earlier one of its VIN is not), what follows the watermarks,
 *   no more than `limit` in all, and for each payload past a watermark the retries its VIN has
 *   waiting.
 * A batch reads up to `MAX_PARTITIONS_PER_BATCH` partitions, half of them, so that a second process
 * (or a second worker) always finds work beside the first.
 *
 * STATUS is derived: at or below the partition's watermark and not parked → `processed` (at the
 * time of the batch that moved the watermark past it, `intake_batches`); above → `queued`, or
 * `processing` while a batch of this instance holds it; parked rows say retry / failed / done
 * (`adapters/sql/log-rows.ts`, shared with SQLite). Retention trims the log behind the watermarks.
 *
 * The queue's own session (outside the pool) LISTENs, so `onEnqueued` hears of enqueues made by
 * every process, which wakes idle workers everywhere.
 *
 * Open it with `await openPostgresIntakeQueue(store)`; `close()` it after stopping its worker (it
 * does not close the store's pool).
 */
import pg from 'pg';
import { Backoff } from '../../core/backoff.ts';
import { TrailwireError } from '../../core/errors.ts';
import {
  type EnqueueResult,
  IDEMPOTENCY_WINDOW_MS,
  type IntakeBatch,
  type IntakeOutcome,
  type ProcessableIntakeQueue,
  type IntakeRecord,
  type NewIntake,
  type PendingEnqueue,
  queuedRecord,
} from '../../core/intake-queue.ts';
import { type BatchPlan, inOpenBatches, type PlannedEntry, planBatch, settleBatch, waitingKey } from '../../core/intake-batch-plan.ts';
import { LOG_COLUMNS, type LogRow, type LogStatusRow, PARKED_COLUMNS, toIntakeRecord, toPlannedEntry } from '../sql/log-rows.ts';
import { withoutUndefined } from '../sql/rows.ts';
import { applyPostgresMigrations, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS } from './migrations.ts';
import { queryRow, queryRows, queryRun, quoteSchema, type Statement } from './pool.ts';
import type { PostgresStore } from './postgres-store.ts';

export interface PostgresIntakeQueueOptions {
  /**
   * Called when a payload has been enqueued into this schema by any process, this one included
   * (LISTEN/NOTIFY), and after the queue's session reconnects (notices may have been missed). Pass
   * the worker's `notify`. Default: none, and the queue opens no session of its own.
   */
  onEnqueued?: () => void;
  /** How long to wait before reopening a lost session, in ms; doubled after each failure, up to 30 s. Default 1000. */
  reconnectDelayMs?: number;
}

export const DEFAULT_POSTGRES_INTAKE_QUEUE_OPTIONS = {
  reconnectDelayMs: 1000,
} as const satisfies Omit<Required<PostgresIntakeQueueOptions>, 'onEnqueued'>;

export type PostgresIntakeQueueSettings = Omit<Required<PostgresIntakeQueueOptions>, 'onEnqueued'> & Pick<PostgresIntakeQueueOptions, 'onEnqueued'>;

/** The log's partitions (`intake_partition` hashes a VIN into 0..15), and how many one batch leases at most. */
export const INTAKE_PARTITIONS = 16;
const MAX_PARTITIONS_PER_BATCH = INTAKE_PARTITIONS / 2;

const MAX_RECONNECT_DELAY_MS = 30_000;

/** One channel for every schema; the notice's payload names the schema. */
const ENQUEUED_CHANNEL = 'trailwire_intake';

/** Appends whose key keeps changing hands under them give up after this many groups. */
const ENQUEUE_TRIES = 5;

/** The parts of a PostgreSQL store the queue shares: its pool and schema. */
export type PostgresQueueHost = Pick<PostgresStore, 'pool' | 'schema'>;

/**
 * Applies the queue's migrations to the store's schema (turning a claim-based queue of an earlier
 * version into the log, its payloads kept) and, with `onEnqueued`, opens the queue's own session.
 * Rejects (with nothing left open) when the database cannot be reached.
 */
export async function openPostgresIntakeQueue(host: PostgresQueueHost, options: PostgresIntakeQueueOptions = {}): Promise<PostgresIntakeQueue> {
  const settings = resolvePostgresIntakeQueueOptions(options);
  await applyPostgresMigrations(host.pool, host.schema, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS);
  const queue = new PostgresIntakeQueue(host.pool, host.schema, settings);
  if (settings.onEnqueued !== undefined) await queue.openSession();
  return queue;
}

/** Checks the options, naming the first bad field, and fills in the defaults. */
export function resolvePostgresIntakeQueueOptions(options: PostgresIntakeQueueOptions): PostgresIntakeQueueSettings {
  if (typeof options !== 'object' || options === null) throw badOption('options', 'must be an object');
  const resolved = { ...DEFAULT_POSTGRES_INTAKE_QUEUE_OPTIONS, ...withoutUndefined(options) };
  if (resolved.onEnqueued !== undefined && typeof resolved.onEnqueued !== 'function') throw badOption('onEnqueued', 'must be a function');
  if (!Number.isSafeInteger(resolved.reconnectDelayMs) || resolved.reconnectDelayMs < 1) {
    throw badOption('reconnectDelayMs', `must be a positive integer of milliseconds (got ${String(resolved.reconnectDelayMs)})`);
  }
  return resolved;
}

/** An enqueue with the groups it has been in (its key kept changing hands under it). */
interface TriedEnqueue extends PendingEnqueue {
  tries: number;
}

/** A row of `intake_batch_candidates`: a due retry (`parked`) or a payload past the watermark (`log`, with its VIN's retries `waiting`). */
interface CandidateRow extends LogRow {
  kind: 'parked' | 'log';
  part: number;
  attempts: number;
  waiting: number | null;
}

/** A batch of this queue: the pool connection holding its partitions' leases, until it ends. */
interface PostgresBatch extends IntakeBatch {
  readonly owner: PostgresIntakeQueue;
  readonly client: pg.PoolClient;
  /** The core's plan (`core/intake-batch-plan.ts`) of what the batch statement read. */
  readonly plan: BatchPlan<PlannedEntry>;
  ended: boolean;
}

export class PostgresIntakeQueue implements ProcessableIntakeQueue {
  private readonly sql: QueueStatements;
  private pending: TriedEnqueue[] = [];
  private flushScheduled = false;
  private flushing: Promise<void> | undefined;
  private readonly open = new Set<PostgresBatch>();
  /** Committed batches whose leases are being let go of. */
  private readonly lettingGo = new Set<Promise<void>>();
  private session: pg.Client | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private readonly reconnectDelay: Backoff;
  private closed = false;

  /** Use `openPostgresIntakeQueue`: the queue needs its migrations first. */
  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly settings: PostgresIntakeQueueSettings,
  ) {
    this.sql = queueStatements(schema);
    this.reconnectDelay = new Backoff(settings.reconnectDelayMs, MAX_RECONNECT_DELAY_MS);
  }

  enqueue(item: NewIntake): Promise<EnqueueResult> {
    if (this.closed) return Promise.reject(new TrailwireError('unavailable', 'the intake queue is closed'));
    return new Promise((resolve, reject) => {
      this.pending.push({ item, tries: 0, resolve, reject });
      this.scheduleFlush();
    });
  }

  async findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    const key = await queryRow<{ id: string; received_at: number }>(this.pool, this.sql.keyOf, [partnerId, idempotencyKey]);
    return key !== undefined && key.received_at > since ? this.get(key.id) : null;
  }

  async get(id: string): Promise<IntakeRecord | null> {
    const row = await queryRow<LogStatusRow>(this.pool, this.sql.statusById, [id]);
    return row === undefined ? null : toIntakeRecord(row, inOpenBatches(this.open, row.seq));
  }

  async getMany(ids: readonly string[]): Promise<Map<string, IntakeRecord>> {
    const rows = ids.length === 0 ? [] : await queryRows<LogStatusRow>(this.pool, this.sql.statusByIds, [ids]);
    return new Map(rows.map((row) => [row.id, toIntakeRecord(row, inOpenBatches(this.open, row.seq))]));
  }

  async nextBatch(limit: number, now: number): Promise<IntakeBatch | null> {
    if (this.closed) return null;
    // Partitions this queue's last batches held would otherwise look taken.
    if (this.lettingGo.size > 0) await Promise.all(this.lettingGo);
    const client = await this.pool.connect();
    // A checked-out connection that fails (the server restarts, the batch's process is cut off)
    // emits 'error'; unheard, that would end the process. The batch's next query fails instead.
    client.on('error', ignoreError);
    try {
      for (;;) {
        const rows = await queryRows<CandidateRow>(client, this.sql.batchCandidates, [now, limit, MAX_PARTITIONS_PER_BATCH]);
        if (rows.length === 0) {
          release(client);
          return null;
        }
        const batch = this.batchOf(client, rows, limit);
        if (batch.entries.length > 0) {
          this.open.add(batch);
          return batch;
        }
        // Everything read was held back: park it, move the watermarks, let go, and read on.
        await this.record(batch, new Map(), now);
        await queryRun(client, this.sql.letGo, []);
      }
    } catch (error) {
      // Destroyed, not returned: whatever leases it held go with it.
      release(client, error);
      throw error;
    }
  }

  async commitBatch(batch: IntakeBatch, outcomes: ReadonlyMap<number, IntakeOutcome>, now: number): Promise<void> {
    const open = this.ownBatch(batch);
    this.open.delete(open);
    open.ended = true;
    try {
      await this.record(open, outcomes, now);
    } catch (error) {
      release(open.client, error);
      throw error;
    }
    // The leases go once the caller has seen the commit: whatever it does on it (a process telling
    // its other workers) comes before another batch can take the partitions. This queue's own next
    // batch waits for them to be let go (see nextBatch).
    const lettingGo = queryRun(open.client, this.sql.letGo, []).then(
      () => release(open.client),
      (error: unknown) => release(open.client, error),
    );
    this.lettingGo.add(lettingGo);
    void lettingGo.finally(() => this.lettingGo.delete(lettingGo));
  }

  async abandonBatch(batch: IntakeBatch): Promise<void> {
    const open = batch as PostgresBatch;
    if (open.owner !== this) throw new Error('PostgresIntakeQueue: not a batch of this queue');
    // Already ended by a commit that failed: its connection, and so its leases, are gone.
    if (open.ended) return;
    open.ended = true;
    this.open.delete(open);
    try {
      await queryRun(open.client, this.sql.letGo, []);
      release(open.client);
    } catch (error) {
      release(open.client, error);
    }
  }

  async listFailed(limit: number): Promise<IntakeRecord[]> {
    return (await queryRows<LogStatusRow>(this.pool, this.sql.listFailed, [limit])).map((row) => toIntakeRecord(row));
  }

  async requeue(id: string, at: number): Promise<boolean> {
    return (await queryRun(this.pool, this.sql.requeue, [at, id])) > 0;
  }

  async purgeProcessed(before: number, limit: number): Promise<number> {
    const trimmed = (await queryRow<{ n: number }>(this.pool, this.sql.trimLog, [before, limit]))!.n;
    await queryRun(this.pool, this.sql.trimKeys, [before - IDEMPOTENCY_WINDOW_MS, limit]);
    await queryRun(this.pool, this.sql.trimBatches, []);
    return trimmed;
  }

  async depth(): Promise<number> {
    return (await queryRow<{ n: number }>(this.pool, this.sql.depth, []))!.n;
  }

  /**
   * Writes what is still pending and ends the queue's session. Batches still open are let go of
   * (stop the worker first). The store's pool stays open.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    while (this.flushing !== undefined || this.pending.length > 0) await (this.flushing ?? this.flush());
    for (const batch of [...this.open]) await this.abandonBatch(batch);
    await Promise.all(this.lettingGo);
    const session = this.session;
    this.session = undefined;
    await session?.end().catch(() => {});
  }

  /** Connects the session and LISTENs. Called once by `openPostgresIntakeQueue`, then on reconnects. */
  async openSession(): Promise<void> {
    // Outside the pool: the session lives as long as the queue and must not hold a pooled connection.
    const client = new pg.Client({ ...this.pool.options, application_name: 'trailwire:intake-queue', keepAlive: true });
    client.on('error', () => this.lose(client));
    client.on('end', () => this.lose(client));
    try {
      await client.connect();
      client.on('notification', (notice) => {
        if (notice.channel === ENQUEUED_CHANNEL && notice.payload === this.schema) this.settings.onEnqueued?.();
      });
      await client.query(`LISTEN ${ENQUEUED_CHANNEL}`);
    } catch (error) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      throw error;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.session = client;
    this.reconnectDelay.reset();
  }

  // --- appends --------------------------------------------------------------------------------

  private scheduleFlush(): void {
    if (this.flushScheduled || this.flushing !== undefined) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush();
    });
  }

  /** Appends what is pending as one group (one statement, one commit); then the next group, if any gathered meanwhile. */
  private flush(): Promise<void> {
    if (this.flushing !== undefined || this.pending.length === 0) return this.flushing ?? Promise.resolve();
    // A key may appear once per group (an upsert touches a row once per statement): repeats wait for the next group.
    const group: TriedEnqueue[] = [];
    const later: TriedEnqueue[] = [];
    const keys = new Set<string>();
    for (const entry of this.pending) {
      const { partnerId, idempotencyKey } = entry.item;
      const key = idempotencyKey === null ? null : JSON.stringify([partnerId, idempotencyKey]);
      if (key !== null && keys.has(key)) later.push(entry);
      else {
        if (key !== null) keys.add(key);
        group.push(entry);
      }
    }
    this.pending = later;
    this.flushing = this.appendGroup(group).finally(() => {
      this.flushing = undefined;
      if (this.pending.length > 0) this.scheduleFlush();
    });
    return this.flushing;
  }

  private async appendGroup(group: TriedEnqueue[]): Promise<void> {
    const items = group.map((entry) => entry.item);
    let stored: Map<string, number>;
    try {
      const rows = await queryRows<{ id: string; seq: number }>(this.pool, this.sql.append, [
        items.map((item) => item.id),
        items.map((item) => item.partnerId),
        items.map((item) => item.product),
        items.map((item) => item.vin),
        items.map((item) => item.payload),
        items.map((item) => item.receivedAt),
        items.map((item) => item.idempotencyKey),
        IDEMPOTENCY_WINDOW_MS,
        ENQUEUED_CHANNEL,
      ]);
      stored = new Map(rows.map((row) => [row.id, row.seq]));
    } catch (error) {
      for (const entry of group) entry.reject(error);
      return;
    }
    for (const entry of group) {
      if (stored.has(entry.item.id)) {
        entry.resolve({ record: queuedRecord(entry.item), created: true });
        continue;
      }
      // Its key is held by a payload of the window: that one answers. Read after the commit that
      // decided it, so it is there — unless it changed hands meanwhile; then this one goes again.
      const { partnerId, idempotencyKey, receivedAt } = entry.item;
      this.findByIdempotencyKey(partnerId, idempotencyKey!, receivedAt - IDEMPOTENCY_WINDOW_MS).then(
        (original) => {
          if (original !== null) return entry.resolve({ record: original, created: false });
          if (this.closed) return entry.reject(new TrailwireError('unavailable', 'the intake queue is closed'));
          if (++entry.tries >= ENQUEUE_TRIES) {
            return entry.reject(new TrailwireError('unavailable', `idempotency key of partner ${partnerId} kept changing hands; intake ${entry.item.id} was not stored`));
          }
          this.pending.push(entry);
          this.scheduleFlush();
        },
        (error: unknown) => entry.reject(error),
      );
    }
  }

  // --- batches --------------------------------------------------------------------------------

  /** The core's plan of what the statement read: every row read is taken or held back (the statement read no more than `limit`). */
  private batchOf(client: pg.PoolClient, rows: CandidateRow[], limit: number): PostgresBatch {
    const due: PlannedEntry[] = [];
    const fresh: PlannedEntry[] = [];
    const waiting = new Map<string, number>();
    for (const row of rows) {
      if (row.kind === 'parked') due.push(toPlannedEntry(row, row.part, row.attempts, true));
      else {
        fresh.push(toPlannedEntry(row, row.part, 0, false));
        if (row.waiting! > 0) waiting.set(waitingKey(row.part, row.vin), row.waiting!);
      }
    }
    const plan = planBatch({ due, fresh, waiting }, limit);
    return { owner: this, client, entries: plan.take.map((candidate) => candidate.entry), plan, ended: false };
  }

  /**
   * Records the outcomes, parks what was held back and moves the watermarks: one statement, one
   * commit. The leases are let go of after it (never before: the next batch must see it).
   */
  private async record(batch: PostgresBatch, outcomes: ReadonlyMap<number, IntakeOutcome>, now: number): Promise<void> {
    const writes = settleBatch(batch.plan, outcomes, now, { recordProcessed: false });
    const moved = [...batch.plan.positions.entries()];
    await queryRun(batch.client, this.sql.commit, [
      writes.map((w) => w.seq),
      writes.map((w) => w.partition),
      writes.map((w) => w.vin),
      writes.map((w) => w.state),
      writes.map((w) => w.attempts),
      writes.map((w) => w.nextAttemptAt),
      writes.map((w) => w.error),
      writes.map((w) => w.processedAt),
      moved.map(([part]) => part),
      moved.map(([, seq]) => seq),
      now,
      writes.map((w) => w.fresh),
    ]);
  }

  private ownBatch(batch: IntakeBatch): PostgresBatch {
    const open = batch as PostgresBatch;
    if (open.owner !== this || !this.open.has(open)) throw new Error('PostgresIntakeQueue: not a batch open on this queue');
    return open;
  }

  // --- the session ----------------------------------------------------------------------------

  /** The session's connection failed or ended: LISTEN again once a new one is open. */
  private lose(client: pg.Client): void {
    if (this.session !== client) return;
    this.session = undefined;
    client.end().catch(() => {});
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed) return;
    const delay = this.reconnectDelay.next();
    this.reconnectTimer = setTimeout(() => {
      this.openSession().then(
        // Enqueues while the session was down were not heard.
        () => {
          if (!this.closed) this.settings.onEnqueued?.();
        },
        () => this.scheduleReconnect(),
      );
    }, delay);
    this.reconnectTimer.unref();
  }
}

/** A payload's status read: its log row, its parked row, its partition's watermark and its batch's time. */
const statusColumns = (s: string) => `${LOG_COLUMNS}, ${PARKED_COLUMNS}, w.watermark,
    (SELECT b.processed_at FROM ${s}.intake_batches b WHERE b.part = l.part AND b.last_seq >= l.seq ORDER BY b.last_seq LIMIT 1) AS batch_processed_at`;

/** The queue's statements on `schema`, each named for `pg` to prepare once per connection. */
export function queueStatements(schema: string) {
  const s = quoteSchema(schema);
  const status = statusColumns(s);
  const statements = {
    append: `SELECT id, seq FROM ${s}.intake_append($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8, $9)`,
    keyOf: `SELECT id, received_at FROM ${s}.intake_idempotency WHERE partner_id = $1 AND idempotency_key = $2`,
    statusById: `SELECT ${status} FROM ${s}.intake_log l JOIN ${s}.intake_partitions w ON w.part = l.part
      LEFT JOIN ${s}.intake_parked p ON p.seq = l.seq WHERE l.id = $1`,
    statusByIds: `SELECT ${status} FROM ${s}.intake_log l JOIN ${s}.intake_partitions w ON w.part = l.part
      LEFT JOIN ${s}.intake_parked p ON p.seq = l.seq WHERE l.id = ANY($1::text[])`,
    batchCandidates: `SELECT kind, part, seq, id, partner_id, product, vin, payload, received_at, idempotency_key, attempts, waiting
      FROM ${s}.intake_batch_candidates($1, $2, $3)`,
    // One statement: the parked rows (new ones inserted, others updated), the watermarks, and the batch's time per
    // partition it moved. A watermark never moves back (guarding against a lease lost and retaken).
    commit: `WITH parkings AS (
        SELECT * FROM unnest($1::bigint[], $2::smallint[], $3::text[], $4::text[], $5::integer[], $6::bigint[], $7::text[], $8::bigint[], $12::boolean[])
          AS m (seq, part, vin, state, attempts, next_attempt_at, error, processed_at, fresh)
      ), parked AS (
        INSERT INTO ${s}.intake_parked (seq, part, vin, state, attempts, next_attempt_at, error, processed_at)
        SELECT seq, part, vin, state, attempts, next_attempt_at, error, processed_at FROM parkings WHERE fresh
      ), reparked AS (
        UPDATE ${s}.intake_parked p SET state = m.state, attempts = m.attempts,
          next_attempt_at = coalesce(m.next_attempt_at, p.next_attempt_at), error = m.error, processed_at = m.processed_at
        FROM parkings m WHERE p.seq = m.seq AND NOT m.fresh
      ), moved AS (
        UPDATE ${s}.intake_partitions w SET watermark = m.seq
        FROM unnest($9::smallint[], $10::bigint[]) AS m (part, seq)
        WHERE w.part = m.part AND w.watermark < m.seq
        RETURNING w.part, w.watermark
      )
      INSERT INTO ${s}.intake_batches (part, last_seq, processed_at) SELECT part, watermark, $11 FROM moved`,
    letGo: 'SELECT pg_advisory_unlock_all()',
    listFailed: `SELECT ${status} FROM ${s}.intake_parked p JOIN ${s}.intake_log l ON l.part = p.part AND l.seq = p.seq
      JOIN ${s}.intake_partitions w ON w.part = l.part
      WHERE p.state = 'failed' ORDER BY p.seq LIMIT $1`,
    requeue: `UPDATE ${s}.intake_parked SET state = 'retry', attempts = 0, next_attempt_at = $1, processed_at = NULL
      WHERE state = 'failed' AND seq = (SELECT seq FROM ${s}.intake_log WHERE id = $2)`,
    // Per partition, what a batch committed before the cut-off moved the watermark past, oldest
    // first: payloads never parked, and those processed after a retry before the cut-off.
    trimLog: `WITH cut AS (
        SELECT part, max(last_seq) AS last_seq FROM ${s}.intake_batches WHERE processed_at < $1 GROUP BY part
      ), doomed AS (
        SELECT d.part, d.seq FROM cut c CROSS JOIN LATERAL (
          SELECT l.part, l.seq FROM ${s}.intake_log l LEFT JOIN ${s}.intake_parked p ON p.seq = l.seq
          WHERE l.part = c.part AND l.seq <= c.last_seq AND (p.seq IS NULL OR (p.state = 'done' AND p.processed_at < $1))
          ORDER BY l.seq LIMIT $2) d
        ORDER BY d.seq LIMIT $2
      ), gone AS (
        DELETE FROM ${s}.intake_log l USING doomed d WHERE l.part = d.part AND l.seq = d.seq RETURNING l.seq
      ), unparked AS (
        DELETE FROM ${s}.intake_parked p USING gone g WHERE p.seq = g.seq
      )
      SELECT count(*)::int AS n FROM gone`,
    trimKeys: `DELETE FROM ${s}.intake_idempotency WHERE (partner_id, idempotency_key) IN (
        SELECT partner_id, idempotency_key FROM ${s}.intake_idempotency WHERE received_at < $1 LIMIT $2)`,
    // A batch's time is needed while a payload it covers is in the log unparked: per partition, the
    // rows before the first such payload go, the newest always stays. The bounds are worked out once
    // per partition (MATERIALIZED; the first payload by walking the log's key, not an aggregate over
    // the partition): flattened into the join, they were evaluated again for every batch row, each a
    // scan of its whole partition, 2.5 s of PostgreSQL's CPU a minute with a day's retention only
    // minutes full (issue 41).
    trimBatches: `WITH f AS MATERIALIZED (
        SELECT w.part,
          (SELECT l.seq FROM ${s}.intake_log l WHERE l.part = w.part
             AND NOT EXISTS (SELECT 1 FROM ${s}.intake_parked p WHERE p.seq = l.seq) ORDER BY l.seq LIMIT 1) AS first_seq,
          (SELECT max(x.last_seq) FROM ${s}.intake_batches x WHERE x.part = w.part) AS newest
        FROM ${s}.intake_partitions w)
      DELETE FROM ${s}.intake_batches b USING f
      WHERE b.part = f.part AND b.last_seq < f.newest AND (f.first_seq IS NULL OR b.last_seq < f.first_seq)`,
    depth: `SELECT ((SELECT coalesce(sum(c.n), 0) FROM ${s}.intake_partitions w
          CROSS JOIN LATERAL (SELECT count(*) AS n FROM ${s}.intake_log l WHERE l.part = w.part AND l.seq > w.watermark) c)
        + (SELECT count(*) FROM ${s}.intake_parked WHERE state = 'retry'))::int AS n`,
  };
  // Prefixed apart from the store's statements, with which they share the pool's connections.
  return Object.fromEntries(
    Object.entries(statements).map(([key, text]) => [key, { name: `trailwire_queue_${key}`, text }]),
  ) as Record<keyof typeof statements, Statement>;
}

type QueueStatements = ReturnType<typeof queueStatements>;

const ignoreError = (): void => {};

/** Returns a batch's connection to the pool, or, after an error, destroys it (and whatever leases it held). */
function release(client: pg.PoolClient, error?: unknown): void {
  client.off('error', ignoreError);
  client.release(error === undefined ? undefined : error instanceof Error ? error : true);
}

function badOption(field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `PostgresIntakeQueueOptions.${field} ${message}`, {
    errors: [{ path: field, message }],
  });
}
