/**
 * The durable intake queue in the embedded SQLite file (`IntakeQueue` of `core/intake-queue.ts`).
 * It shares the store's connection, so the store's durability setting decides what a 202 survives:
 * `process` (WAL, synchronous=NORMAL) survives kill -9 of the process; `power` (synchronous=FULL)
 * also survives power loss. Enqueues arriving in the same event-loop turn are written in one
 * transaction (group commit), so `power` mode pays one fsync per group, not one per request.
 *
 * The write lock is shared with everything else that writes the file. A group commit on the event
 * loop never waits for that lock: it tries once and, when another connection holds it, tries again
 * a millisecond later, so the HTTP path keeps serving meanwhile. A server with a processing thread
 * does not write here at all: the thread, the file's one intake writer, writes the groups
 * (`enqueueNow`) and processes them (`intake-thread.ts`), so the two never contend for the lock.
 */
import type Database from 'better-sqlite3';
import {
  type EnqueueResult,
  IDEMPOTENCY_WINDOW_MS,
  type IntakeOutcome,
  type IntakeQueue,
  type IntakeRecord,
  type NewIntake,
  queuedRecord,
} from '../../core/intake-queue.ts';
import type { UnitOfWork } from '../../core/intake-worker.ts';
import { applyMigrations, type Migration } from './migrations.ts';
import { QUEUE_COLUMNS, type QueueRow, toIntakeRecord } from '../sql/queue-rows.ts';

export const QUEUE_COMPONENT = 'intake-queue';

export const QUEUE_MIGRATIONS: readonly Migration[] = [
  {
    name: '0001_intake_queue',
    up: `
      CREATE TABLE intake_queue (
        seq             INTEGER PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        partner_id      TEXT NOT NULL,
        product         TEXT NOT NULL,
        vin             TEXT NOT NULL,
        payload         TEXT NOT NULL,
        received_at     INTEGER NOT NULL,
        idempotency_key TEXT,
        status          TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'processed', 'failed')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        processed_at    INTEGER,
        error           TEXT
      ) STRICT;
      -- One live use of a key per partner; an expired use has its key cleared when reused.
      CREATE UNIQUE INDEX intake_by_idempotency_key ON intake_queue (partner_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
      CREATE INDEX intake_unfinished ON intake_queue (seq) WHERE status IN ('queued', 'processing');
      CREATE INDEX intake_unfinished_by_vin ON intake_queue (vin, seq) WHERE status IN ('queued', 'processing');
      CREATE INDEX intake_failed ON intake_queue (seq) WHERE status = 'failed';
    `,
  },
  {
    // SQLite uses a partial index only when the query's WHERE names the index's condition itself:
    // "status = 'queued'" does not select an index on "status IN ('queued', 'processing')", so the
    // claim scanned the whole table, processed rows included. Claims now read an index of exactly
    // the claimable rows, and check a VIN's earlier rows in an index that covers the check; purging
    // reads processed rows by age.
    name: '0002_intake_claim_and_purge_indexes',
    up: `
      DROP INDEX intake_unfinished;
      DROP INDEX intake_unfinished_by_vin;
      CREATE INDEX intake_ready ON intake_queue (seq) WHERE status = 'queued';
      CREATE INDEX intake_unfinished_by_vin ON intake_queue (vin, seq, status, next_attempt_at)
        WHERE status IN ('queued', 'processing');
      CREATE INDEX intake_processed ON intake_queue (processed_at) WHERE status = 'processed';
    `,
  },
];


/** How long a group commit waits before trying again while another connection holds the write lock. */
const LOCKED_RETRY_MS = 1;

interface PendingEnqueue {
  item: NewIntake;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

export class SqliteIntakeQueue implements IntakeQueue {
  private readonly sql;
  private pending: PendingEnqueue[] = [];
  private flushScheduled = false;
  private readonly enqueueGroup: Database.Transaction<(items: readonly NewIntake[]) => EnqueueResult[]>;
  private readonly settleAll: Database.Transaction<(outcomes: readonly IntakeOutcome[]) => void>;
  /** The connection's own busy timeout, restored after each attempt that must not wait. */
  private readonly busyTimeoutMs: number;

  /** Applies the queue's migrations to the store's database and prepares its statements. */
  constructor(
    private readonly db: Database.Database,
    private readonly options: SqliteIntakeQueueOptions = {},
  ) {
    applyMigrations(db, QUEUE_COMPONENT, QUEUE_MIGRATIONS);
    this.sql = {
      insert: db.prepare<[string, string, string, string, string, number, string | null, number]>(
        `INSERT INTO intake_queue (id, partner_id, product, vin, payload, received_at, idempotency_key, status, next_attempt_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)`,
      ),
      byKey: db.prepare<[string, string], QueueRow>(`SELECT ${QUEUE_COLUMNS} FROM intake_queue WHERE partner_id = ? AND idempotency_key = ?`),
      clearKey: db.prepare<[string, string]>('UPDATE intake_queue SET idempotency_key = NULL WHERE partner_id = ? AND idempotency_key = ?'),
      byId: db.prepare<[string], QueueRow>(`SELECT ${QUEUE_COLUMNS} FROM intake_queue WHERE id = ?`),
      // One statement. Candidates come from the index of queued rows, in arrival order; a row
      // waits while an earlier row of its VIN is processing or waiting for a retry. An earlier row
      // that is due is taken first (it comes first), so a VIN's rows are claimed in order.
      claim: db.prepare<{ now: number; limit: number }, QueueRow>(
        `UPDATE intake_queue SET status = 'processing', attempts = attempts + 1
         WHERE seq IN (
           SELECT q.seq FROM intake_queue q INDEXED BY intake_ready
           WHERE q.status = 'queued' AND q.next_attempt_at <= :now
             AND NOT EXISTS (SELECT 1 FROM intake_queue e INDEXED BY intake_unfinished_by_vin
                             WHERE e.vin = q.vin AND e.seq < q.seq AND e.status IN ('queued', 'processing')
                               AND (e.status = 'processing' OR e.next_attempt_at > :now))
           ORDER BY q.seq LIMIT :limit)
         RETURNING ${QUEUE_COLUMNS}`,
      ),
      // The claim of a round run in one transaction (`roundView`): the same candidates, not marked.
      due: db.prepare<{ now: number; limit: number }, QueueRow>(
        `SELECT ${QUEUE_COLUMNS} FROM intake_queue q INDEXED BY intake_ready
         WHERE q.status = 'queued' AND q.next_attempt_at <= :now
           AND NOT EXISTS (SELECT 1 FROM intake_queue e INDEXED BY intake_unfinished_by_vin
                           WHERE e.vin = q.vin AND e.seq < q.seq AND e.status IN ('queued', 'processing')
                             AND (e.status = 'processing' OR e.next_attempt_at > :now))
         ORDER BY q.seq LIMIT :limit`,
      ),
      processedInRound: db.prepare<[number, string]>(
        `UPDATE intake_queue SET status = 'processed', attempts = attempts + 1, processed_at = ?, error = NULL WHERE id = ? AND status = 'queued'`,
      ),
      retryInRound: db.prepare<[string, number, string]>(
        `UPDATE intake_queue SET attempts = attempts + 1, error = ?, next_attempt_at = ? WHERE id = ? AND status = 'queued'`,
      ),
      failedInRound: db.prepare<[string, number, string]>(
        `UPDATE intake_queue SET status = 'failed', attempts = attempts + 1, error = ?, processed_at = ? WHERE id = ? AND status = 'queued'`,
      ),
      processed: db.prepare<[number, string]>(
        `UPDATE intake_queue SET status = 'processed', processed_at = ?, error = NULL WHERE id = ? AND status = 'processing'`,
      ),
      retry: db.prepare<[string, number, string]>(
        `UPDATE intake_queue SET status = 'queued', error = ?, next_attempt_at = ? WHERE id = ? AND status = 'processing'`,
      ),
      failed: db.prepare<[string, number, string]>(
        `UPDATE intake_queue SET status = 'failed', error = ?, processed_at = ? WHERE id = ? AND status = 'processing'`,
      ),
      released: db.prepare<[string]>(`UPDATE intake_queue SET status = 'queued', attempts = attempts - 1 WHERE id = ? AND status = 'processing'`),
      listFailed: db.prepare<[number], QueueRow>(`SELECT ${QUEUE_COLUMNS} FROM intake_queue WHERE status = 'failed' ORDER BY seq LIMIT ?`),
      requeue: db.prepare<[number, string]>(
        `UPDATE intake_queue SET status = 'queued', attempts = 0, next_attempt_at = ?, processed_at = NULL WHERE id = ? AND status = 'failed'`,
      ),
      recover: db.prepare(`UPDATE intake_queue SET status = 'queued' WHERE status = 'processing'`),
      purge: db.prepare<[number, number]>(
        `DELETE FROM intake_queue WHERE seq IN (
           SELECT seq FROM intake_queue INDEXED BY intake_processed WHERE status = 'processed' AND processed_at < ? LIMIT ?)`,
      ),
      depth: db.prepare<[], { n: number }>(`SELECT COUNT(*) AS n FROM intake_queue WHERE status IN ('queued', 'processing')`),
    };
    this.busyTimeoutMs = Number(db.pragma('busy_timeout', { simple: true }));
    this.enqueueGroup = db.transaction((items: readonly NewIntake[]) => items.map((item) => this.insertOne(item)));
    this.settleAll = db.transaction((outcomes: readonly IntakeOutcome[]) => {
      for (const outcome of outcomes) {
        if (outcome.kind === 'processed') this.sql.processed.run(outcome.at, outcome.id);
        else if (outcome.kind === 'retry') this.sql.retry.run(outcome.error, outcome.nextAttemptAt, outcome.id);
        else if (outcome.kind === 'failed') this.sql.failed.run(outcome.error, outcome.at, outcome.id);
        else this.sql.released.run(outcome.id);
      }
    });
  }

  enqueue(item: NewIntake): Promise<EnqueueResult> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.scheduleFlush(0);
    });
  }

  async findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    const row = this.sql.byKey.get(partnerId, idempotencyKey);
    return row && row.received_at > since ? toIntakeRecord(row) : null;
  }

  async get(id: string): Promise<IntakeRecord | null> {
    const row = this.sql.byId.get(id);
    return row ? toIntakeRecord(row) : null;
  }

  async claim(limit: number, now: number): Promise<IntakeRecord[]> {
    // RETURNING does not promise an order; the queue does.
    return this.claimNow(limit, now);
  }

  /** `claim` without the promise, for a caller that runs a whole round in one transaction. */
  claimNow(limit: number, now: number): IntakeRecord[] {
    return this.sql.claim
      .all({ now, limit })
      .sort((a, b) => a.seq - b.seq)
      .map(toIntakeRecord);
  }

  async settle(outcomes: readonly IntakeOutcome[]): Promise<void> {
    this.settleNow(outcomes);
  }

  /** `settle` without the promise. */
  settleNow(outcomes: readonly IntakeOutcome[]): void {
    if (outcomes.length > 0) this.settleAll.immediate(outcomes);
  }

  /**
   * The unit of work that goes with `roundView`: each round — the claim, every payload's writes
   * (savepoints) and the settle — in one transaction of this connection, rolled back as a whole
   * when the round throws.
   */
  roundTransaction(): UnitOfWork {
    const begin = this.db.prepare('BEGIN IMMEDIATE');
    const commit = this.db.prepare('COMMIT');
    const rollback = this.db.prepare('ROLLBACK');
    return async (round) => {
      begin.run();
      try {
        const result = await round();
        commit.run();
        return result;
      } catch (error) {
        if (this.db.inTransaction) rollback.run();
        throw error;
      }
    };
  }

  /**
   * The queue for a worker that runs each round — claim, writes, settle — in one transaction of
   * this connection (the processing thread). No other connection ever sees a payload of such a
   * round `processing`: it is `queued` until the round commits, or again `queued` when it rolls
   * back. So its claim marks nothing, and its settle writes each payload once, straight to its
   * outcome (attempts counted then): half the writes, and half the index updates, per payload.
   * Only for use inside such a transaction; outside one, a crash between claim and settle would
   * leave nothing marked, and a second worker could claim the same payloads.
   */
  roundView(): IntakeQueue {
    const claim = async (limit: number, now: number): Promise<IntakeRecord[]> => {
      if (!this.db.inTransaction) throw new Error('SqliteIntakeQueue.roundView: claim outside the round\'s transaction');
      return this.sql.due.all({ now, limit }).map((row) => ({ ...toIntakeRecord(row), status: 'processing', attempts: row.attempts + 1 }));
    };
    const settle = async (outcomes: readonly IntakeOutcome[]): Promise<void> => {
      for (const outcome of outcomes) {
        if (outcome.kind === 'processed') this.sql.processedInRound.run(outcome.at, outcome.id);
        else if (outcome.kind === 'retry') this.sql.retryInRound.run(outcome.error, outcome.nextAttemptAt, outcome.id);
        else if (outcome.kind === 'failed') this.sql.failedInRound.run(outcome.error, outcome.at, outcome.id);
        // 'released': never marked, nothing to undo.
      }
    };
    return {
      enqueue: (item) => this.enqueue(item),
      findByIdempotencyKey: (partnerId, key, since) => this.findByIdempotencyKey(partnerId, key, since),
      get: (id) => this.get(id),
      claim,
      settle,
      listFailed: (limit) => this.listFailed(limit),
      requeue: (id, at) => this.requeue(id, at),
      recoverInFlight: () => this.recoverInFlight(),
      purgeProcessed: (before, limit) => this.purgeProcessed(before, limit),
      depth: () => this.depth(),
    };
  }

  async listFailed(limit: number): Promise<IntakeRecord[]> {
    return this.sql.listFailed.all(limit).map(toIntakeRecord);
  }

  async requeue(id: string, at: number): Promise<boolean> {
    return this.sql.requeue.run(at, id).changes > 0;
  }

  async recoverInFlight(): Promise<number> {
    return this.sql.recover.run().changes;
  }

  async purgeProcessed(before: number, limit: number): Promise<number> {
    return this.sql.purge.run(before, limit).changes;
  }

  async depth(): Promise<number> {
    return this.sql.depth.get()!.n;
  }

  /**
   * Writes a group of enqueues at once, waiting for the write lock as long as the connection's busy
   * timeout allows: for a connection whose thread may block (the processing thread). Answers each
   * item's result, or the error that item alone met.
   */
  enqueueNow(items: readonly NewIntake[]): EnqueueOutcome[] {
    try {
      return this.enqueueGroup.immediate(items).map((result) => ({ result }));
    } catch {
      return this.enqueueOneByOne(items);
    }
  }

  private scheduleFlush(delayMs: number): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    if (delayMs === 0) setImmediate(() => this.flush());
    else setTimeout(() => this.flush(), delayMs);
  }

  /** Writes every enqueue of this turn in one transaction: one commit (one fsync in `power` mode). */
  private flush(): void {
    this.flushScheduled = false;
    if (this.pending.length === 0) return;
    // A transaction is open on this connection when a caller runs a round in one transaction and
    // yields inside it: a group written now would commit with that round, and so maybe after its 202.
    if (this.db.inTransaction) return this.scheduleFlush(LOCKED_RETRY_MS);
    const group = this.pending;
    this.pending = [];
    let outcomes: EnqueueOutcome[] | 'locked';
    try {
      outcomes = this.withoutWaiting(() => this.enqueueGroup.immediate(group.map((entry) => entry.item)).map((result) => ({ result })));
    } catch {
      outcomes = this.enqueueOneByOne(group.map((entry) => entry.item));
    }
    if (outcomes === 'locked') {
      this.pending = group.concat(this.pending);
      return this.scheduleFlush(LOCKED_RETRY_MS);
    }
    let created = false;
    group.forEach((entry, i) => {
      const outcome = outcomes[i]!;
      if ('error' in outcome) return entry.reject(outcome.error);
      created ||= outcome.result.created;
      entry.resolve(outcome.result);
    });
    if (created) this.options.onEnqueued?.();
  }

  /** One bad row must not fail its neighbours: each item in a transaction of its own. */
  private enqueueOneByOne(items: readonly NewIntake[]): EnqueueOutcome[] {
    return items.map((item) => {
      try {
        return { result: this.enqueueGroup.immediate([item])[0]! };
      } catch (error) {
        return { error };
      }
    });
  }

  /**
   * Runs `write` without waiting for another connection's write lock: waiting (the busy timeout)
   * would hold the whole event loop, so a locked database answers 'locked' and the caller retries.
   */
  private withoutWaiting<T>(write: () => T): T | 'locked' {
    // Not a prepared statement: SQLite applies this pragma when it is prepared, not when it runs.
    this.db.pragma('busy_timeout = 0');
    try {
      return write();
    } catch (error) {
      if ((error as { code?: string }).code === 'SQLITE_BUSY') return 'locked';
      throw error;
    } finally {
      this.db.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
    }
  }

  private insertOne(item: NewIntake): EnqueueResult {
    if (item.idempotencyKey !== null) {
      const earlier = this.sql.byKey.get(item.partnerId, item.idempotencyKey);
      if (earlier && earlier.received_at > item.receivedAt - IDEMPOTENCY_WINDOW_MS) return { record: toIntakeRecord(earlier), created: false };
      if (earlier) this.sql.clearKey.run(item.partnerId, item.idempotencyKey);
    }
    this.sql.insert.run(item.id, item.partnerId, item.product, item.vin, item.payload, item.receivedAt, item.idempotencyKey, item.receivedAt);
    return {
      record: queuedRecord(item),
      created: true,
    };
  }
}

/** What became of one item of a group write: its result, or the error it alone met. */
export type EnqueueOutcome = { result: EnqueueResult } | { error: unknown };

export interface SqliteIntakeQueueOptions {
  /** Called after each commit that stored new payloads (to wake a worker). */
  onEnqueued?: () => void;
}

/** Opens the queue on an SQLite store's database (`store.db`), applying its migrations. */
export function openSqliteIntakeQueue(db: Database.Database, options: SqliteIntakeQueueOptions = {}): SqliteIntakeQueue {
  return new SqliteIntakeQueue(db, options);
}

