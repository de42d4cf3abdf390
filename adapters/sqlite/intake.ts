/**
 * The SQLite intake, behind one front door: `openSqliteIntake` opens the durable intake of a store's
 * file and answers what a server needs of it — the queue the core takes intake into, how to start
 * and stop its processing, and its readiness checks.
 *
 * Each event-loop turn's payloads are appended to the intake log in one commit before their 202s
 * (`intake-queue.ts`, on the store's connection). The log is a file of its own beside the store's,
 * so that its appends and processing's batches never wait for each other's write lock. Processing:
 *
 * - in a worker thread (the default for a file): its own connection, the core's `IntakeWorker`, each
 *   batch one transaction of the store's file (`intake-thread.ts`); the event loop that serves
 *   requests only appends, and wakes the thread after each commit (and each requeue). The queue
 *   says so (`processedBy: 'backend'`), and the core runs no worker of its own;
 * - on the event loop (an in-memory database, product objects that cannot cross threads, an injected
 *   clock): the core's worker processes the queue, which offers every role (`ProcessableIntakeQueue`).
 *
 * A write the log's file refuses (a full or failing disk) refuses its turn's payloads with 503
 * `store_unavailable`; `/readyz` says `intake-log` is not ready until a write succeeds again — each
 * call while it is not probes with a small write, so the check recovers by itself once the operator
 * frees space, with or without intake. A store the thread cannot write makes `intake-processing` not
 * ready until a batch commits again; payloads wait in the log meanwhile. Faults are logged once, then
 * once per interval. The path's states and what a client gets in each are in docs/intake-path.md.
 *
 * What an earlier version's intake journal still holds is read back into the log at the first start
 * (`journal-read-back.ts`).
 */
import type Database from 'better-sqlite3';
import { TrailwireError } from '../../core/errors.ts';
import type { IntakeBackend } from '../../core/intake-queue.ts';
import type { IntakeWorkerOptions } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import { type FaultLogEntry, RepeatingFaultLog } from '../../core/repeating-fault-log.ts';
import { openSqliteIntakeQueue, type SqliteIntakeQueue } from './intake-queue.ts';
import { IntakeThread } from './intake-thread.ts';
import { readBackJournal, takeServerLock } from './journal-read-back.ts';
import type { SqliteStore } from './sqlite-store.ts';
import { threadWebhookDeliveryStore } from './webhook-delivery-calls.ts';

/** A line the intake has to say, at its level. */
export type SqliteIntakeLog = (entry: FaultLogEntry | { level: 'info'; message: string; [field: string]: unknown }) => void;

export interface SqliteIntakeOptions {
  /** The store whose file the intake log sits beside; the log is written on its connection. Required. */
  store: SqliteStore;
  /** Process in a worker thread with its own connection. Default true; it is off for an in-memory database. */
  thread?: boolean;
  /**
   * Whether this process processes intake at all (its server holds the file's server lock and reads
   * back an earlier version's journal). Default true; false for a process that only takes intake or
   * operates the queue (a CLI command) beside the server that processes it.
   */
  process?: boolean;
  /** Product modules the thread loads besides the built-in products (`loadProductModule` specifiers). Default: none. */
  productModules?: readonly string[];
  /** The thread's worker tuning (batch size, retries, retention). Default: the thread's defaults. */
  worker?: IntakeWorkerOptions;
  /**
   * Pass the core's `partnerIntake.requireGrants`: the thread's worker checks partner grants again as
   * of processing, by the accept path's rule (`refusedByGrants` in `core/partner-intake-rules.ts`).
   * Default false.
   */
  requireGrants?: boolean;
  /** Receives the live updates of each processing round of the thread, in order. */
  onEvents?: (events: LiveTrailerEvent[]) => void;
  /** Told after each round of the processing thread how many payloads it processed and dead-lettered. Default: nobody. */
  onRound?: (counts: { processed: number; failed: number }) => void;
  /** Where the intake says what happens to it (faults once, then once per interval). Default: nowhere. */
  log?: SqliteIntakeLog;
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
  // The fault log keeps each fault's latest failure (`failure`) for the readiness checks as well.
  const faults = new RepeatingFaultLog({ write: log });
  const inMemory = store.file === ':memory:';
  const processes = options.process ?? true;
  const threaded = processes && !inMemory && options.thread !== false;
  let thread: IntakeThread | undefined;
  const queue = openSqliteIntakeQueue(store.db, {
    processedBy: threaded ? 'backend' : 'core',
    // Wakes the thread after each commit. Without a thread the core's worker processes, woken by the
    // core's intake service after the same commit: nothing to wire here.
    onEnqueued: threaded ? () => thread?.notify() : undefined,
    onWrite: (fault) =>
      fault === null
        ? faults.recovered('intake-log', 'the intake log takes writes again; intake resumes')
        : faults.failed('intake-log', { level: 'error', message: `the intake log refuses writes: ${fault}; intake is refused until it takes them again` }),
  });
  const lock = processes && !inMemory ? openServerFile(store.file, queue, log) : undefined;
  const logCheck = {
    'intake-log': async () => {
      if (faults.failure('intake-log')) await queue.probeWrite();
    },
  };
  if (!threaded)
    return { queue, readinessChecks: logCheck, async start() {}, async stop() { lock?.close(); }, async killThread() {} };

  return {
    queue,
    readinessChecks: {
      ...logCheck,
      'intake-thread': async () => {
        if (!thread?.isRunning) throw new Error('the intake processing thread is not running (restarting)');
      },
      'intake-processing': async () => {
        const failure = faults.failure('store');
        if (failure) throw new TrailwireError('store_unavailable', failure.message);
      },
    },
    // The thread is the store file's intake writer: the webhook deliverer's writes run there too (`webhook-delivery-calls.ts`).
    webhookDeliveryStore: threadWebhookDeliveryStore(
      (call) => thread?.callWebhooks(call) ?? Promise.reject(new TrailwireError('unavailable', 'The intake thread has not started; try again shortly.')),
    ),
    async start() {
      // Checkpoints are the thread's, between its batches (`intake-thread-worker.ts`), for the log's
      // file as for the store's: none on the event loop that answers partners.
      store.db.pragma('wal_autocheckpoint = 0');
      thread = await IntakeThread.start({
        file: store.file,
        durability: store.durability,
        productModules: options.productModules,
        worker: options.worker,
        requireGrants: options.requireGrants,
        onEvents: options.onEvents,
        onRound: options.onRound,
        onLog: log,
        onStoreFault: (fault) =>
          fault === null
            ? faults.recovered('store', 'the store writes again; processing resumes')
            : faults.failed('store', { level: 'error', message: `the store refuses writes: ${fault}; processing waits until it writes again, payloads wait in the intake log` }),
        onFault: (key, entry) => faults.failed(key, entry),
      });
    },
    async stop() {
      await thread?.stop();
      lock?.close();
    },
    async killThread() {
      await thread?.kill();
    },
  };
}

/** Takes the file's server lock and reads back what an earlier version's journal holds; answers the lock. */
function openServerFile(file: string, queue: SqliteIntakeQueue, say: SqliteIntakeLog): Database.Database {
  const lock = takeServerLock(file);
  try {
    const read = readBackJournal(file, queue);
    if (read > 0) say({ level: 'info', message: `intake journal of an earlier version: ${read} acknowledged payloads read back; the intake log holds each of them now`, payloads: read });
    return lock;
  } catch (error) {
    lock.close();
    throw error;
  }
}
