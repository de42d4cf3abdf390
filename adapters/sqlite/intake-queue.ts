/**
 * The durable intake queue in the embedded SQLite file (`IntakeQueue` of `core/intake-queue.ts`).
 * It shares the store's database, so the store's durability setting decides what a 202 survives:
 * `process` (WAL, synchronous=NORMAL) survives kill -9 of the process; `power` (synchronous=FULL)
 * also survives power loss. Enqueues arriving in the same event-loop turn are grouped into one
 * transaction (group commit), so `power` mode pays one fsync per group, not one per request.
 */
import type Database from 'better-sqlite3';
import {
  type EnqueueResult,
  IDEMPOTENCY_WINDOW_MS,
  type IntakeQueue,
  type IntakeRecord,
  type IntakeStatus,
  type NewIntake,
} from '../../core/intake-queue.ts';
import { applyMigrations, type Migration } from './migrations.ts';

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
      -- Claiming reads only unfinished rows, in arrival order, and checks each VIN's earlier rows.
      CREATE INDEX intake_unfinished ON intake_queue (seq) WHERE status IN ('queued', 'processing');
      CREATE INDEX intake_unfinished_by_vin ON intake_queue (vin, seq) WHERE status IN ('queued', 'processing');
      CREATE INDEX intake_failed ON intake_queue (seq) WHERE status = 'failed';
    `,
  },
];

interface QueueRow {
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

const COLUMNS = `id, partner_id, product, vin, payload, received_at, idempotency_key, status, attempts,
  next_attempt_at, processed_at, error`;

interface PendingEnqueue {
  item: NewIntake;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

export class SqliteIntakeQueue implements IntakeQueue {
  private readonly sql;
  private pending: PendingEnqueue[] = [];
  private flushScheduled = false;
  private readonly enqueueGroup: Database.Transaction<(items: NewIntake[]) => EnqueueResult[]>;
  private readonly claimBatch: Database.Transaction<(limit: number, now: number) => QueueRow[]>;

  /** Applies the queue's migrations to the store's database and prepares its statements. */
  constructor(private readonly db: Database.Database) {
    applyMigrations(db, QUEUE_COMPONENT, QUEUE_MIGRATIONS);
    this.sql = {
      insert: db.prepare<[string, string, string, string, string, number, string | null, number]>(
        `INSERT INTO intake_queue (id, partner_id, product, vin, payload, received_at, idempotency_key, status, next_attempt_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)`,
      ),
      byKey: db.prepare<[string, string], QueueRow>(`SELECT ${COLUMNS} FROM intake_queue WHERE partner_id = ? AND idempotency_key = ?`),
      clearKey: db.prepare<[string, string]>('UPDATE intake_queue SET idempotency_key = NULL WHERE partner_id = ? AND idempotency_key = ?'),
      byId: db.prepare<[string], QueueRow>(`SELECT ${COLUMNS} FROM intake_queue WHERE id = ?`),
      due: db.prepare<[number, number], QueueRow & { seq: number }>(
        `SELECT seq, ${COLUMNS} FROM intake_queue q
         WHERE q.status = 'queued' AND q.next_attempt_at <= ?
           AND NOT EXISTS (SELECT 1 FROM intake_queue e
                           WHERE e.vin = q.vin AND e.seq < q.seq AND e.status IN ('queued', 'processing'))
         ORDER BY q.seq LIMIT ?`,
      ),
      markProcessing: db.prepare<[number]>(`UPDATE intake_queue SET status = 'processing', attempts = attempts + 1 WHERE seq = ?`),
      complete: db.prepare<[number, string]>(`UPDATE intake_queue SET status = 'processed', processed_at = ?, error = NULL WHERE id = ? AND status = 'processing'`),
      retryLater: db.prepare<[string, number, string]>(`UPDATE intake_queue SET status = 'queued', error = ?, next_attempt_at = ? WHERE id = ? AND status = 'processing'`),
      fail: db.prepare<[string, number, string]>(`UPDATE intake_queue SET status = 'failed', error = ?, processed_at = ? WHERE id = ? AND status = 'processing'`),
      failed: db.prepare<[number], QueueRow>(`SELECT ${COLUMNS} FROM intake_queue WHERE status = 'failed' ORDER BY seq LIMIT ?`),
      requeue: db.prepare<[number, string]>(
        `UPDATE intake_queue SET status = 'queued', attempts = 0, next_attempt_at = ?, processed_at = NULL WHERE id = ? AND status = 'failed'`,
      ),
      recover: db.prepare(`UPDATE intake_queue SET status = 'queued' WHERE status = 'processing'`),
      depth: db.prepare<[], { n: number }>(`SELECT COUNT(*) AS n FROM intake_queue WHERE status IN ('queued', 'processing')`),
    };
    this.enqueueGroup = db.transaction((items: NewIntake[]) => items.map((item) => this.insertOne(item)));
    this.claimBatch = db.transaction((limit: number, now: number) => {
      const rows = this.sql.due.all(now, limit);
      for (const row of rows) this.sql.markProcessing.run(row.seq);
      return rows.map((row) => ({ ...row, status: 'processing' as const, attempts: row.attempts + 1 }));
    });
  }

  enqueue(item: NewIntake): Promise<EnqueueResult> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  async findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    const row = this.sql.byKey.get(partnerId, idempotencyKey);
    return row && row.received_at > since ? toRecord(row) : null;
  }

  async get(id: string): Promise<IntakeRecord | null> {
    const row = this.sql.byId.get(id);
    return row ? toRecord(row) : null;
  }

  async claim(limit: number, now: number): Promise<IntakeRecord[]> {
    return this.claimBatch.immediate(limit, now).map(toRecord);
  }

  async complete(id: string, at: number): Promise<void> {
    this.sql.complete.run(at, id);
  }

  async retryLater(id: string, error: string, nextAttemptAt: number): Promise<void> {
    this.sql.retryLater.run(error, nextAttemptAt, id);
  }

  async fail(id: string, error: string, at: number): Promise<void> {
    this.sql.fail.run(error, at, id);
  }

  async listFailed(limit: number): Promise<IntakeRecord[]> {
    return this.sql.failed.all(limit).map(toRecord);
  }

  async requeue(id: string, at: number): Promise<boolean> {
    return this.sql.requeue.run(at, id).changes > 0;
  }

  async recoverInFlight(): Promise<number> {
    return this.sql.recover.run().changes;
  }

  async depth(): Promise<number> {
    return this.sql.depth.get()!.n;
  }

  /** Writes every enqueue of this turn in one transaction: one commit (one fsync in `power` mode). */
  private flush(): void {
    const group = this.pending;
    this.pending = [];
    this.flushScheduled = false;
    let results: EnqueueResult[];
    try {
      results = this.enqueueGroup.immediate(group.map((entry) => entry.item));
    } catch {
      // One bad row must not fail its neighbours: retry them one transaction each.
      for (const entry of group) {
        try {
          entry.resolve(this.enqueueGroup.immediate([entry.item])[0]!);
        } catch (error) {
          entry.reject(error);
        }
      }
      return;
    }
    group.forEach((entry, i) => entry.resolve(results[i]!));
  }

  private insertOne(item: NewIntake): EnqueueResult {
    if (item.idempotencyKey !== null) {
      const earlier = this.sql.byKey.get(item.partnerId, item.idempotencyKey);
      if (earlier && earlier.received_at > item.receivedAt - IDEMPOTENCY_WINDOW_MS) return { record: toRecord(earlier), created: false };
      if (earlier) this.sql.clearKey.run(item.partnerId, item.idempotencyKey);
    }
    this.sql.insert.run(item.id, item.partnerId, item.product, item.vin, item.payload, item.receivedAt, item.idempotencyKey, item.receivedAt);
    return {
      record: { ...item, status: 'queued', attempts: 0, nextAttemptAt: item.receivedAt, processedAt: null, error: null },
      created: true,
    };
  }
}

/** Opens the queue on an SQLite store's database (`store.db`). */
export function openSqliteIntakeQueue(db: Database.Database): SqliteIntakeQueue {
  return new SqliteIntakeQueue(db);
}

function toRecord(row: QueueRow): IntakeRecord {
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
