/**
 * The PostgreSQL intake, behind one front door: `openPostgresIntake` opens the durable intake in the
 * store's schema and answers what a server needs of it — the queue the core takes intake into (and
 * its worker processes: the queue offers the process role), its readiness checks, and `stop`. The
 * log lives in the database (`intake-queue.ts`), or, given a log engine's log (NATS JetStream's,
 * `trailwire/nats`), there, with this schema's index beside it (`PartitionedIntakeQueue` of the
 * core). A processing process's queue listens for every process's enqueues (`onEnqueuedElsewhere`).
 */
import type { IntakeBackend } from '../../core/intake-queue.ts';
import type { IntakeLog } from '../../core/intake-log.ts';
import { PartitionedIntakeQueue } from '../../core/partitioned-intake-queue.ts';
import { openPostgresIntakeIndex } from './intake-index.ts';
import { openPostgresIntakeQueue, type PostgresQueueHost } from './intake-queue.ts';

export interface PostgresIntakeOptions {
  /** The store whose pool and schema hold the intake. Required. */
  store: PostgresQueueHost;
  /**
   * Whether this process processes intake: it then listens for other processes' enqueues (the
   * queue's own session) to wake its worker. Default true; false for a process that only takes
   * intake (a CLI command).
   */
  process?: boolean;
  /**
   * A log engine's intake log to keep the payloads in instead of the database (with a `probe` for
   * `/readyz`); the schema keeps its index. Default: none, the log in the database. Another process's
   * enqueue is then found by the worker's idle poll.
   */
  log?: IntakeLog & { probe(): Promise<void> };
}

/** An opened PostgreSQL intake. */
export interface PostgresIntake extends IntakeBackend {
  /** Sets what an enqueue by any process sharing the queue wakes (the core's worker). */
  onEnqueuedElsewhere(listener: () => void): void;
}

/** Opens the intake of a PostgreSQL store's schema (see the top). Rejects, with nothing left open but the caller's store and log, when the database cannot be reached. */
export async function openPostgresIntake(options: PostgresIntakeOptions): Promise<PostgresIntake> {
  const { store, log } = options;
  if (log) {
    const index = await openPostgresIntakeIndex(store);
    const queue = new PartitionedIntakeQueue(log, index);
    return {
      queue,
      readinessChecks: { 'intake-log': () => log.probe() },
      start: async () => {},
      stop: async () => {
        await queue.close();
        await index.close();
        await log.close();
      },
      onEnqueuedElsewhere: () => {},
    };
  }
  let wake: () => void = () => {};
  const queue = await openPostgresIntakeQueue(store, options.process === false ? {} : { onEnqueued: () => wake() });
  return {
    queue,
    readinessChecks: {},
    start: async () => {},
    stop: () => queue.close(),
    onEnqueuedElsewhere: (listener) => (wake = listener),
  };
}
