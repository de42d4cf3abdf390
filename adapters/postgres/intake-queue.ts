/**
 * The durable intake queue on PostgreSQL (`IntakeQueue` of `core/intake-queue.ts`), shared by any
 * number of Trailwire processes (contract 11). It lives in the store's schema and uses the store's
 * pool; an enqueue is one autocommitted INSERT, so it is durable when it resolves (as durable as the
 * server's `synchronous_commit` makes a commit), and its idempotency key is checked by the INSERT
 * itself (a unique index, see `enqueue`).
 *
 * Across processes a VIN's payloads still go one at a time and in order: a claim takes a transaction
 * advisory lock per VIN before it decides what to claim (see `CLAIM`). Each queue also keeps one
 * session of its own, outside the pool, that holds an advisory lock naming it for as long as it
 * lives: its claims are marked with that name, so `recoverInFlight` returns to the queue only the
 * payloads of this queue and of queues whose session is gone (a crashed process), never those a live
 * process is working on; a claim also does so every `abandonedCheckMs`. The same session LISTENs, so
 * `onEnqueued` hears of enqueues made by every process, which wakes idle workers everywhere.
 *
 * Open it with `await openPostgresIntakeQueue(store)`; `close()` it after stopping its worker (it
 * does not close the store's pool).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { TrailwireError } from '../../core/errors.ts';
import {
  type EnqueueResult,
  IDEMPOTENCY_WINDOW_MS,
  type IntakeOutcome,
  type IntakeQueue,
  type IntakeRecord,
  type NewIntake,
  queuedRecord,
} from '../../core/intake-queue.ts';
import { withoutUndefined } from '../sql/rows.ts';
import { applyPostgresMigrations, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS } from './migrations.ts';
import { queryRow, queryRows, queryRun, quoteSchema, type Statement } from './pool.ts';
import type { PostgresStore } from './postgres-store.ts';
import { QUEUE_COLUMNS, type QueueRow, toIntakeRecord } from '../sql/queue-rows.ts';

export interface PostgresIntakeQueueOptions {
  /**
   * Called when a payload has been enqueued into this schema by any process, this one included
   * (LISTEN/NOTIFY), and after the queue's session reconnects (notices may have been missed). Pass
   * the worker's `notify`. Default: none, and the session does not LISTEN.
   */
  onEnqueued?: () => void;
  /**
   * How often, at most, a claim first returns to the queue what sessions that are gone left
   * processing, in ms of the claim's clock. Default 60 000.
   */
  abandonedCheckMs?: number;
  /** How long to wait before reopening a lost session, in ms; doubled after each failure, up to 30 s. Default 1000. */
  reconnectDelayMs?: number;
}

export const DEFAULT_POSTGRES_INTAKE_QUEUE_OPTIONS = {
  abandonedCheckMs: 60_000,
  reconnectDelayMs: 1000,
} as const satisfies Omit<Required<PostgresIntakeQueueOptions>, 'onEnqueued'>;

const MAX_RECONNECT_DELAY_MS = 30_000;

/** One channel for every schema; the notice's payload names the schema. */
const ENQUEUED_CHANNEL = 'trailwire_intake';

/** SQLSTATE of `intake_claim` finding its session gone. */
const SESSION_NOT_LIVE = '55000';

/** Enqueues whose key keeps being taken and released under them give up after this many tries. */
const ENQUEUE_TRIES = 5;

/** The advisory lock a live session holds (the same text `intake_claim` hashes). */
const ownerLockName = (owner: string): string => `trailwire:intake-owner:${owner}`;

/** The parts of a PostgreSQL store the queue shares: its pool and schema. */
export type PostgresQueueHost = Pick<PostgresStore, 'pool' | 'schema'>;

/**
 * Applies the queue's migrations to the store's schema and opens the queue's own session. Resolves
 * once the queue can claim; rejects (with nothing left open) when the database cannot be reached.
 */
export async function openPostgresIntakeQueue(host: PostgresQueueHost, options: PostgresIntakeQueueOptions = {}): Promise<PostgresIntakeQueue> {
  const settings = resolvePostgresIntakeQueueOptions(options);
  await applyPostgresMigrations(host.pool, host.schema, POSTGRES_QUEUE_COMPONENT, POSTGRES_QUEUE_MIGRATIONS);
  const queue = new PostgresIntakeQueue(host.pool, host.schema, settings);
  await queue.openSession();
  return queue;
}

/** Checks the options, naming the first bad field, and fills in the defaults. */
export function resolvePostgresIntakeQueueOptions(options: PostgresIntakeQueueOptions): PostgresIntakeQueueSettings {
  if (typeof options !== 'object' || options === null) throw badOption('options', 'must be an object');
  const resolved = { ...DEFAULT_POSTGRES_INTAKE_QUEUE_OPTIONS, ...withoutUndefined(options) };
  if (resolved.onEnqueued !== undefined && typeof resolved.onEnqueued !== 'function') throw badOption('onEnqueued', 'must be a function');
  for (const field of ['abandonedCheckMs', 'reconnectDelayMs'] as const) {
    const value = resolved[field];
    if (!Number.isSafeInteger(value) || value < 1) throw badOption(field, `must be a positive integer of milliseconds (got ${String(value)})`);
  }
  return resolved;
}

export type PostgresIntakeQueueSettings = Omit<Required<PostgresIntakeQueueOptions>, 'onEnqueued'> & Pick<PostgresIntakeQueueOptions, 'onEnqueued'>;

/** The queue's own connection: it holds the owner lock of `owner` (and LISTENs) while it lives. */
interface Session {
  client: pg.Client;
  owner: string;
}

/**
 * CLAIM, and why a VIN's payloads never run in two processes at once or out of order.
 *
 * `intake_claim` (in the queue's migration) runs two statements under READ COMMITTED, in one round
 * trip. The first walks the queued, due rows in arrival order and takes `pg_try_advisory_xact_lock`
 * on each one's VIN, skipping VINs another claim holds, until it has `limit` rows. The second, with
 * a snapshot taken after those locks were granted (a VOLATILE function takes a fresh snapshot per
 * statement), claims the rows of the locked VINs that are queued and due, where no row of the VIN
 * is processing and no earlier row of it waits for a retry.
 *
 * Only a claim turns a row `processing`, and a claim does so only for VINs whose lock it holds until
 * its COMMIT. PostgreSQL makes a commit visible before it releases the transaction's locks, so of two
 * claims of one VIN the second, once it has the lock, sees the first one's rows as processing and
 * claims nothing of that VIN. Whatever happens meanwhile elsewhere only makes a claim more cautious:
 * settles, releases and recovery turn processing rows into others, so a claim that does not yet see
 * them skips a VIN it could have taken, never the reverse. Hence, at any moment, every processing
 * row of a VIN belongs to one claim, and within it the rows are the VIN's due rows from its oldest
 * unfinished one on, in order (the caller works through them one after another).
 *
 * A single statement could not do this: FOR UPDATE SKIP LOCKED rechecks a locked row's own columns
 * against its latest version, but whatever else the statement decided from (the VIN's other rows)
 * stays as its snapshot saw it, from before the lock; a claim that started while another was
 * committing could take a VIN's next row while the first is still processing.
 *
 * Two quirks are handled by "no row of the VIN is processing" rather than "no earlier row": sequence
 * numbers are handed out at INSERT, not COMMIT, so of two enqueues racing for one VIN the later seq
 * may become visible first; and a re-queued dead letter is older than the rows that went on without
 * it. Either way the late row waits until its VIN is idle rather than running beside it.
 */
export class PostgresIntakeQueue implements IntakeQueue {
  private readonly sql: QueueStatements;
  private session: Session | undefined;
  /** Every name this queue has claimed under: a settle for a session lost since still counts, until others recover its rows. */
  private readonly owners: string[] = [];
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectDelayMs: number;
  private lastAbandonedCheckAt = Number.NEGATIVE_INFINITY;
  private closed = false;

  /** Use `openPostgresIntakeQueue`: the queue needs its migrations and a session before it claims. */
  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly settings: PostgresIntakeQueueSettings,
  ) {
    this.sql = queueStatements(schema);
    this.reconnectDelayMs = settings.reconnectDelayMs;
  }

  async enqueue(item: NewIntake): Promise<EnqueueResult> {
    const values = [item.id, item.partnerId, item.product, item.vin, item.payload, item.receivedAt, item.idempotencyKey, this.schema];
    for (let tries = 0; tries < ENQUEUE_TRIES; tries++) {
      // ON CONFLICT on the key's unique index: of racing enqueues of one key one inserts, the others
      // wait for its commit and then insert nothing. The key's holder is then read back, in a new
      // statement that sees that commit.
      if ((await queryRun(this.pool, this.sql.insert, values)) > 0) {
        return {
          record: queuedRecord(item),
          created: true,
        };
      }
      const earlier = await queryRow<QueueRow>(this.pool, this.sql.byKey, [item.partnerId, item.idempotencyKey]);
      if (earlier !== undefined && earlier.received_at > item.receivedAt - IDEMPOTENCY_WINDOW_MS) return { record: toIntakeRecord(earlier), created: false };
      // Used before the window: the key is free again. Clear it and insert again; should another
      // enqueue of the key win that race, the next round answers its record.
      if (earlier !== undefined) await queryRun(this.pool, this.sql.clearKey, [earlier.id, item.idempotencyKey]);
    }
    throw new TrailwireError('unavailable', `idempotency key of partner ${item.partnerId} kept changing hands; intake ${item.id} was not stored`);
  }

  async findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    const row = await queryRow<QueueRow>(this.pool, this.sql.byKey, [partnerId, idempotencyKey]);
    return row !== undefined && row.received_at > since ? toIntakeRecord(row) : null;
  }

  async get(id: string): Promise<IntakeRecord | null> {
    const row = await queryRow<QueueRow>(this.pool, this.sql.byId, [id]);
    return row === undefined ? null : toIntakeRecord(row);
  }

  async claim(limit: number, now: number): Promise<IntakeRecord[]> {
    const session = this.liveSession();
    if (now - this.lastAbandonedCheckAt >= this.settings.abandonedCheckMs) {
      this.lastAbandonedCheckAt = now;
      await queryRun(this.pool, this.sql.recover, [session.owner, false]);
    }
    let rows: QueueRow[];
    try {
      rows = await queryRows<QueueRow>(this.pool, this.sql.claim, [session.owner, now, limit]);
    } catch (error) {
      if (error instanceof pg.DatabaseError && error.code === SESSION_NOT_LIVE) {
        throw new TrailwireError('unavailable', 'the intake queue lost its PostgreSQL session; it claims again once reconnected', { cause: error });
      }
      throw error;
    }
    // RETURNING does not promise an order; the queue does.
    return rows.sort((a, b) => a.seq - b.seq).map(toIntakeRecord);
  }

  async settle(outcomes: readonly IntakeOutcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    const at = (outcome: IntakeOutcome): number | null =>
      outcome.kind === 'retry' ? outcome.nextAttemptAt : outcome.kind === 'released' ? null : outcome.at;
    await queryRun(this.pool, this.sql.settle, [
      outcomes.map((outcome) => outcome.id),
      outcomes.map((outcome) => outcome.kind),
      outcomes.map((outcome) => ('error' in outcome ? outcome.error : null)),
      outcomes.map(at),
      this.owners,
    ]);
  }

  async listFailed(limit: number): Promise<IntakeRecord[]> {
    return (await queryRows<QueueRow>(this.pool, this.sql.listFailed, [limit])).map(toIntakeRecord);
  }

  async requeue(id: string, at: number): Promise<boolean> {
    return (await queryRun(this.pool, this.sql.requeue, [at, id])) > 0;
  }

  /**
   * Returns to the queue what this queue left processing, and what queues whose session is gone
   * left (their process crashed or lost its connection); what live processes hold stays theirs.
   */
  async recoverInFlight(): Promise<number> {
    return queryRun(this.pool, this.sql.recover, [this.liveSession().owner, true]);
  }

  async purgeProcessed(before: number, limit: number): Promise<number> {
    return queryRun(this.pool, this.sql.purge, [before, limit]);
  }

  async depth(): Promise<number> {
    return (await queryRow<{ n: number }>(this.pool, this.sql.depth, []))!.n;
  }

  /**
   * Ends the queue's session. What it still holds processing becomes its process's abandoned work,
   * which other queues recover; stop the worker first. The store's pool stays open.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const session = this.session;
    this.session = undefined;
    await session?.client.end().catch(() => {});
  }

  /** Connects the session, takes its owner lock and LISTENs. Called once by `openPostgresIntakeQueue`, then on reconnects. */
  async openSession(): Promise<void> {
    // Outside the pool: the session lives as long as the queue and must not hold a pooled connection.
    const client = new pg.Client({ ...this.pool.options, application_name: 'trailwire:intake-queue', keepAlive: true });
    client.on('error', () => this.lose(client));
    client.on('end', () => this.lose(client));
    const owner = randomUUID();
    try {
      await client.connect();
      await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [ownerLockName(owner)]);
      const { onEnqueued } = this.settings;
      if (onEnqueued !== undefined) {
        client.on('notification', (notice) => {
          if (notice.channel === ENQUEUED_CHANNEL && notice.payload === this.schema) onEnqueued();
        });
        await client.query(`LISTEN ${ENQUEUED_CHANNEL}`);
      }
    } catch (error) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      throw error;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.owners.push(owner);
    this.session = { client, owner };
    this.reconnectDelayMs = this.settings.reconnectDelayMs;
  }

  private liveSession(): Session {
    if (this.session === undefined) {
      throw new TrailwireError('unavailable', this.closed ? 'the intake queue is closed' : 'the intake queue is reconnecting to PostgreSQL');
    }
    return this.session;
  }

  /** The session's connection failed or ended: claim nothing until a new session (a new owner) is open. */
  private lose(client: pg.Client): void {
    if (this.session?.client !== client) return;
    this.session = undefined;
    client.end().catch(() => {});
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed) return;
    const delay = this.reconnectDelayMs;
    this.reconnectDelayMs = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
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


/** The queue's statements on `schema`, each named for `pg` to prepare once per connection. */
export function queueStatements(schema: string) {
  const s = quoteSchema(schema);
  const statements = {
    // The notice goes out at COMMIT, and only when a row was stored.
    insert: `WITH stored AS (
        INSERT INTO ${s}.intake_queue (id, partner_id, product, vin, payload, received_at, idempotency_key, status, next_attempt_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $6)
        ON CONFLICT (partner_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING seq)
      SELECT seq, pg_notify('${ENQUEUED_CHANNEL}', $8) FROM stored`,
    byKey: `SELECT ${QUEUE_COLUMNS} FROM ${s}.intake_queue WHERE partner_id = $1 AND idempotency_key = $2`,
    clearKey: `UPDATE ${s}.intake_queue SET idempotency_key = NULL WHERE id = $1 AND idempotency_key = $2`,
    byId: `SELECT ${QUEUE_COLUMNS} FROM ${s}.intake_queue WHERE id = $1`,
    claim: `SELECT ${QUEUE_COLUMNS} FROM ${s}.intake_claim($1, $2, $3)`,
    settle: `UPDATE ${s}.intake_queue q SET
        status = CASE o.kind WHEN 'processed' THEN 'processed' WHEN 'failed' THEN 'failed' ELSE 'queued' END,
        processed_at = CASE WHEN o.kind IN ('processed', 'failed') THEN o.at ELSE q.processed_at END,
        error = CASE o.kind WHEN 'processed' THEN NULL WHEN 'released' THEN q.error ELSE o.error END,
        next_attempt_at = CASE o.kind WHEN 'retry' THEN o.at ELSE q.next_attempt_at END,
        attempts = CASE o.kind WHEN 'released' THEN q.attempts - 1 ELSE q.attempts END,
        claimed_by = NULL
      FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS o (id, kind, error, at)
      WHERE q.id = o.id AND q.status = 'processing' AND q.claimed_by = ANY($5::text[])`,
    listFailed: `SELECT ${QUEUE_COLUMNS} FROM ${s}.intake_queue WHERE status = 'failed' ORDER BY seq LIMIT $1`,
    requeue: `UPDATE ${s}.intake_queue SET status = 'queued', attempts = 0, next_attempt_at = $1, processed_at = NULL
      WHERE id = $2 AND status = 'failed'`,
    // $1 is this queue's session, whose own rows go back only when $2. Another owner is gone when its
    // lock can be taken (and is at once let go): a session holds it as long as it lives, and an
    // owner's name is never used again, so one found gone stays gone.
    recover: `WITH owners AS (
        SELECT DISTINCT claimed_by FROM ${s}.intake_queue WHERE status = 'processing' AND claimed_by <> $1),
      gone AS MATERIALIZED (
        SELECT claimed_by FROM owners
        -- CASE, not AND: the lock must be tried before it is let go (AND may evaluate in any order).
        WHERE CASE WHEN pg_try_advisory_lock(hashtextextended('trailwire:intake-owner:' || claimed_by, 0))
                   THEN pg_advisory_unlock(hashtextextended('trailwire:intake-owner:' || claimed_by, 0))
                   ELSE false END)
      UPDATE ${s}.intake_queue SET status = 'queued', claimed_by = NULL
      WHERE status = 'processing' AND ((claimed_by = $1 AND $2::boolean) OR claimed_by IN (SELECT claimed_by FROM gone))`,
    // SKIP LOCKED: purges running in several processes at once take different rows.
    purge: `DELETE FROM ${s}.intake_queue WHERE seq IN (
        SELECT seq FROM ${s}.intake_queue WHERE status = 'processed' AND processed_at < $1
        ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    depth: `SELECT count(*)::int AS n FROM ${s}.intake_queue WHERE status IN ('queued', 'processing')`,
  };
  // Prefixed apart from the store's statements, with which they share the pool's connections.
  return Object.fromEntries(
    Object.entries(statements).map(([key, text]) => [key, { name: `trailwire_queue_${key}`, text }]),
  ) as Record<keyof typeof statements, Statement>;
}

type QueueStatements = ReturnType<typeof queueStatements>;


function badOption(field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `PostgresIntakeQueueOptions.${field} ${message}`, {
    errors: [{ path: field, message }],
  });
}
