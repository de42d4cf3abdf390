/**
 * The intake queue of a log engine (issue 30): the core's `IntakeQueue` made of an `IntakeLog`
 * (`intake-log.ts`, e.g. NATS JetStream) and an `IntakeIndex` (`intake-index.ts`, PostgreSQL).
 * SQLite's and PostgreSQL's own queues keep both parts in one database; this one is for a log that
 * lives elsewhere, and it passes the same intake-queue conformance suite.
 *
 * - Enqueue. A turn's payloads are appended to the log as one group (`TurnBatcher`): each answers
 *   once the log acknowledged it, so a 202 follows a durable append. Its queue id carries its
 *   position, `<id>.<partition>.<seq>`, so a status lookup needs no row written at intake. A payload
 *   with an `Idempotency-Key` claims the key in the index first (atomically: contract 4), and the
 *   claim names its id once appended; a repeat while the first is in flight waits for it.
 * - Batches. A batch leases partitions with work (at most `maxPartitionsPerBatch`, so that another
 *   process finds work beside this one), reads each from the index's committed position — due
 *   retries first, then the log — and takes the oldest `limit`, each VIN's in order; a log payload
 *   whose VIN waits for a retry is held back behind it. A lease is held only while its batch is
 *   open: a process that dies loses it, and what its batch had read was never committed, so the
 *   next holder reads it again.
 * - Commit. The index writes a row per payload of the batch (processed, retry, dead letter, held)
 *   and moves each partition's position past what was read, in one transaction; only then does the
 *   log let go of what the positions cover (its retention) and the leases go. A crash between the
 *   two leaves the log holding more than it must, never less.
 * - Status. A row in the index says it; without one, a payload after the partition's position is
 *   `queued` (read from the log), and one at or before it was trimmed.
 */
import { type Clock, systemClock } from './clock.ts';
import { storeUnavailable, type TrailwireError, isTrailwireError } from './errors.ts';
import type { IndexedIntake, IntakeIndex, KeyHolder } from './intake-index.ts';
import type { IntakeLog, LoggedIntake, LogPosition, PartitionLease } from './intake-log.ts';
import {
  type EnqueueResult,
  IDEMPOTENCY_WINDOW_MS,
  type IntakeBatch,
  type IntakeEntry,
  type IntakeOutcome,
  type ProcessableIntakeQueue,
  type IntakeRecord,
  type NewIntake,
  type PendingEnqueue,
  queuedRecord,
} from './intake-queue.ts';
import { type BatchPlan, inOpenBatches, type PlannedEntry, planBatch, settleBatch, waitingKey } from './intake-batch-plan.ts';
import { TurnBatcher } from './turn-batcher.ts';

export interface PartitionedIntakeQueueOptions {
  /** Partitions one batch leases at most. Default half the log's (at least one). */
  maxPartitionsPerBatch?: number;
  /** How long an idempotency key's append may stay in flight before a repeat takes the key over (its process died). Default 30,000 ms. */
  staleKeyMs?: number;
  /** How long a repeat of a key waits for the first's append before its 503. Default 5,000 ms. */
  keyWaitMs?: number;
  /**
   * How often a repeat of a key another process is appending looks for its id (the index has no
   * notification to wait on). Default 20 ms.
   */
  keyPollMs?: number;
  /** What the key wait's deadline is read from. Default: the system clock. */
  clock?: Clock;
}

/** A payload's queue id: its log id and position. */
export function queueIdOf(logged: { id: string } & LogPosition): string {
  return `${logged.id}.${logged.partition}.${logged.seq}`;
}

function parseQueueId(id: string): ({ id: string } & LogPosition) | null {
  const parts = id.split('.');
  if (parts.length !== 3) return null;
  const [logId, partition, seq] = [parts[0]!, Number(parts[1]), Number(parts[2])];
  return Number.isSafeInteger(partition) && Number.isSafeInteger(seq) && partition >= 0 && seq > 0 ? { id: logId, partition, seq } : null;
}

/** A planned entry with what it came from: the log (a first attempt) or the index (a retry). */
interface PartitionedEntry extends PlannedEntry {
  readonly from: IndexedIntake;
}

interface PartitionedBatch extends IntakeBatch {
  readonly owner: PartitionedIntakeQueue;
  entries: IntakeEntry[];
  readonly leases: PartitionLease[];
  plan: BatchPlan<PartitionedEntry>;
}

export class PartitionedIntakeQueue implements ProcessableIntakeQueue {
  private readonly turn = new TurnBatcher<PendingEnqueue<LogPosition>>((group) => void this.appendGroup(group));
  private readonly open = new Set<PartitionedBatch>();
  /** Keys this process is appending: a repeat waits for their ids. */
  private readonly inFlightKeys = new Map<string, Promise<string | null>>();
  private readonly maxPartitionsPerBatch: number;
  private readonly staleKeyMs: number;
  private readonly keyWaitMs: number;
  private readonly keyPollMs: number;
  private readonly clock: Clock;
  /** Where the next batch starts looking, so that every partition's work gets its turn. */
  private nextPartition = 0;

  constructor(
    private readonly log: IntakeLog,
    private readonly index: IntakeIndex,
    options: PartitionedIntakeQueueOptions = {},
  ) {
    this.maxPartitionsPerBatch = options.maxPartitionsPerBatch ?? Math.max(1, Math.floor(log.partitions / 2));
    this.staleKeyMs = options.staleKeyMs ?? 30_000;
    this.keyWaitMs = options.keyWaitMs ?? 5_000;
    this.keyPollMs = options.keyPollMs ?? 20;
    this.clock = options.clock ?? systemClock;
  }

  async enqueue(item: NewIntake): Promise<EnqueueResult> {
    const key = item.idempotencyKey;
    if (key === null) {
      const position = await this.append(item);
      return { record: { ...queuedRecord(item), id: queueIdOf({ id: item.id, ...position }) }, created: true };
    }
    const holder = await this.index.claimKey(item, IDEMPOTENCY_WINDOW_MS, this.staleKeyMs);
    if (holder) return { record: await this.holderRecord(item.partnerId, key, holder), created: false };
    const flight = this.append(item).then(
      (position) => queueIdOf({ id: item.id, ...position }),
      () => null,
    );
    const keyOf = `${item.partnerId}\n${key}`;
    this.inFlightKeys.set(keyOf, flight);
    try {
      const id = await flight;
      await this.index.settleKey(item.partnerId, key, id);
      if (id === null) await this.append(item); // rethrows the refusal, as its client is to get it
      return { record: { ...queuedRecord(item), id: id! }, created: true };
    } finally {
      this.inFlightKeys.delete(keyOf);
    }
  }

  async findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    const holder = await this.index.findKey(partnerId, idempotencyKey);
    // In flight: the enqueue that follows finds it again and waits for it.
    if (!holder || holder.receivedAt <= since || holder.id === null) return null;
    return this.holderRecord(partnerId, idempotencyKey, holder);
  }

  async get(id: string): Promise<IntakeRecord | null> {
    return (await this.getMany([id])).get(id) ?? null;
  }

  /**
   * The index's rows first, in one read; a payload without one is read from the log when it lies
   * after its partition's position (`queued`, or `processing` in a batch of this queue); one that a
   * commit moved past meanwhile (the position moved, the log let it go) has its row by then.
   */
  async getMany(ids: readonly string[]): Promise<Map<string, IntakeRecord>> {
    const wanted = ids.flatMap((queueId) => {
      const at = parseQueueId(queueId);
      return at ? [{ ...at, queueId }] : [];
    });
    const records = new Map<string, IntakeRecord>();
    const byPosition = new Map(wanted.map((at) => [`${at.partition}.${at.seq}`, at]));
    const take = (rows: readonly IndexedIntake[]) => {
      for (const row of rows) {
        const at = byPosition.get(`${row.partition}.${row.seq}`);
        if (at?.id === row.id) records.set(at.queueId, this.recordOfRow(row));
      }
    };
    take(await this.index.rows(wanted));
    const unindexed = wanted.filter((at) => !records.has(at.queueId));
    if (unindexed.length === 0) return records;
    const partitions = [...new Set(unindexed.map((at) => at.partition))];
    const positions = new Map(await Promise.all(partitions.map(async (partition) => [partition, await this.index.position(partition)] as const)));
    const uncommitted = unindexed.filter((at) => at.seq > positions.get(at.partition)!);
    const logged = await Promise.all(uncommitted.map((at) => this.log.at(at)));
    uncommitted.forEach((at, i) => {
      const entry = logged[i];
      if (entry?.id === at.id) records.set(at.queueId, { ...queuedRecord(entry), id: at.queueId, status: inOpenBatches(this.open, at.seq) ? 'processing' : 'queued' });
    });
    const committedSince = unindexed.filter((at) => !records.has(at.queueId));
    if (committedSince.length > 0) take(await this.index.rows(committedSince));
    return records;
  }

  async nextBatch(limit: number, now: number): Promise<IntakeBatch | null> {
    for (;;) {
      const batch = await this.openBatch(limit, now);
      if (!batch || batch.entries.length > 0) return batch;
      // Everything read was held back: park it, move the positions, and read on.
      await this.record(batch, new Map(), now);
    }
  }

  async commitBatch(batch: IntakeBatch, outcomes: ReadonlyMap<number, IntakeOutcome>, now: number): Promise<void> {
    const open = this.ownBatch(batch);
    this.open.delete(open);
    try {
      // A lease lost meanwhile (this process stalled past its time): another may hold the partition now.
      if (open.leases.some((lease) => !lease.held)) throw storeUnavailable('a partition lease of this batch was lost before its commit; the batch is read again', undefined, 1);
      await this.record(open, outcomes, now);
    } catch (error) {
      await this.letGo(open);
      throw error;
    }
  }

  async abandonBatch(batch: IntakeBatch): Promise<void> {
    const open = batch as PartitionedBatch;
    if (open.owner !== this) throw new Error('PartitionedIntakeQueue: not a batch of this queue');
    if (!this.open.delete(open)) return;
    await this.letGo(open);
  }

  async listFailed(limit: number): Promise<IntakeRecord[]> {
    return (await this.index.listFailed(limit)).map((row) => this.recordOfRow(row));
  }

  async requeue(id: string, at: number): Promise<boolean> {
    const position = parseQueueId(id);
    if (!position) return false;
    const row = await this.index.row(position.partition, position.seq);
    return row?.id === position.id && (await this.index.requeue(position.partition, position.seq, at));
  }

  async purgeProcessed(before: number, limit: number): Promise<number> {
    return this.index.purge(before, before - IDEMPOTENCY_WINDOW_MS, limit);
  }

  async depth(): Promise<number> {
    const [pending, retries] = await Promise.all([this.log.pending(), this.index.retries()]);
    return pending.reduce((sum, n) => sum + n, 0) + retries;
  }

  /** Ends the open batches (stop the worker first); the log and index are their opener's to close. */
  async close(): Promise<void> {
    for (const batch of [...this.open]) await this.abandonBatch(batch);
  }

  // --- appends --------------------------------------------------------------------------------

  private append(item: NewIntake): Promise<LogPosition> {
    return new Promise((resolve, reject) => this.turn.push({ item, resolve, reject }));
  }

  private async appendGroup(group: PendingEnqueue<LogPosition>[]): Promise<void> {
    let answers: Array<LogPosition | TrailwireError>;
    try {
      answers = await this.log.append(group.map((pending) => pending.item));
    } catch (error) {
      for (const pending of group) pending.reject(error);
      return;
    }
    group.forEach((pending, i) => {
      const answer = answers[i]!;
      if (isTrailwireError(answer)) pending.reject(answer);
      else pending.resolve(answer);
    });
  }

  /** The record a repeat of a key answers: its holder's, compared by the caller with the repeat. */
  private async holderRecord(partnerId: string, key: string, holder: KeyHolder): Promise<IntakeRecord> {
    let id = holder.id;
    if (id === null) id = await this.waitForKey(partnerId, key);
    const record = await this.get(id);
    // The VIN and body the key was first used with, which the index keeps after the log let them go.
    const base = { partnerId, product: holder.product, vin: holder.vin, payload: holder.payload, receivedAt: holder.receivedAt, idempotencyKey: key };
    return record ? { ...record, ...base, id } : { ...queuedRecord({ ...base, id }), status: 'processed', attempts: 1 };
  }

  /** The id of a key whose append is in flight (here or in another process), once it has one. */
  private async waitForKey(partnerId: string, key: string): Promise<string> {
    const local = this.inFlightKeys.get(`${partnerId}\n${key}`);
    const id = local ? await local : null;
    if (id !== null) return id;
    for (const deadline = this.clock.now() + this.keyWaitMs; this.clock.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, this.keyPollMs));
      const holder = await this.index.findKey(partnerId, key);
      if (holder?.id) return holder.id;
    }
    throw storeUnavailable('an earlier request with this Idempotency-Key is still being stored; retry with the same key shortly', undefined, 1);
  }

  // --- batches --------------------------------------------------------------------------------

  private async openBatch(limit: number, now: number): Promise<PartitionedBatch | null> {
    const [pending, dueParts] = await Promise.all([this.log.pending(), this.index.partitionsWithDueRetries(now)]);
    const start = this.nextPartition;
    this.nextPartition = (start + 1) % this.log.partitions;
    const candidates = Array.from({ length: this.log.partitions }, (_, i) => (start + i) % this.log.partitions).filter((p) => pending[p]! > 0 || dueParts.has(p));
    if (candidates.length === 0) return null;
    const batch: PartitionedBatch = { owner: this, entries: [], leases: [], plan: { take: [], heldBack: [], positions: new Map() } };
    const due: PartitionedEntry[] = [];
    const fresh: PartitionedEntry[] = [];
    const waiting = new Map<string, number>();
    try {
      for (const partition of candidates) {
        if (batch.leases.length >= this.maxPartitionsPerBatch) break;
        const lease = await this.log.lease(partition);
        if (lease) batch.leases.push(lease);
      }
      // The leased partitions are read side by side: each is a few round trips to the index and the log.
      await Promise.all(
        batch.leases.map(async ({ partition }) => {
          const state = await this.index.partitionState(partition, now, limit);
          for (const [vin, n] of state.waiting) waiting.set(waitingKey(partition, vin), n);
          for (const row of state.due) due.push(planned(row, row.attempts, true));
          for (const logged of await this.log.read(partition, state.position, limit)) fresh.push(planned(arrivedRow(logged), 0, false));
        }),
      );
    } catch (error) {
      await this.letGo(batch);
      throw error;
    }
    batch.plan = planBatch({ due, fresh, waiting }, limit);
    batch.entries = batch.plan.take.map((candidate) => candidate.entry);
    // Partitions that gave nothing to this batch go at once.
    const used = new Set([...batch.plan.take, ...batch.plan.heldBack].map((candidate) => candidate.partition));
    for (const lease of batch.leases.filter((held) => !used.has(held.partition))) await lease.release();
    batch.leases.splice(0, batch.leases.length, ...batch.leases.filter((held) => used.has(held.partition)));
    if (batch.leases.length === 0) return null;
    this.open.add(batch);
    return batch;
  }

  /** Writes the batch's rows and positions (one index transaction), then lets the log go of what they cover, then the leases. */
  private async record(batch: PartitionedBatch, outcomes: ReadonlyMap<number, IntakeOutcome>, now: number): Promise<void> {
    this.open.delete(batch);
    const from = new Map([...batch.plan.take, ...batch.plan.heldBack].map((candidate) => [candidate.seq, candidate.from]));
    // The index keeps a row per payload a batch has been through: the log lets processed ones go.
    const rows = settleBatch(batch.plan, outcomes, now, { recordProcessed: true }).map((write): IndexedIntake => {
      const base = from.get(write.seq)!;
      return {
        ...base,
        payload: write.state === 'done' ? null : base.payload,
        state: write.state,
        attempts: write.attempts,
        nextAttemptAt: write.nextAttemptAt ?? base.nextAttemptAt,
        error: write.error,
        processedAt: write.processedAt,
      };
    });
    try {
      await this.index.commit(rows, batch.plan.positions);
      // The log's retention follows; a failure here only keeps more in the log until the next commit.
      await Promise.all([...batch.plan.positions].map(([partition, seq]) => this.log.commit(partition, seq, now).catch(() => {})));
    } finally {
      await this.letGo(batch);
    }
  }

  private async letGo(batch: PartitionedBatch): Promise<void> {
    this.open.delete(batch);
    await Promise.all(batch.leases.map((lease) => lease.release().catch(() => {})));
  }

  private ownBatch(batch: IntakeBatch): PartitionedBatch {
    const open = batch as PartitionedBatch;
    if (open.owner !== this || !this.open.has(open)) throw new Error('PartitionedIntakeQueue: not a batch open on this queue');
    return open;
  }

  private recordOfRow(row: IndexedIntake): IntakeRecord {
    const base = {
      ...payloadOfRow(row),
      idempotencyKey: row.idempotencyKey,
      attempts: row.attempts,
      nextAttemptAt: row.nextAttemptAt,
      error: row.error,
    };
    if (row.state === 'retry') return { ...base, status: inOpenBatches(this.open, row.seq) ? 'processing' : 'queued', processedAt: null };
    if (row.state === 'failed') return { ...base, status: 'failed', processedAt: row.processedAt };
    return { ...base, status: 'processed', processedAt: row.processedAt, error: null };
  }
}

/** A payload read from the log, as the index's row of it would begin: waiting, never attempted. */
function arrivedRow(logged: LoggedIntake): IndexedIntake {
  return { ...logged, state: 'retry', attempts: 0, nextAttemptAt: logged.receivedAt, error: null, processedAt: null };
}

/** An index row (a retry, or a log payload as its row would begin) as the batch plan sees it. */
function planned(row: IndexedIntake, attempts: number, parked: boolean): PartitionedEntry {
  return {
    partition: row.partition,
    seq: row.seq,
    vin: row.vin,
    parked,
    from: row,
    entry: { ...payloadOfRow(row), seq: row.seq, attempts },
  };
}

/** The payload of an index row under its queue id (its text is empty once the row is done and the log let it go). */
function payloadOfRow(row: IndexedIntake) {
  return { id: queueIdOf(row), partnerId: row.partnerId, product: row.product, vin: row.vin, payload: row.payload ?? '', receivedAt: row.receivedAt };
}
