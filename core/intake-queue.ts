/**
 * The durable intake log (contract 4): the seam between the HTTP path that accepts a payload and
 * the worker that processes it. It is a log, not a table of statuses: `enqueue` appends (durably,
 * so the 202 that follows survives a crash), and processing reads the log in order, a batch at a
 * time, then commits the batch — its outcomes and a watermark that moves past it — at once. A
 * payload's status is derived, never written per payload:
 *
 * - above the watermark, and not in a batch in hand: `queued`;
 * - in a batch in hand (where the implementation can tell): `processing`;
 * - at or below the watermark: `processed` — unless it is parked: to be retried (`queued`, with the
 *   reason of its last attempt) or a dead letter (`failed`, with the reason).
 *
 * Payloads of one VIN are processed in arrival order: a batch hands out a VIN's payloads in log
 * order, never while another batch (of any process sharing the log) holds that VIN, and never
 * while an earlier payload of the VIN waits for its retry — such payloads are parked behind it
 * (`held`) and follow it once it is processed. A dead letter no longer holds its VIN back.
 *
 * Every implementation (SQLite in `adapters/sqlite`, PostgreSQL in `adapters/postgres`) passes the
 * conformance suite `test/conformance/intake-queue.ts`.
 *
 * A queue is two parts (issue 30): a log (`intake-log.ts`: append, read a partition from a position,
 * commit a position, lease a partition) and an index (idempotency keys, parked retries and dead
 * letters, status lookups: `findByIdempotencyKey`, `get`, `getMany`, `listFailed`, `requeue`,
 * `purgeProcessed`). SQLite and PostgreSQL keep both in one database and commit a batch's outcomes
 * with its log position at once; PostgreSQL also opens its log part and its index part alone
 * (`openPostgresIntakeLog`/`openPostgresIntakeIndex`), which pass the log and index suites and
 * compose, by `PartitionedIntakeQueue`, into a queue that passes this one — as NATS JetStream's log
 * does beside PostgreSQL's index.
 */
import type { WebhookDeliveryStore } from './store.ts';

export const INTAKE_STATUSES = ['queued', 'processing', 'processed', 'failed'] as const;
export type IntakeStatus = (typeof INTAKE_STATUSES)[number];

/** How long an `Idempotency-Key` answers the original 202 (contract 4: 24 hours). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface NewIntake {
  id: string;
  partnerId: string;
  product: string;
  vin: string;
  /** The payload as received: JSON text, parsed again by the worker. */
  payload: string;
  receivedAt: number;
  idempotencyKey: string | null;
}

export interface IntakeRecord extends NewIntake {
  status: IntakeStatus;
  /** Processing attempts made so far (1 once processed at the first try). */
  attempts: number;
  /** Not attempted before this time (epoch ms): the retry backoff. */
  nextAttemptAt: number;
  /** When it was processed, or dead-lettered. */
  processedAt: number | null;
  /** Why the last attempt failed, if it did. */
  error: string | null;
}

export interface EnqueueResult {
  record: IntakeRecord;
  /** False when an earlier payload of the same partner carried the same idempotency key (within 24 h). */
  created: boolean;
}

/** An enqueue waiting for its group's commit: the item and how its caller is answered. */
export interface PendingEnqueue<R = EnqueueResult> {
  item: NewIntake;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/** The record of an item just stored: queued, due at once, never attempted. */
export function queuedRecord(item: NewIntake): IntakeRecord {
  // Field by field rather than spread: on the accept path of every 202, a spread of the item cost
  // several microseconds (a CPU profile of the intake bench).
  return {
    id: item.id,
    partnerId: item.partnerId,
    product: item.product,
    vin: item.vin,
    payload: item.payload,
    receivedAt: item.receivedAt,
    idempotencyKey: item.idempotencyKey,
    status: 'queued',
    attempts: 0,
    nextAttemptAt: item.receivedAt,
    processedAt: null,
    error: null,
  };
}

/** One payload of a batch, to be processed. */
export interface IntakeEntry extends Omit<NewIntake, 'idempotencyKey'> {
  /** Its position in the log: arrival order. */
  seq: number;
  /** Failed attempts before this one (0 for a payload never tried, or re-queued by an operator). */
  attempts: number;
}

/**
 * Payloads handed out together, in log order. The implementation keeps what it needs to commit or
 * abandon the batch (a transaction, a lease) behind this view.
 */
export interface IntakeBatch {
  readonly entries: readonly IntakeEntry[];
}

/** What became of one payload of a batch. */
export type IntakeOutcome =
  | { kind: 'processed' }
  /** To be tried again, not before `nextAttemptAt`; the reason shows in its status. */
  | { kind: 'retry'; error: string; nextAttemptAt: number }
  /** A dead letter, with the reason. */
  | { kind: 'failed'; error: string }
  /** Not attempted: an earlier payload of its VIN is to be retried first. */
  | { kind: 'held' };

/** The accept role: what the HTTP path needs of a queue. */
export interface IntakeAcceptor {
  /**
   * Appends a payload and resolves once it is durable, answering its record. The record's id is the
   * queue's: the item's own, or one that begins with it (a log engine's queue adds the payload's
   * position, `partitioned-intake-queue.ts`). With an idempotency key already used by the
   * same partner in the 24 hours before `item.receivedAt`, stores nothing and answers the original
   * record (`created: false`); this check is atomic with the append.
   */
  enqueue(item: NewIntake): Promise<EnqueueResult>;
  /** The record of the partner's idempotency key if it was used after `since` (exclusive). */
  findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null>;
  /** The payload with its derived status, or null (unknown, or purged). */
  get(id: string): Promise<IntakeRecord | null>;
  /**
   * The payloads of these ids with their derived status, by id, read together (one query where the
   * backend can: a partner's bulk status read asks up to 100 at once); unknown or purged ids are absent.
   */
  getMany(ids: readonly string[]): Promise<Map<string, IntakeRecord>>;
}

/** The operate role: what the operator's commands and the metrics need. */
export interface IntakeOperations {
  /** Dead letters, oldest (by arrival) first. */
  listFailed(limit: number): Promise<IntakeRecord[]>;
  /** failed -> queued, due at `at`, with attempts reset; false when the item is not failed. */
  requeue(id: string, at: number): Promise<boolean>;
  /** Payloads queued or processing (retries included). */
  depth(): Promise<number>;
}

/** The process role: what a worker (`intake-worker.ts`) needs. */
export interface IntakeProcessing {
  /**
   * Opens the next batch: up to `limit` payloads that may be processed at `now` — due retries and
   * what follows the watermark — each VIN's in log order (`intake-batch-plan.ts`). Answers null when
   * there is nothing to do (or another process holds all that there is). Every opened batch is ended
   * by exactly one `commitBatch` or `abandonBatch`.
   */
  nextBatch(limit: number, now: number): Promise<IntakeBatch | null>;
  /**
   * Records the outcomes (by `seq`) and moves the watermark past the batch, all at once, at `now`
   * (the processed time). An entry without an outcome is `held`.
   */
  commitBatch(batch: IntakeBatch, outcomes: ReadonlyMap<number, IntakeOutcome>, now: number): Promise<void>;
  /** Ends a batch with nothing recorded: its payloads are handed out again, their attempt uncounted. */
  abandonBatch(batch: IntakeBatch): Promise<void>;
  /** Trims up to `limit` payloads processed before `before`; answers how many. Dead letters and retries stay. */
  purgeProcessed(before: number, limit: number): Promise<number>;
}

/**
 * The queue the core takes intake into: accept and operate. Its processing is the backend's (SQLite's
 * processing thread) or, for a `ProcessableIntakeQueue`, the core's worker.
 */
export interface IntakeQueue extends IntakeAcceptor, IntakeOperations {
  /**
   * Who processes it. `'core'` (the default): the core's worker, so the queue offers the process role
   * too. `'backend'`: the backend's own processing (SQLite's thread); a core given it builds no worker
   * (`worker: false`), since one would only compete with the backend's for batches.
   */
  readonly processedBy?: 'core' | 'backend';
}

/** A queue in every role: one the core's worker processes (SQLite's log, PostgreSQL's, the partitioned queue). */
export interface ProcessableIntakeQueue extends IntakeQueue, IntakeProcessing {}

/** Whether the queue offers the core's worker the process role (a core asked to build a worker checks it at start). */
export function isProcessable(queue: IntakeQueue): queue is ProcessableIntakeQueue {
  return queue.processedBy !== 'backend' && typeof (queue as Partial<IntakeProcessing>).nextBatch === 'function';
}

/**
 * An intake as a storage backend's front door opens it (`openSqliteIntake`, `openPostgresIntake`): the
 * queue the core takes intake into, and the backend's own part of intake (a processing thread, a
 * session that hears other processes' enqueues). A queue that offers the process role
 * (`ProcessableIntakeQueue`) is processed by the core's worker; one processed by the backend says so
 * (`processedBy: 'backend'`).
 */
export interface IntakeBackend {
  /** The queue the core takes intake into. */
  readonly queue: IntakeQueue;
  /** Starts the backend's part; resolves once it runs. */
  start(): Promise<void>;
  /** Finishes the round in hand, ends the backend's part and releases what the intake holds besides the store. Call after the core's worker stopped. */
  stop(): Promise<void>;
  /** `/readyz` checks of the intake path, by name, each throwing (its message names the fault) while its part cannot take intake. */
  readonly readinessChecks: Readonly<Record<string, () => Promise<void>>>;
  /**
   * Where the webhook deliverer's writes go when the backend's processing owns the writes of the
   * store (SQLite's thread): they run there, between its batches. Default: none (the store's own).
   */
  readonly webhookDeliveryStore?: WebhookDeliveryStore;
}
