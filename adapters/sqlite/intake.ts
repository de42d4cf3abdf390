/**
 * The SQLite intake, behind one front door: `openSqliteIntake` opens the durable intake of a store's
 * file and answers what a server needs of it — the queue the core takes intake into and its worker
 * processes (`intake-queue.ts`, on the store's own connection, as PostgreSQL's is in its schema),
 * its readiness check, and `stop`. Each event-loop turn's payloads are appended in one transaction
 * before their 202s; the core's `IntakeWorker` processes the log in batches on the same event loop.
 *
 * There was a processing thread and an intake journal in front of the log here until issue 38's
 * fourth session; on the intake bench they bought nothing the figures could tell from the spread
 * (docs/performance.md), and they were most of the path's intricacy. What an earlier version's
 * journal still holds is read back into the log at the first start (`journal-read-back.ts`).
 *
 * A write the store refuses (a full or failing disk) refuses its turn's payloads with 503
 * `store_unavailable`; `/readyz` says `intake-log` is not ready until a write succeeds again — each
 * call while it is not probes with a small write, so the check recovers by itself once the operator
 * frees space, with or without intake. The fault is logged once, then once per interval. The path's
 * states and what a client gets in each are in docs/intake-path.md.
 */
import type Database from 'better-sqlite3';
import type { IntakeBackend } from '../../core/intake-queue.ts';
import { type FaultLogEntry, RepeatingFaultLog } from '../../core/repeating-fault-log.ts';
import { openSqliteIntakeQueue, type SqliteIntakeQueue } from './intake-queue.ts';
import { readBackJournal, takeServerLock } from './journal-read-back.ts';
import type { SqliteStore } from './sqlite-store.ts';

/** A line the intake has to say, at its level. */
export type SqliteIntakeLog = (entry: FaultLogEntry | { level: 'info'; message: string; [field: string]: unknown }) => void;

export interface SqliteIntakeOptions {
  /** The store whose file holds the intake log; the log is written on its connection. Required. */
  store: SqliteStore;
  /**
   * Whether this process processes the intake (its server holds the file's server lock and reads
   * back an earlier version's journal). Default true; false for a process that only takes intake or
   * operates the queue (a CLI command) beside the server that processes it.
   */
  process?: boolean;
  /** Where the intake says what happens to it (faults once, then once per interval). Default: nowhere. */
  log?: SqliteIntakeLog;
}

/** An opened SQLite intake: its queue offers the process role (`ProcessableIntakeQueue`). */
export interface SqliteIntake extends IntakeBackend {
  readonly queue: SqliteIntakeQueue;
}

/** Opens the intake of an SQLite store's file (see the top). */
export function openSqliteIntake(options: SqliteIntakeOptions): SqliteIntake {
  const { store } = options;
  const log: SqliteIntakeLog = options.log ?? (() => {});
  const faults = new RepeatingFaultLog({ write: log });
  /** What the store's last refused write said, until a write succeeds. */
  let storeFault: string | undefined;
  const queue = openSqliteIntakeQueue(store.db, {
    onWrite: (fault) => {
      if (fault === null) {
        if (storeFault === undefined) return;
        storeFault = undefined;
        faults.recovered('store', 'the store writes again; intake and processing resume');
        return;
      }
      storeFault = fault;
      faults.failed('store', { level: 'error', message: `the store refuses writes: ${fault}` });
    },
  });
  const lock = (options.process ?? true) && store.file !== ':memory:' ? openServerFile(store.file, queue, log) : undefined;
  return {
    queue,
    readinessChecks: {
      'intake-log': async () => {
        if (storeFault !== undefined) await queue.probeWrite();
      },
    },
    async start() {},
    async stop() {
      lock?.close();
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
