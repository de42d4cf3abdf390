/**
 * The SQLite intake, behind one front door: `openSqliteIntake` opens the durable intake of a store's
 * file and answers what a server needs of it — the queue the core takes intake into, how to start
 * and stop its processing, its counts and its readiness checks. What is behind the door:
 *
 * - with a processing thread (the default for a file): the intake journal, the queue of the HTTP
 *   thread that journals each turn's group and answers (`threaded-intake-queue.ts`), and the thread
 *   that appends the groups to the log and processes it (`intake-thread.ts`);
 * - without one (an in-memory database, product objects that cannot cross threads, an injected
 *   clock): the log on the store's own connection (`intake-queue.ts`), processed by the core's
 *   `IntakeWorker` on the event loop (`processesItself` is false).
 *
 * Either way, what a previous server acknowledged and had not appended to the log when it ended is
 * appended from its journal before any new intake (`replayIntoLog`). The path's states and what a
 * client gets in each are in docs/intake-path.md.
 */
import type { IntakeBackend, IntakeQueue } from '../../core/intake-queue.ts';
import type { IntakeWorkerOptions } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-hub.ts';
import { type FaultLogEntry, RepeatingFaultLog } from '../../core/repeating-fault-log.ts';
import { isTrailwireError } from '../../core/errors.ts';
import { IntakeJournal, type JournalFileCalls, replayIntoLog } from './intake-journal.ts';
import { openSqliteIntakeQueue } from './intake-queue.ts';
import { IntakeThread } from './intake-thread.ts';
import type { SqliteStore } from './sqlite-store.ts';
import { ThreadedIntakeQueue } from './threaded-intake-queue.ts';

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
  /** Receives the live updates of each processing round, in order. */
  onEvents?: (events: LiveTrailerEvent[]) => void;
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
    processesItself: true,
    readinessChecks: queue.readinessChecks,
    get counts() {
      return thread?.counts ?? { processed: 0, failed: 0 };
    },
    async start() {
      thread = await IntakeThread.start({
        file: store.file,
        durability: store.durability,
        productModules: options.productModules,
        worker: options.worker,
        onEvents: (events) => options.onEvents?.(events),
        onLog: log,
        onReady: (started) => queue.attach(started),
        onStoreFault: (fault) => queue.storeFaultChanged(fault),
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
    processesItself: false,
    readinessChecks: {},
    counts: { processed: 0, failed: 0 },
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
    const { read, appended } = replayIntoLog(journal, log);
    if (appended > 0) say({ level: 'info', message: `intake journal: ${appended} acknowledged payloads the last run had not appended are in the intake log now`, payloads: appended, read });
  } catch (error) {
    journal.close();
    throw error;
  }
  if (writes) return journal;
  journal.close();
  return undefined;
}
