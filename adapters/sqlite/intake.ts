/**
 * The SQLite intake, behind one front door: `openSqliteIntake` opens the durable intake of a store's
 * file and answers what a server needs of it — the queue the core takes intake into, how to start
 * and stop its processing, its counts and its readiness checks. What is behind the door:
 *
 * - with a processing thread (the default for a file): the intake journal, the queue of the HTTP
 *   thread that journals each turn's group and answers (`ThreadedIntakeQueue`, below), and the thread
 *   that appends the groups to the log and processes it (`intake-thread.ts`);
 * - without one (an in-memory database, product objects that cannot cross threads, an injected
 *   clock): the log on the store's own connection (`intake-queue.ts`), processed by the core's
 *   `IntakeWorker` on the event loop (its queue offers the process role: `ProcessableIntakeQueue`).
 *
 * Either way, what a previous server acknowledged and had not appended to the log when it ended is
 * appended from its journal before any new intake (`replayIntoLog`). The path's states and what a
 * client gets in each are in docs/intake-path.md.
 */
import { isTrailwireError, storeUnavailable, TrailwireError } from '../../core/errors.ts';
import {
  type EnqueueResult,
  type IntakeBackend,
  type IntakeQueue,
  type IntakeRecord,
  type NewIntake,
  type PendingEnqueue,
  queuedRecord,
} from '../../core/intake-queue.ts';
import type { IntakeWorkerOptions } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import { type FaultLogEntry, RepeatingFaultLog } from '../../core/repeating-fault-log.ts';
import { TurnBatcher } from '../../core/turn-batcher.ts';
import { encodeIntakeGroup, IntakeJournal, type JournalFileCalls, type JournalGroup, replayIntoLog } from './intake-journal.ts';
import { type AppendOutcome, answerEnqueue, openSqliteIntakeQueue, type SqliteIntakeQueue } from './intake-queue.ts';
import { IntakeThread } from './intake-thread.ts';
import type { SqliteStore } from './sqlite-store.ts';
import { STORAGE_FAULT_RETRY_AFTER_SECONDS } from './storage-faults.ts';
import { threadWebhookDeliveryStore } from './webhook-delivery-calls.ts';

/** A line the intake has to say, at its level. */
export type SqliteIntakeLog = (entry: FaultLogEntry | { level: 'info'; message: string; [field: string]: unknown }) => void;

export interface SqliteIntakeOptions {
  /** The store whose file holds the intake log; its connection serves status reads. Required. */
  store: SqliteStore;
  /**
   * Process in a worker thread with its own connection (the file's one intake writer) and answer
   * 202s from the intake journal. Default true; it is off for an in-memory database.
   */
  thread?: boolean;
  /**
   * Whether this process processes intake at all. Default true; false makes a process that only
   * takes intake while another, sharing the file, processes it (no thread, no journal of its own).
   */
  process?: boolean;
  /** Product modules the thread loads besides the built-in products (`loadProductModule` specifiers). Default: none. */
  productModules?: readonly string[];
  /** The thread's worker tuning (batch size, retries, retention). Default: the thread's defaults. */
  worker?: IntakeWorkerOptions;
  /**
   * Pass the core's `partnerIntake.requireGrants`: the thread's worker checks partner grants again as
   * of processing, by the accept path's rule (`core/grants-at-processing.ts`). Default false.
   */
  requireGrants?: boolean;
  /** Receives the live updates of each processing round, in order. */
  onEvents?: (events: LiveTrailerEvent[]) => void;
  /** Told after each round of the processing thread how many payloads it processed and dead-lettered. Default: nobody. */
  onRound?: (counts: { processed: number; failed: number }) => void;
  /** Where the intake says what happens to it (faults once, then once per interval). Default: nowhere. */
  log?: SqliteIntakeLog;
  /** The journal's file calls (tests inject a failing disk's). Default: Node's. */
  journalFileCalls?: Partial<JournalFileCalls>;
}

/** An opened SQLite intake (its processing is a thread, when it has one). */
export interface SqliteIntake extends IntakeBackend {
  /** Ends the processing thread as a crash would (it is restarted): for fault drills and tests. */
  killThread(): Promise<void>;
}

/** Opens the intake of an SQLite store's file (see the top). */
export function openSqliteIntake(options: SqliteIntakeOptions): SqliteIntake {
  const { store } = options;
  const log: SqliteIntakeLog = options.log ?? (() => {});
  const local = openSqliteIntakeQueue(store.db);
  const inMemory = store.file === ':memory:';
  const processes = options.process ?? true;
  const threaded = processes && (options.thread ?? true) && !inMemory;
  const journal = inMemory ? undefined : takeJournal(store, local, log, threaded, options.journalFileCalls);
  if (!threaded || !journal) return inlineIntake(local);

  const faults = new RepeatingFaultLog({ write: log });
  const queue = new ThreadedIntakeQueue(local, { journal, faults });
  let thread: IntakeThread | undefined;
  return {
    queue,
    readinessChecks: queue.readinessChecks,
    // The thread owns the file's writes: the webhook deliverer's run there too (`webhook-delivery-calls.ts`).
    webhookDeliveryStore: threadWebhookDeliveryStore(
      (call) => thread?.callWebhooks(call) ?? Promise.reject(new TrailwireError('unavailable', 'The intake thread has not started; try again shortly.')),
    ),
    async start() {
      thread = await IntakeThread.start({
        file: store.file,
        durability: store.durability,
        productModules: options.productModules,
        worker: options.worker,
        requireGrants: options.requireGrants,
        onEvents: (events) => options.onEvents?.(events),
        onRound: options.onRound,
        onLog: log,
        onReady: (started) => queue.attach(started),
        onStoreFault: (fault) => queue.storeFaultChanged(fault),
        onFault: (key, entry) => faults.failed(key, entry),
      });
    },
    async stop() {
      await thread?.stop();
      journal.close();
    },
    async killThread() {
      await thread?.kill();
    },
  };
}

/** The log on the store's connection, processed by the core's worker (or by another process). */
function inlineIntake(queue: IntakeQueue): SqliteIntake {
  return {
    queue,
    readinessChecks: {},
    async start() {},
    async stop() {},
    async killThread() {},
  };
}

/**
 * Appends to the log what a previous server acknowledged and had not appended when it ended, and
 * answers the journal when this intake writes to it (it has a processing thread): it then holds the
 * journal, and a second such server on the file is refused. An intake without a thread reads back a
 * journal nobody holds, and leaves a held one to its server.
 */
function takeJournal(
  store: SqliteStore,
  log: Parameters<typeof replayIntoLog>[1],
  say: SqliteIntakeLog,
  writes: boolean,
  fileCalls: Partial<JournalFileCalls> | undefined,
): IntakeJournal | undefined {
  let journal: IntakeJournal;
  try {
    journal = IntakeJournal.open(store.file, { durability: store.durability, fileCalls });
  } catch (error) {
    if (!writes && isTrailwireError(error) && error.code === 'conflict') return undefined;
    throw error;
  }
  try {
    const { read } = replayIntoLog(journal, log);
    if (read > 0) say({ level: 'info', message: `intake journal: ${read} acknowledged payloads read back; the intake log holds each of them now`, payloads: read });
  } catch (error) {
    journal.close();
    throw error;
  }
  if (writes) return journal;
  journal.close();
  return undefined;
}

/** Payloads answered from the journal and not confirmed by the thread, at most; past it, intake is refused until the thread catches up. */
export const MAX_STAGED_PAYLOADS = 20_000;

/** How long a payload that waits for the thread's answer (one with an Idempotency-Key) waits before its 503. */
export const CONFIRM_TIMEOUT_MS = 5000;

/** A group in the journal, not yet confirmed by the thread. */
interface JournaledGroup {
  readonly entries: PendingEnqueue[];
  readonly bytes: Buffer;
  readonly journalGroup: JournalGroup;
  /** Sent to a thread that may have appended it before it ended: the next one skips what the log holds. */
  resent: boolean;
}

interface ThreadedIntakeQueueOptions {
  /** Where a turn's group is made durable before its 202s. */
  journal: IntakeJournal;
  /** Where faults are said, once and then once per interval. */
  faults: RepeatingFaultLog;
}

/**
 * The intake queue of a server with a processing thread, as its HTTP thread sees it. Each
 * event-loop turn's accepted payloads are written to the intake journal as one record (durable:
 * in `power` durability synced) and answered at once; the group then goes to the thread — the
 * file's one intake writer — which appends it to the intake log and confirms it, and only then may
 * the journal let the record go. A payload's status comes from one place at a time: the journal's
 * group until the thread confirms it (`queued`), then the log (`docs/intake-path.md` has the table).
 *
 * A payload with an `Idempotency-Key` waits for the thread's answer, since only the log can say
 * atomically whether its key was used before; it travels in the same ordered group as the others,
 * so a VIN's payloads reach the log in arrival order. If the answer does not come within
 * `CONFIRM_TIMEOUT_MS` (the thread is restarting, the disk is full) it gets 503: the payload is in
 * the journal and will be appended, so a retry with the same key answers the original 202.
 *
 * Refusals, each a 503 `store_unavailable` with Retry-After and nothing stored (contract 6): the
 * journal cannot be written (full or failing disk), or was not synced (until a restart); the store
 * refuses the thread's writes (until a write succeeds — the thread keeps trying what it holds); more
 * than `MAX_STAGED_PAYLOADS` payloads wait for the thread. A thread that dies is started again, and
 * the groups it had not confirmed are sent to the new one, in order; payloads accepted meanwhile
 * wait in the journal. `readinessChecks` names each of these states for `/readyz`.
 */
class ThreadedIntakeQueue implements IntakeQueue {
  private readonly turn = new TurnBatcher<PendingEnqueue>((entries) => this.journalGroup(entries));
  private thread: IntakeThread | undefined;
  /**
   * Journaled groups in the order they were written, until the thread confirms each: their payloads'
   * status is `queued`. Found by a scan (`get`), not by an index of ids: a table with an insert and a
   * delete per payload made V8 promote each payload's objects (see `connection-limits.ts`), and a
   * status read of a payload not yet in the log is rare.
   */
  private readonly unconfirmed: JournaledGroup[] = [];
  /** Payloads of `unconfirmed`. */
  private stagedCount = 0;
  /** The store refuses the thread's writes: intake is refused until the thread writes again. */
  private storeFault: TrailwireError | undefined;

  /**
   * @param local the queue on the main thread's connection: status reads, idempotency lookups, dead letters
   * @param options the intake journal and the fault log
   */
  constructor(
    private readonly local: SqliteIntakeQueue,
    private readonly options: ThreadedIntakeQueueOptions,
  ) {}

  /** Sends groups to this thread from now on, beginning with those it (or a thread before it) has not confirmed. */
  attach(thread: IntakeThread): void {
    this.thread = thread;
    for (const group of this.unconfirmed) {
      group.resent = true;
      this.send(group);
    }
  }

  /**
   * What the thread says of the store at each refused write (the reason) and at the first write
   * after them (null): intake is refused meanwhile, and the fault log says it once, then once per interval.
   */
  storeFaultChanged(fault: string | null): void {
    if (fault === null) {
      this.storeFault = undefined;
      this.options.faults.recovered('store', 'the store writes again; intake and processing resume');
      return;
    }
    this.storeFault = storeUnavailable(`the intake log cannot be written: ${fault}`, undefined, STORAGE_FAULT_RETRY_AFTER_SECONDS);
    this.options.faults.failed('store', { level: 'error', message: `the store refuses writes: ${fault}; intake is refused and processing waits until it writes again` });
  }

  enqueue(item: NewIntake): Promise<EnqueueResult> {
    const refusal = this.storeFault ?? this.backlogRefusal();
    if (refusal) return Promise.reject(refusal);
    return new Promise((resolve, reject) => this.turn.push({ item, resolve, reject }));
  }

  /**
   * `/readyz`'s checks of this path, each throwing while its part cannot take intake: the thread
   * runs; the journal takes writes (probing the disk again while it did not); the store takes the
   * thread's writes; the backlog has room.
   */
  readonly readinessChecks: Record<string, () => Promise<void>> = {
    'intake-thread': async () => {
      if (!this.thread?.isRunning) throw new Error('the intake processing thread is not running (restarting)');
    },
    'intake-journal': async () => this.options.journal.probe(),
    'intake-log': async () => {
      if (this.storeFault) throw this.storeFault;
    },
    'intake-backlog': async () => {
      const refusal = this.backlogRefusal();
      if (refusal) throw refusal;
    },
  };

  private backlogRefusal(): TrailwireError | undefined {
    if (this.stagedCount < MAX_STAGED_PAYLOADS) return undefined;
    return storeUnavailable(`${this.stagedCount} accepted payloads wait for the intake log; try again shortly`, undefined, 1);
  }

  /** One journal record for every enqueue of this turn; its payloads without a key are answered as soon as it is durable. */
  private journalGroup(entries: PendingEnqueue[]): void {
    const items = entries.map((entry) => entry.item);
    // Encoded once: the journal writes these bytes and the thread receives them.
    const bytes = encodeIntakeGroup(items);
    let journalGroup: JournalGroup;
    try {
      journalGroup = this.options.journal.append(bytes);
    } catch (error) {
      this.logFault('intake-journal', error);
      for (const entry of entries) entry.reject(error);
      return;
    }
    this.options.faults.recovered('intake-journal', 'the intake journal takes writes again');
    const group: JournaledGroup = { entries, bytes, journalGroup, resent: false };
    for (const entry of entries) {
      if (entry.item.idempotencyKey === null) entry.resolve({ record: queuedRecord(entry.item), created: true });
      else this.refuseIfNotConfirmedInTime(entry);
    }
    this.unconfirmed.push(group);
    this.stagedCount += entries.length;
    if (this.thread?.isRunning) this.send(group);
  }

  private send(group: JournaledGroup): void {
    this.thread!.append(group.bytes, group.resent).then(
      (outcomes) => this.confirm(group, outcomes),
      // The thread ended before it answered: the restarted one gets the group again (`attach`).
      () => {},
    );
  }

  /** The thread appended the group: answers what waited, unstages, lets the journal record go. */
  private confirm(group: JournaledGroup, outcomes: AppendOutcome[]): void {
    const at = this.unconfirmed.indexOf(group);
    if (at === -1) return;
    this.unconfirmed.splice(at, 1);
    this.stagedCount -= group.entries.length;
    let refused = 0;
    group.entries.forEach((entry, i) => {
      if (outcomes[i]!.kind === 'refused') refused++;
      answerEnqueue(entry, outcomes[i]!);
    });
    // A refusal here is no storage fault (the thread holds those and tries again) but a bug: the
    // record stays in the journal, so that the next start appends what was answered 202.
    if (refused === 0) this.options.journal.confirm(group.journalGroup);
    else
      this.options.faults.failed('intake-refused', {
        level: 'error',
        message: `${refused} accepted payloads could not be appended to the intake log; the intake journal keeps them for the next start`,
      });
  }

  private refuseIfNotConfirmedInTime(entry: PendingEnqueue): void {
    const timer = setTimeout(
      () =>
        entry.reject(
          storeUnavailable(
            'the payload is journaled but the intake log did not confirm it in time; retry with the same Idempotency-Key to get its status',
            undefined,
            STORAGE_FAULT_RETRY_AFTER_SECONDS,
          ),
        ),
      CONFIRM_TIMEOUT_MS,
    );
    const { resolve, reject } = entry;
    entry.resolve = (result) => (clearTimeout(timer), resolve(result));
    entry.reject = (error) => (clearTimeout(timer), reject(error));
  }

  private logFault(key: string, error: unknown): void {
    const entry: FaultLogEntry = { level: 'error', message: error instanceof Error ? error.message : String(error) };
    this.options.faults.failed(key, entry);
  }

  findByIdempotencyKey(partnerId: string, idempotencyKey: string, since: number): Promise<IntakeRecord | null> {
    return this.local.findByIdempotencyKey(partnerId, idempotencyKey, since);
  }

  async get(id: string): Promise<IntakeRecord | null> {
    return (await this.getMany([id])).get(id) ?? null;
  }

  /** A payload the thread has not confirmed yet is `queued` (from its journaled group), the others are the log's. */
  async getMany(ids: readonly string[]): Promise<Map<string, IntakeRecord>> {
    const staged = new Map<string, IntakeRecord>();
    if (this.stagedCount > 0) {
      const wanted = new Set(ids);
      for (const group of this.unconfirmed) for (const entry of group.entries) if (wanted.has(entry.item.id)) staged.set(entry.item.id, queuedRecord(entry.item));
    }
    const records = await this.local.getMany(staged.size === 0 ? ids : ids.filter((id) => !staged.has(id)));
    for (const [id, record] of staged) records.set(id, record);
    return records;
  }

  listFailed(limit: number): Promise<IntakeRecord[]> {
    return this.local.listFailed(limit);
  }

  async requeue(id: string, at: number): Promise<boolean> {
    const requeued = await this.local.requeue(id, at);
    if (requeued) this.thread?.notify();
    return requeued;
  }

  /**
   * Queued payloads: the log's, counted by the thread once it has appended every group sent before
   * the question, and the staged ones, which at its answer are exactly those not in that count.
   */
  async depth(): Promise<number> {
    const counted = this.thread?.isRunning ? await this.thread.depth().catch(() => undefined) : undefined;
    return (counted ?? (await this.local.depth())) + this.stagedCount;
  }
}
