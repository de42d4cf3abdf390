/**
 * The durable intake log in the embedded SQLite file (`IntakeQueue` of `core/intake-queue.ts`).
 *
 * An append writes one row with one index besides its sequence (the id the status endpoint looks
 * up); an idempotency key, when given, goes to its own small table. Appends arriving in the same
 * event-loop turn share one transaction (group commit, `core/turn-batcher.ts`), so `power`
 * durability pays one fsync per group. A full or failing disk refuses the group with
 * `store_unavailable` (`storage-faults.ts`): nothing of it is stored. The store's durability setting decides what a 202 survives: `process` (WAL,
 * synchronous=NORMAL) survives kill -9 of the process; `power` (synchronous=FULL) power loss too.
 *
 * A batch is a write transaction on this connection, opened by `nextBatch` and ended by
 * `commitBatch` (or rolled back by `abandonBatch`): the store's writes of the batch join it as
 * savepoints, so the batch's payloads, their outcomes and the new watermark commit at once, with
 * one commit per batch. SQLite's single write lock is what keeps batches of two connections (two
 * processes on one file) apart; `nextBatch` never waits for it — a held lock answers "no batch now"
 * and the worker looks again — since waiting would block the event loop. No status is written per
 * processed payload: the watermark (the greatest `last_seq` of `intake_batches`) says it. Only
 * retries, the payloads held behind them, and dead letters get a row in `intake_parked`.
 *
 * The log (`intake_log`, with its idempotency keys) lives in a file of its own beside the store's,
 * `<file>-intake-log`, attached to the connection as the schema `intake` (`attachIntakeLog`); the
 * watermark and the parked payloads live in the store's file. So the two roles write different files
 * and each has its own write lock: a server's event loop appends (a turn's group, one commit of the
 * log's file) while its processing thread holds the store's lock for a batch (`intake-thread.ts`),
 * and neither waits for the other. A batch takes the store's lock alone (`BEGIN IMMEDIATE` would
 * take every attached file's), and reads the log as of its start.
 */
import { existsSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { type ErrorCode, isTrailwireError, TrailwireError } from '../../core/errors.ts';
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
import { TurnBatcher } from '../../core/turn-batcher.ts';
import { LOG_COLUMNS, type LogRow, type LogStatusRow, PARKED_COLUMNS, toIntakeRecord, toPlannedEntry } from '../sql/log-rows.ts';
import { createOwnerOnly, intakeLogFile, restrictSidecars } from './file-modes.ts';
import { applyMigrations, type Migration } from './migrations.ts';
import { STORAGE_FAULT_RETRY_AFTER_SECONDS, storageFaultError } from './storage-faults.ts';

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
  {
    // The queue becomes a log (issue 13): an append with one index besides the sequence, statuses
    // derived from a watermark, and a small parked table for retries and dead letters. Everything
    // the old table held is carried over: queued payloads wait as retries (due when they were),
    // so they are processed first and in order; processed payloads and dead letters keep their
    // status; idempotency keys keep answering.
    name: '0003_intake_log',
    up: `
      CREATE TABLE intake_log (
        seq             INTEGER PRIMARY KEY,
        id              TEXT NOT NULL,
        partner_id      TEXT NOT NULL,
        product         TEXT NOT NULL,
        vin             TEXT NOT NULL,
        payload         TEXT NOT NULL,
        received_at     INTEGER NOT NULL,
        idempotency_key TEXT
      ) STRICT;
      CREATE UNIQUE INDEX intake_log_by_id ON intake_log (id);
      CREATE TABLE intake_idempotency (
        partner_id      TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        seq             INTEGER NOT NULL,
        received_at     INTEGER NOT NULL,
        PRIMARY KEY (partner_id, idempotency_key)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX intake_idempotency_by_age ON intake_idempotency (received_at);
      -- One row per committed batch: the watermark is the greatest last_seq.
      CREATE TABLE intake_batches (
        last_seq     INTEGER PRIMARY KEY,
        processed_at INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE intake_parked (
        seq             INTEGER PRIMARY KEY,
        vin             TEXT NOT NULL,
        state           TEXT NOT NULL CHECK (state IN ('retry', 'failed', 'done')),
        attempts        INTEGER NOT NULL,
        next_attempt_at INTEGER NOT NULL,
        error           TEXT,
        processed_at    INTEGER
      ) STRICT;
      CREATE INDEX intake_parked_retry_by_vin ON intake_parked (vin, seq, next_attempt_at) WHERE state = 'retry';
      CREATE INDEX intake_parked_failed ON intake_parked (seq) WHERE state = 'failed';

      INSERT INTO intake_log (seq, id, partner_id, product, vin, payload, received_at, idempotency_key)
        SELECT seq, id, partner_id, product, vin, payload, received_at, idempotency_key FROM intake_queue;
      INSERT INTO intake_idempotency (partner_id, idempotency_key, seq, received_at)
        SELECT partner_id, idempotency_key, seq, received_at FROM intake_queue WHERE idempotency_key IS NOT NULL;
      INSERT INTO intake_parked (seq, vin, state, attempts, next_attempt_at, error, processed_at)
        SELECT seq, vin,
               CASE status WHEN 'processed' THEN 'done' WHEN 'failed' THEN 'failed' ELSE 'retry' END,
               CASE status WHEN 'processing' THEN attempts - 1 ELSE attempts END,
               next_attempt_at, error, processed_at
        FROM intake_queue;
      INSERT INTO intake_batches (last_seq, processed_at) SELECT max(seq), 0 FROM intake_queue HAVING count(*) > 0;
      DROP TABLE intake_queue;
    `,
  },
];

/** The schema the log's file is attached as, on every connection that opens the queue. */
export const INTAKE_LOG_SCHEMA = 'intake';

export { intakeLogFile };

/**
 * The log file's tables, as migration 0003 made them in the store's file before the log had its own,
 * but for AUTOINCREMENT: the log's sequence is kept past the store's watermark (`keepSequencePastWatermark`).
 */
const LOG_FILE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS intake.intake_log (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL,
    partner_id      TEXT NOT NULL,
    product         TEXT NOT NULL,
    vin             TEXT NOT NULL,
    payload         TEXT NOT NULL,
    received_at     INTEGER NOT NULL,
    idempotency_key TEXT
  ) STRICT;
  CREATE UNIQUE INDEX IF NOT EXISTS intake.intake_log_by_id ON intake_log (id);
  CREATE TABLE IF NOT EXISTS intake.intake_idempotency (
    partner_id      TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    received_at     INTEGER NOT NULL,
    PRIMARY KEY (partner_id, idempotency_key)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS intake.intake_idempotency_by_age ON intake_idempotency (received_at);
`;

/**
 * Attaches the log's file to a store's connection as the schema `intake` (once per connection),
 * creating it owner-only, in WAL mode and with the store's synchronous setting (so `power` syncs its
 * commits too), and its tables when they are not there.
 */
export function attachIntakeLog(db: Database.Database): void {
  const attached = db.prepare<[], { name: string }>('PRAGMA database_list').all().some((row) => row.name === INTAKE_LOG_SCHEMA);
  if (attached) return;
  const file = intakeLogFile(db.name);
  const created = file !== ':memory:' && !existsSync(file);
  if (created) createOwnerOnly(file);
  db.prepare(`ATTACH ? AS ${INTAKE_LOG_SCHEMA}`).run(file);
  if (file !== ':memory:') {
    if (db.pragma(`${INTAKE_LOG_SCHEMA}.journal_mode`, { simple: true }) !== 'wal') db.pragma(`${INTAKE_LOG_SCHEMA}.journal_mode = WAL`);
    if (created) restrictSidecars(file);
  }
  db.pragma(`${INTAKE_LOG_SCHEMA}.synchronous = ${Number(db.pragma('main.synchronous', { simple: true }))}`);
  db.exec(LOG_FILE_SCHEMA);
}

/**
 * Until issue 38's fifth session the log's tables were in the store's file (migration 0003). Their
 * rows are copied into the log's file in one commit of that file, then the store's tables are
 * dropped in one commit of the store's: two files commit apart, so a crash between the two leaves
 * both copies, and the next start copies again (ignoring what is there) before dropping. A new
 * store's empty tables go the same way.
 */
function moveLogOutOfStoreFile(db: Database.Database): void {
  const inStore = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM main.sqlite_master WHERE type = 'table' AND name = 'intake_log'").get()!.n > 0;
  if (!inStore) return;
  db.transaction(() => {
    db.exec('INSERT OR IGNORE INTO intake.intake_log SELECT * FROM main.intake_log');
    db.exec('INSERT OR IGNORE INTO intake.intake_idempotency SELECT * FROM main.intake_idempotency');
  })();
  db.transaction(() => db.exec('DROP TABLE main.intake_log; DROP TABLE main.intake_idempotency'))();
}

/**
 * A payload at or below the store's watermark counts as processed, so the log must never number a
 * new one there. Within one log file AUTOINCREMENT never gives a number twice, however much the
 * purge trims; but a log file lost, or restored older than the store's, would start numbering again
 * below the watermark, and every payload it took would be answered 202 and never processed. So the
 * log's sequence is raised to the watermark at each open: new payloads follow it, whatever the file holds.
 */
function keepSequencePastWatermark(db: Database.Database): void {
  const watermark = db.prepare<[], { w: number | null }>('SELECT max(last_seq) AS w FROM main.intake_batches').get()!.w;
  if (watermark === null) return;
  db.transaction(() => {
    const raised = db.prepare("UPDATE intake.sqlite_sequence SET seq = ? WHERE name = 'intake_log' AND seq < ?").run(watermark, watermark).changes;
    const known = db.prepare("SELECT 1 FROM intake.sqlite_sequence WHERE name = 'intake_log'").get() !== undefined;
    if (raised === 0 && !known) db.prepare("INSERT INTO intake.sqlite_sequence (name, seq) VALUES ('intake_log', ?)").run(watermark);
  })();
}

/** How long a group commit waits before trying again while another connection (another process) holds the write lock. */
const LOCKED_RETRY_MS = 1;

/** A payload's status read: its log row, its parked row, the watermark and its batch's time. */
const STATUS_SELECT = `SELECT ${LOG_COLUMNS}, ${PARKED_COLUMNS},
    (SELECT max(last_seq) FROM intake_batches) AS watermark,
    (SELECT b.processed_at FROM intake_batches b WHERE b.last_seq >= l.seq ORDER BY b.last_seq LIMIT 1) AS batch_processed_at
  FROM intake_log l LEFT JOIN intake_parked p ON p.seq = l.seq`;

/** A batch of this queue: its transaction is open on the connection until it is committed or abandoned. */
interface SqliteBatch extends IntakeBatch {
  readonly owner: SqliteIntakeQueue;
  readonly plan: BatchPlan<PlannedEntry>;
}

export class SqliteIntakeQueue implements ProcessableIntakeQueue {
  /** Who processes this queue: the core's worker, or the intake's thread (`SqliteIntakeQueueOptions.processedBy`). */
  readonly processedBy: 'core' | 'backend';
  private readonly sql;
  private readonly turn = new TurnBatcher<PendingEnqueue>((group) => this.flush(group));
  /** Appends a group in one transaction: each item's outcome. */
  private readonly appendGroup: Database.Transaction<(items: readonly NewIntake[], skipExisting: boolean) => AppendOutcome[]>;
  /** `probeWrite`'s transaction. */
  private readonly probe: Database.Transaction<() => void>;
  /** The connection's own busy timeout, restored after each attempt that must not wait. */
  private readonly busyTimeoutMs: number;
  private openBatch: SqliteBatch | null = null;
  /** Writes waiting for the open batch to end (`whenNoBatch`), in order. */
  private readonly afterBatch: Array<() => void> = [];

  /** Applies the queue's migrations to the store's database and prepares its statements. */
  constructor(
    private readonly db: Database.Database,
    private readonly options: SqliteIntakeQueueOptions = {},
  ) {
    this.processedBy = options.processedBy ?? 'core';
    attachIntakeLog(db);
    applyMigrations(db, QUEUE_COMPONENT, QUEUE_MIGRATIONS);
    moveLogOutOfStoreFile(db);
    keepSequencePastWatermark(db);
    this.sql = {
      append: db.prepare<[string, string, string, string, string, number, string | null]>(
        `INSERT INTO intake_log (id, partner_id, product, vin, payload, received_at, idempotency_key) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      keyOf: db.prepare<[string, string], { seq: number; received_at: number }>(
        'SELECT seq, received_at FROM intake_idempotency WHERE partner_id = ? AND idempotency_key = ?',
      ),
      saveKey: db.prepare<[string, string, number, number]>(
        `INSERT INTO intake_idempotency (partner_id, idempotency_key, seq, received_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (partner_id, idempotency_key) DO UPDATE SET seq = excluded.seq, received_at = excluded.received_at`,
      ),
      statusById: db.prepare<[string], LogStatusRow>(`${STATUS_SELECT} WHERE l.id = ?`),
      // The ids as one JSON array: one statement for any count, each looked up by the id index.
      statusByIds: db.prepare<[string], LogStatusRow>(`${STATUS_SELECT} WHERE l.id IN (SELECT value FROM json_each(?))`),
      seqOfId: db.prepare<[string], { seq: number }>('SELECT seq FROM intake_log WHERE id = ?'),
      statusBySeq: db.prepare<[number], LogStatusRow>(`${STATUS_SELECT} WHERE l.seq = ?`),
      watermark: db.prepare<[], { watermark: number | null }>('SELECT max(last_seq) AS watermark FROM intake_batches'),
      // Due retries, each VIN's in order: a parked payload waits while an earlier one of its VIN is not due.
      dueParked: db.prepare<{ now: number; limit: number }, LogRow & { attempts: number }>(
        `SELECT ${LOG_COLUMNS}, p.attempts FROM intake_parked p JOIN intake_log l ON l.seq = p.seq
         WHERE p.state = 'retry' AND p.next_attempt_at <= :now
           AND NOT EXISTS (SELECT 1 FROM intake_parked e INDEXED BY intake_parked_retry_by_vin
                           WHERE e.vin = p.vin AND e.state = 'retry' AND e.seq < p.seq AND e.next_attempt_at > :now)
         ORDER BY p.seq LIMIT :limit`,
      ),
      parkedPerVin: db.prepare<[], { vin: string; n: number }>(`SELECT vin, count(*) AS n FROM intake_parked WHERE state = 'retry' GROUP BY vin`),
      afterWatermark: db.prepare<[number, number], LogRow>(`SELECT ${LOG_COLUMNS} FROM intake_log l WHERE l.seq > ? ORDER BY l.seq LIMIT ?`),
      park: db.prepare<[number, string, string, number, number, string | null, number | null]>(
        'INSERT INTO intake_parked (seq, vin, state, attempts, next_attempt_at, error, processed_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      repark: db.prepare<[string, number, number | null, string | null, number | null, number]>(
        `UPDATE intake_parked SET state = ?, attempts = ?, next_attempt_at = coalesce(?, next_attempt_at), error = ?, processed_at = ? WHERE seq = ?`,
      ),
      addBatch: db.prepare<[number, number]>('INSERT INTO intake_batches (last_seq, processed_at) VALUES (?, ?)'),
      listFailed: db.prepare<[number], LogStatusRow>(`${STATUS_SELECT} WHERE p.state = 'failed' ORDER BY p.seq LIMIT ?`),
      requeue: db.prepare<[number, string]>(
        `UPDATE intake_parked SET state = 'retry', attempts = 0, next_attempt_at = ?, processed_at = NULL
         WHERE state = 'failed' AND seq = (SELECT seq FROM intake_log WHERE id = ?)`,
      ),
      // Payloads processed before the cut-off, oldest first (the log's AUTOINCREMENT keeps new
      // appends past the watermark however much is trimmed).
      trimmable: db.prepare<{ before: number; limit: number }, { seq: number }>(
        `SELECT l.seq FROM intake_log l LEFT JOIN intake_parked p ON p.seq = l.seq
         WHERE l.seq <= (SELECT coalesce(max(last_seq), 0) FROM intake_batches WHERE processed_at < :before)
           AND (p.seq IS NULL OR (p.state = 'done' AND p.processed_at < :before))
         ORDER BY l.seq LIMIT :limit`,
      ),
      deleteLog: db.prepare<[number]>('DELETE FROM intake_log WHERE seq = ?'),
      deleteParked: db.prepare<[number]>('DELETE FROM intake_parked WHERE seq = ?'),
      trimKeys: db.prepare<[number]>('DELETE FROM intake_idempotency WHERE received_at < ?'),
      trimBatches: db.prepare(
        'DELETE FROM intake_batches WHERE last_seq < (SELECT min(seq) FROM intake_log) AND last_seq < (SELECT max(last_seq) FROM intake_batches)',
      ),
      // The log's seqs past the watermark have no gaps (a rowid is the greatest plus one, and nothing
      // past the watermark is ever deleted), so their count is a subtraction, not a scan of the backlog.
      depth: db.prepare<[], { n: number }>(
        `SELECT coalesce((SELECT max(seq) FROM intake_log), 0) - coalesce((SELECT max(last_seq) FROM intake_batches), 0)
              + (SELECT count(*) FROM intake_parked WHERE state = 'retry') AS n`,
      ),
      begin: db.prepare('BEGIN'),
      // A write that changes nothing takes the store file's write lock, and only its: the batch's
      // lock, with the log's file left to the appends (BEGIN IMMEDIATE would lock every attached file).
      lockStore: db.prepare('DELETE FROM main.intake_batches WHERE last_seq < 0'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
    };
    this.busyTimeoutMs = Number(db.pragma('busy_timeout', { simple: true }));
    // Deferred: the group's first write takes the log file's lock alone, never the store's.
    this.appendGroup = db.transaction((items: readonly NewIntake[], skipExisting: boolean) => items.map((item) => this.appendOne(item, skipExisting)));
    // A key no partner has, written and taken back in one commit of the log's file: its pages are written, nothing is left.
    const probeRow = db.prepare("INSERT INTO intake.intake_idempotency (partner_id, idempotency_key, seq, received_at) VALUES ('', '', 0, 0)");
    const probeGone = db.prepare("DELETE FROM intake.intake_idempotency WHERE partner_id = '' AND idempotency_key = ''");
    this.probe = db.transaction(() => {
      probeRow.run();
      probeGone.run();
    });
  }

  enqueue(item: NewIntake): Promise<EnqueueResult> {
    return new Promise((resolve, reject) => this.turn.push({ item, resolve, reject }));
  }

  async findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    const key = this.sql.keyOf.get(partnerId, idempotencyKey);
    return key && key.received_at > since ? this.recordAt(key.seq) : null;
  }

  async get(id: string): Promise<IntakeRecord | null> {
    const row = this.sql.statusById.get(id);
    return row ? toIntakeRecord(row, inOpenBatches([this.openBatch], row.seq)) : null;
  }

  async getMany(ids: readonly string[]): Promise<Map<string, IntakeRecord>> {
    const rows = ids.length === 0 ? [] : this.sql.statusByIds.all(JSON.stringify(ids));
    return new Map(rows.map((row) => [row.id, toIntakeRecord(row, inOpenBatches([this.openBatch], row.seq))]));
  }

  /**
   * Opens a write transaction and reads the batch in it: due retries first (they are older than
   * anything past the watermark), then what follows the watermark. Log payloads of a VIN with a
   * retry still waiting are held back, to be parked behind it at the commit.
   */
  async nextBatch(limit: number, now: number): Promise<IntakeBatch | null> {
    if (this.openBatch || this.db.inTransaction) return null;
    for (;;) {
      this.sql.begin.run();
      try {
        if (this.options.mayWaitForLock) this.sql.lockStore.run();
        else if (this.withoutWaiting(() => this.sql.lockStore.run()) === 'locked') {
          this.sql.rollback.run();
          return null;
        }
      } catch (error) {
        this.sql.rollback.run();
        throw storageFaultError(error, 'the store') ?? error;
      }
      let batch: SqliteBatch;
      try {
        batch = this.readBatch(limit, now);
      } catch (error) {
        this.sql.rollback.run();
        throw error;
      }
      if (batch.entries.length > 0) return (this.openBatch = batch);
      if (batch.plan.heldBack.length === 0) {
        this.sql.rollback.run();
        return null;
      }
      // Everything read was held back: park it, move the watermark, and read on.
      this.openBatch = batch;
      await this.commitBatch(batch, new Map(), now);
    }
  }

  async commitBatch(batch: IntakeBatch, outcomes: ReadonlyMap<number, IntakeOutcome>, now: number): Promise<void> {
    const open = this.ownBatch(batch);
    try {
      for (const write of settleBatch(open.plan, outcomes, now, { recordProcessed: false })) {
        if (write.fresh) this.sql.park.run(write.seq, write.vin, write.state, write.attempts, write.nextAttemptAt!, write.error, write.processedAt);
        else this.sql.repark.run(write.state, write.attempts, write.nextAttemptAt, write.error, write.processedAt, write.seq);
      }
      const lastLogSeq = open.plan.positions.get(0);
      if (lastLogSeq !== undefined) this.sql.addBatch.run(lastLogSeq, now);
      this.sql.commit.run();
    } catch (error) {
      if (this.db.inTransaction) this.sql.rollback.run();
      throw storageFaultError(error, 'the store') ?? error;
    } finally {
      this.batchEnded();
    }
  }

  async abandonBatch(batch: IntakeBatch): Promise<void> {
    this.ownBatch(batch);
    if (this.db.inTransaction) this.sql.rollback.run();
    this.batchEnded();
  }

  /**
   * Runs `write` once no batch is open on this connection — at once when none is, else right after
   * the batch commits or is abandoned, in call order: a write made inside the batch's transaction
   * would commit with it, or be rolled back with it, after its caller was answered.
   */
  whenNoBatch(write: () => void): void {
    if (this.openBatch === null) write();
    else this.afterBatch.push(write);
  }

  private batchEnded(): void {
    this.openBatch = null;
    for (const write of this.afterBatch.splice(0)) {
      try {
        write();
      } catch (error) {
        // A bug in the waiting write is its own, not the batch's (already ended): it surfaces apart.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  async listFailed(limit: number): Promise<IntakeRecord[]> {
    return this.sql.listFailed.all(limit).map((row) => toIntakeRecord(row));
  }

  async requeue(id: string, at: number): Promise<boolean> {
    const requeued = this.sql.requeue.run(at, id).changes > 0;
    // A dead letter due again is work, as a new payload is: the same wake.
    if (requeued) this.options.onEnqueued?.();
    return requeued;
  }

  async purgeProcessed(before: number, limit: number): Promise<number> {
    return this.db.transaction(() => {
      const rows = this.sql.trimmable.all({ before, limit });
      for (const { seq } of rows) {
        this.sql.deleteLog.run(seq);
        this.sql.deleteParked.run(seq);
      }
      this.sql.trimKeys.run(before - IDEMPOTENCY_WINDOW_MS);
      this.sql.trimBatches.run();
      return rows.length;
    })();
  }

  async depth(): Promise<number> {
    return this.sql.depth.get()!.n;
  }

  /**
   * Writes a group of appends at once, waiting for the write lock as long as the connection's busy
   * timeout allows: for the read-back of a journal an earlier version left, before the server takes
   * intake. Answers each item's outcome. A storage fault refuses the whole group
   * (`store_unavailable`: nothing of it is stored); any other error is one item's alone, which is
   * refused while its neighbours are stored.
   *
   * `skipExisting` is for groups that may have been appended already (a journal read back): an item
   * whose id the log holds is not appended again, and answers `appended`.
   */
  enqueueNow(items: readonly NewIntake[], { skipExisting = false }: { skipExisting?: boolean } = {}): AppendOutcome[] {
    try {
      return this.appendGroup(items, skipExisting);
    } catch (error) {
      return this.outcomesAfterFailure(error, items, skipExisting);
    }
  }

  /** A group's transaction failed: a storage fault refuses it whole; anything else is looked for item by item. */
  private outcomesAfterFailure(error: unknown, items: readonly NewIntake[], skipExisting: boolean): AppendOutcome[] {
    const fault = storageFaultError(error, 'the intake log');
    if (fault) return items.map(() => refusedOutcome(fault));
    return this.enqueueOneByOne(items, skipExisting);
  }

  /** Reads what the core's plan picks from (`core/intake-batch-plan.ts`): due retries, what follows the watermark, the VINs waiting for a retry. */
  private readBatch(limit: number, now: number): SqliteBatch {
    const due = this.sql.dueParked.all({ now, limit }).map((row) => toPlannedEntry(row, 0, row.attempts, true));
    const watermark = this.sql.watermark.get()!.watermark ?? 0;
    const fresh = due.length < limit ? this.sql.afterWatermark.all(watermark, limit - due.length).map((row) => toPlannedEntry(row, 0, 0, false)) : [];
    const waiting = new Map<string, number>();
    if (fresh.length > 0) for (const { vin, n } of this.sql.parkedPerVin.all()) waiting.set(waitingKey(0, vin), n);
    const plan = planBatch({ due, fresh, waiting }, limit);
    return { owner: this, entries: plan.take.map((candidate) => candidate.entry), plan };
  }

  private ownBatch(batch: IntakeBatch): SqliteBatch {
    const open = batch as SqliteBatch;
    if (open.owner !== this || this.openBatch !== open) throw new Error('SqliteIntakeQueue: not the batch open on this queue');
    return open;
  }

  private recordAt(seq: number): IntakeRecord | null {
    const row = this.sql.statusBySeq.get(seq);
    return row ? toIntakeRecord(row, inOpenBatches([this.openBatch], seq)) : null;
  }

  /** Writes every append of this turn in one transaction: one commit (one fsync in `power` mode). */
  private flush(group: PendingEnqueue[]): void {
    if (this.openBatch !== null) return this.whenNoBatch(() => this.flush(group));
    const items = group.map((entry) => entry.item);
    let outcomes: AppendOutcome[] | 'locked';
    try {
      outcomes = this.withoutWaiting(() => this.appendGroup(items, false));
    } catch (error) {
      outcomes = this.outcomesAfterFailure(error, items, false);
    }
    if (outcomes === 'locked') return this.turn.putBack(group, LOCKED_RETRY_MS);
    this.reportWrite(outcomes);
    group.forEach((entry, i) => answerEnqueue(entry, outcomes[i]!));
    if (outcomes.some((outcome) => outcome.kind === 'appended')) this.options.onEnqueued?.();
  }

  /** Tells `onWrite` whether the log's file took the group (a refusal of it whole is a storage fault). */
  private reportWrite(outcomes: readonly AppendOutcome[]): void {
    const refusal = outcomes.find((outcome) => outcome.kind === 'refused' && outcome.code === 'store_unavailable');
    this.options.onWrite?.(refusal?.kind === 'refused' ? refusal.message : null);
  }

  /**
   * Writes a page of the log's file and takes it back, in one committed transaction of its own:
   * whether the log takes appends again after a fault, with nothing left behind. Throws the fault's
   * `store_unavailable` while it does not.
   */
  probeWrite(): Promise<void> {
    return new Promise((resolve, reject) =>
      this.whenNoBatch(() => {
        try {
          this.probe();
          this.options.onWrite?.(null);
          resolve();
        } catch (error) {
          const fault = storageFaultError(error, 'the intake log');
          if (fault) this.options.onWrite?.(fault.message);
          reject(fault ?? error);
        }
      }),
    );
  }

  /** One bad row must not fail its neighbours: each item in a transaction of its own. */
  private enqueueOneByOne(items: readonly NewIntake[], skipExisting: boolean): AppendOutcome[] {
    return items.map((item) => {
      try {
        return this.appendGroup([item], skipExisting)[0]!;
      } catch (error) {
        return refusedOutcome(storageFaultError(error, 'the intake log') ?? error);
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
      // SQLITE_BUSY, or SQLITE_BUSY_SNAPSHOT: a deferred group read the log before another connection wrote it.
      if ((error as { code?: string }).code?.startsWith('SQLITE_BUSY')) return 'locked';
      throw error;
    } finally {
      this.db.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
    }
  }

  /** Appends one item, or finds its idempotency key's earlier record. */
  private appendOne(item: NewIntake, skipExisting: boolean): AppendOutcome {
    if (skipExisting && this.sql.seqOfId.get(item.id) !== undefined) return APPENDED;
    if (item.idempotencyKey !== null) {
      const earlier = this.sql.keyOf.get(item.partnerId, item.idempotencyKey);
      if (earlier && earlier.received_at > item.receivedAt - IDEMPOTENCY_WINDOW_MS) {
        const record = this.recordAt(earlier.seq);
        if (record) return { kind: 'replayed', record };
      }
    }
    const { lastInsertRowid } = this.sql.append.run(item.id, item.partnerId, item.product, item.vin, item.payload, item.receivedAt, item.idempotencyKey);
    if (item.idempotencyKey !== null) this.sql.saveKey.run(item.partnerId, item.idempotencyKey, Number(lastInsertRowid), item.receivedAt);
    return APPENDED;
  }
}

/**
 * What became of one item of a group written to the log — the one shape from the log to the waiting
 * enqueue: appended (its record is the item's `queuedRecord`, which the
 * sender holds, so nothing large comes back), replayed (its idempotency key was used before: the
 * earlier record), or refused with the code and message of the error a client is to get.
 */
export type AppendOutcome =
  | { kind: 'appended' }
  | { kind: 'replayed'; record: IntakeRecord }
  | { kind: 'refused'; code: ErrorCode; message: string };

const APPENDED: AppendOutcome = Object.freeze({ kind: 'appended' });

/** A log row as the batch plan sees it: the file's one partition. */
/** The refusal of an item that met `error`: its code when it is a Trailwire error (a storage fault), else `internal`. */
function refusedOutcome(error: unknown): AppendOutcome {
  if (isTrailwireError(error)) return { kind: 'refused', code: error.code, message: error.message };
  return { kind: 'refused', code: 'internal', message: `the payload could not be stored: ${error instanceof Error ? error.message : String(error)}` };
}

/**
 * Answers a waiting enqueue with its item's outcome: the item's queued record when appended, the
 * earlier record when its key was used before, or the refusal as the error its client gets.
 */
function answerEnqueue(pending: PendingEnqueue, outcome: AppendOutcome): void {
  if (outcome.kind === 'appended') pending.resolve({ record: queuedRecord(pending.item), created: true });
  else if (outcome.kind === 'replayed') pending.resolve({ record: outcome.record, created: false });
  else pending.reject(new TrailwireError(outcome.code, outcome.message, outcome.code === 'store_unavailable' ? { retryAfterSeconds: STORAGE_FAULT_RETRY_AFTER_SECONDS } : {}));
}

export interface SqliteIntakeQueueOptions {
  /** Called after each commit that made payloads due — new ones stored, or a dead letter requeued — to wake a worker. */
  onEnqueued?: () => void;
  /**
   * Told of each append the log's file refused for a storage fault (what its `store_unavailable`
   * says), and of each that succeeded (`null`): the intake's fault state for `/readyz`. Default: nobody.
   */
  onWrite?: (fault: string | null) => void;
  /**
   * Who processes the queue: `'core'`, the core's worker (default), or `'backend'`, the intake's
   * processing thread through a connection of its own, so that a core given this queue builds no worker.
   */
  processedBy?: 'core' | 'backend';
  /**
   * Whether `nextBatch` may wait (the connection's busy timeout) for another connection's write
   * lock on the store's file: for a connection whose thread may block, the processing thread.
   * Default false: a held lock answers "no batch now" at once, since waiting would block the event loop.
   */
  mayWaitForLock?: boolean;
}

/** Opens the queue on an SQLite store's database (`store.db`), applying its migrations. */
export function openSqliteIntakeQueue(db: Database.Database, options: SqliteIntakeQueueOptions = {}): SqliteIntakeQueue {
  return new SqliteIntakeQueue(db, options);
}
