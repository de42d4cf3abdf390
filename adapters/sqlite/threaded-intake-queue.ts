/**
 * The intake queue as the main thread of a server with a processing thread sees it: enqueues go to
 * the thread — the file's one intake writer — in one message per event-loop turn, and resolve once
 * the thread has committed them; everything else (status reads, idempotency lookups, dead letters,
 * depth) reads the file through the main thread's own connection, which WAL lets run beside the
 * thread's writes. While the thread is not running (starting again after a failure, or stopped),
 * enqueues are written on the main connection instead, so intake is never refused for it.
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
import type { IntakeThread, ThreadEnqueueOutcome } from './intake-thread.ts';
import type { SqliteIntakeQueue } from './intake-queue.ts';

const STORED: ThreadEnqueueOutcome = { created: true };

interface PendingEnqueue {
  item: NewIntake;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

export class ThreadedIntakeQueue implements IntakeQueue {
  private pending: PendingEnqueue[] = [];
  private sendScheduled = false;

  /**
   * @param local the queue on the main thread's connection: reads, and writes while the thread is down
   * @param thread the processing thread (may be attached after construction, once started)
   */
  constructor(
    private readonly local: SqliteIntakeQueue,
    private thread?: IntakeThread,
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

  /** One message (and so one commit) for every enqueue of this turn. */
  private send(): void {
    this.sendScheduled = false;
    const group = this.pending;
    this.pending = [];
    const thread = this.thread;
    if (!thread?.isRunning) {
      for (const entry of group) this.local.enqueue(entry.item).then(entry.resolve, entry.reject);
      return;
    }
    thread.enqueue(group.map((entry) => entry.item)).then(
      (outcomes) =>
        group.forEach((entry, i) => {
          const outcome = outcomes === null ? STORED : outcomes[i]!;
          if ('error' in outcome) entry.reject(new Error(`the intake thread could not store the payload: ${outcome.error}`));
          else entry.resolve(outcome.created ? { record: queuedRecord(entry.item), created: true } : { record: outcome.record, created: false });
        }),
      (error: unknown) => group.forEach((entry) => entry.reject(error)),
    );
  }

  findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    return this.local.findByIdempotencyKey(partnerId, idempotencyKey, since);
  }

  get(id: string): Promise<IntakeRecord | null> {
    return this.local.get(id);
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

  depth(): Promise<number> {
    return this.local.depth();
  }
}
