/**
 * The intake queue as the main thread of a server with a processing thread sees it: enqueues go to
 * the thread — the file's one intake writer — in one message per event-loop turn; everything else
 * (status reads, idempotency lookups, dead letters, depth) reads the file through the main thread's
 * own connection, which WAL lets run beside the thread's writes.
 *
 * With an intake journal (`intake-journal.ts`, what a server uses), a turn's group is first written
 * to the journal, and its payloads are answered at once: durable in the journal, they need not wait
 * for the thread, which appends them to the log between its batches. Until the thread confirms the
 * group they are *staged*: the status endpoint finds them here (`queued`), and `depth` counts them.
 * A payload with an `Idempotency-Key` still waits for the thread's answer, since only the log can say
 * atomically whether its key was used before; it travels in the same ordered group as the others, so
 * a VIN's payloads reach the log in arrival order. Past `MAX_STAGED_PAYLOADS` unconfirmed payloads
 * (a thread that cannot keep up), new payloads wait for the thread too, which bounds the memory.
 *
 * While the thread is not running (starting again after a failure, or stopped), enqueues are written
 * on the main connection instead, so intake is never refused for it; the groups it had not confirmed
 * when it ended are written there first, in order, skipping what it had already appended.
 */
import {
  type EnqueueResult,
  type IntakeBatch,
  type IntakeOutcome,
  type IntakeQueue,
  type IntakeRecord,
  type NewIntake,
  queuedRecord,
} from '../../core/intake-queue.ts';
import { encodeIntakeGroup } from './intake-group-codec.ts';
import type { IntakeJournal, JournalGroup } from './intake-journal.ts';
import type { IntakeThread, ThreadEnqueueOutcome } from './intake-thread.ts';
import type { EnqueueOutcome, SqliteIntakeQueue } from './intake-queue.ts';

/** Staged payloads answered before the thread confirms them, at most; past it, a 202 waits for the thread. */
export const MAX_STAGED_PAYLOADS = 20_000;

interface PendingEnqueue {
  item: NewIntake;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

/** What the thread's answer to a group settles: the entries still waiting, and the journal record to drop. */
interface SentGroup {
  entries: PendingEnqueue[];
  /** Per entry: already answered (staged in the journal), so the thread's answer only confirms it. */
  answered: boolean[] | null;
  journalGroup: JournalGroup | null;
}

export interface ThreadedIntakeQueueOptions {
  /** Where a group is made durable before its 202s; without one, every 202 waits for the thread's commit. */
  journal?: IntakeJournal;
  /** Told when payloads the journal acknowledged could not be appended to the log (they stay in the journal). */
  onLog?: (entry: { level: 'error'; message: string; [field: string]: unknown }) => void;
}

export class ThreadedIntakeQueue implements IntakeQueue {
  private pending: PendingEnqueue[] = [];
  private sendScheduled = false;
  private thread: IntakeThread | undefined;
  /** Payloads in the journal that the thread has not confirmed, by id. */
  private readonly staged = new Map<string, NewIntake>();

  /**
   * @param local the queue on the main thread's connection: reads, and writes while the thread is down
   * @param options the intake journal
   */
  constructor(
    private readonly local: SqliteIntakeQueue,
    private readonly options: ThreadedIntakeQueueOptions = {},
  ) {}

  /** Sends enqueues to this thread from now on. */
  attach(thread: IntakeThread): void {
    this.thread = thread;
  }

  enqueue(item: NewIntake): Promise<EnqueueResult> {
    const thread = this.thread;
    if (!thread?.isRunning) return this.local.enqueue(item);
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (this.sendScheduled) return;
      this.sendScheduled = true;
      setImmediate(() => this.send());
    });
  }

  /** One message (and so one commit, and one journal write) for every enqueue of this turn. */
  private send(): void {
    this.sendScheduled = false;
    const entries = this.pending;
    this.pending = [];
    const thread = this.thread;
    if (!thread?.isRunning) {
      for (const entry of entries) this.local.enqueue(entry.item).then(entry.resolve, entry.reject);
      return;
    }
    const items = entries.map((entry) => entry.item);
    // Encoded once: the journal writes these bytes and the thread receives them.
    const group = encodeIntakeGroup(items);
    const sent: SentGroup = { entries, answered: null, journalGroup: this.stage(entries, group) };
    if (sent.journalGroup) sent.answered = this.answerStaged(entries);
    thread.enqueue(group).then(
      (outcomes) => this.settle(sent, outcomes === null ? null : outcomes.map((outcome, i) => fromThreadOutcome(outcome, items[i]!))),
      // The thread ended before it answered: what it had not appended is written here, in order, before any later group.
      (error: unknown) => (sent.journalGroup ? this.settle(sent, this.local.enqueueNow(items, { skipExisting: true })) : rejectAll(entries, error)),
    );
  }

  /** Writes the group to the journal, when there is one and it takes the group; answers the record to confirm later. */
  private stage(entries: PendingEnqueue[], group: Buffer): JournalGroup | null {
    const journal = this.options.journal;
    if (!journal) return null;
    let journalGroup: JournalGroup;
    try {
      journalGroup = journal.append(group);
    } catch (error) {
      // The journal cannot take it (a full disk): the group waits for the thread's commit instead.
      this.options.onLog?.({ level: 'error', message: 'the intake journal could not be written; 202s wait for the intake log', err: error });
      return null;
    }
    for (const { item } of entries) this.staged.set(item.id, item);
    return journalGroup;
  }

  /** Answers the staged payloads that need not wait for the thread, once the journal has them durably. */
  private answerStaged(entries: PendingEnqueue[]): boolean[] {
    const mayAnswer = this.staged.size <= MAX_STAGED_PAYLOADS;
    const answered = entries.map(({ item }) => mayAnswer && item.idempotencyKey === null);
    if (!answered.includes(true)) return answered;
    this.options.journal!.whenDurable().then(
      () => entries.forEach((entry, i) => answered[i] && entry.resolve({ record: queuedRecord(entry.item), created: true })),
      (error: unknown) => entries.forEach((entry, i) => answered[i] && entry.reject(error)),
    );
    return answered;
  }

  /** The group's outcomes (null: every item stored): answers what waited, unstages, and drops the journal record. */
  private settle(sent: SentGroup, outcomes: EnqueueOutcome[] | null): void {
    let notStored = 0;
    sent.entries.forEach((entry, i) => {
      // No outcome: stored (the usual answer, which allocates nothing for a payload already answered).
      const outcome = outcomes?.[i];
      const stored = outcome === undefined || !('error' in outcome);
      if (stored) this.staged.delete(entry.item.id);
      else notStored++;
      if (sent.answered?.[i]) return;
      if (outcome === undefined) entry.resolve({ record: queuedRecord(entry.item), created: true });
      else if ('error' in outcome) entry.reject(new Error(`the intake thread could not store the payload: ${String(outcome.error)}`));
      else entry.resolve(outcome.result);
    });
    if (!sent.journalGroup) return;
    // A payload acknowledged from the journal and not stored stays there (and staged): the next start appends it.
    if (notStored === 0) this.options.journal!.confirm(sent.journalGroup);
    else this.options.onLog?.({ level: 'error', message: `${notStored} acknowledged payloads could not be appended to the intake log; the intake journal keeps them for the next start` });
  }

  findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    return this.local.findByIdempotencyKey(partnerId, idempotencyKey, since);
  }

  get(id: string): Promise<IntakeRecord | null> {
    const staged = this.staged.get(id);
    return staged ? Promise.resolve(queuedRecord(staged)) : this.local.get(id);
  }

  // Batches on the main connection: only for a caller that processes here while the thread does not.
  nextBatch(limit: number, now: number): Promise<IntakeBatch | null> {
    return this.local.nextBatch(limit, now);
  }

  commitBatch(batch: IntakeBatch, outcomes: ReadonlyMap<number, IntakeOutcome>, now: number): Promise<void> {
    return this.local.commitBatch(batch, outcomes, now);
  }

  abandonBatch(batch: IntakeBatch): Promise<void> {
    return this.local.abandonBatch(batch);
  }

  listFailed(limit: number): Promise<IntakeRecord[]> {
    return this.local.listFailed(limit);
  }

  requeue(id: string, at: number): Promise<boolean> {
    return this.local.requeue(id, at);
  }

  purgeProcessed(before: number, limit: number): Promise<number> {
    return this.local.purgeProcessed(before, limit);
  }

  /** Staged payloads count too (one the thread has just appended may count twice, until its confirmation arrives). */
  async depth(): Promise<number> {
    return (await this.local.depth()) + this.staged.size;
  }
}

/** A stored item is answered in one flag: its record is built from the item (see `ThreadEnqueueOutcome`). */
function fromThreadOutcome(outcome: ThreadEnqueueOutcome, item: NewIntake): EnqueueOutcome {
  if ('error' in outcome) return { error: outcome.error };
  return { result: outcome.created ? { record: queuedRecord(item), created: true } : { record: outcome.record, created: false } };
}

function rejectAll(entries: PendingEnqueue[], error: unknown): void {
  for (const entry of entries) entry.reject(error);
}
