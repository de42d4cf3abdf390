/**
 * The body of the intake processing thread (`intake-thread.ts` starts it): its own connection to
 * the SQLite file, the products loaded by module, and the core's `IntakeWorker` with each round run
 * as one transaction. Only this code uses the connection, so a round may span awaits without any
 * other write joining its transaction. Live updates and counts go back to the main thread once per
 * round, after the commit.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../../core/clock.ts';
import { IntakeWorker, type UnitOfWork } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-hub.ts';
import { createProductRegistry, loadProductModule } from '../../core/products.ts';
import { builtInProducts } from '../../products/index.ts';
import type { IntakeThreadCommand, IntakeThreadData, IntakeThreadLog, IntakeThreadMessage } from './intake-thread.ts';
import { WriteLockHandoff } from './intake-lock-handoff.ts';
import { openSqliteIntakeQueue } from './intake-queue.ts';
import { openSqliteStore } from './sqlite-store.ts';
import type Database from 'better-sqlite3';

const port = parentPort!;
const data = workerData as IntakeThreadData;
const send = (message: IntakeThreadMessage) => port.postMessage(message);
const log = (entry: IntakeThreadLog) => send({ type: 'log', entry });

/**
 * A round holds the write lock at least this long before it gives way to the main thread's intake:
 * long enough to pay one commit for many payloads, short enough that a 202 never waits much longer.
 */
const MIN_ROUND_MS = 2;
let roundStartedAt = 0;

/**
 * Each round in one transaction: the claim, every payload's writes (savepoints) and the settle.
 * Before and after it, a main thread waiting to commit intake goes first.
 */
function transactionOn(db: Database.Database, handoff: WriteLockHandoff): UnitOfWork {
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const rollback = db.prepare('ROLLBACK');
  return async (round) => {
    handoff.letMainGoFirst();
    begin.run();
    roundStartedAt = performance.now();
    try {
      const result = await round();
      commit.run();
      return result;
    } catch (error) {
      if (db.inTransaction) rollback.run();
      throw error;
    } finally {
      handoff.letMainGoFirst();
    }
  };
}

const handoff = new WriteLockHandoff(data.lockHandoff);
const store = await openSqliteStore({ file: data.file, durability: data.durability });
const queue = openSqliteIntakeQueue(store.db);
const products = createProductRegistry([
  ...builtInProducts,
  ...(await Promise.all(data.productModules.map((specifier) => loadProductModule(specifier, { cwd: data.cwd })))),
]);
let events: LiveTrailerEvent[] = [];
const worker = new IntakeWorker(
  {
    queue,
    store,
    products,
    clock: systemClock,
    unitOfWork: transactionOn(store.db, handoff),
    shouldYield: () => handoff.mainWaiting && performance.now() - roundStartedAt >= MIN_ROUND_MS,
    publish: (event) => {
      events.push(event);
    },
    onRound: ({ processed, failed }) => {
      send({ type: 'round', events, processed, failed });
      events = [];
    },
    onAttemptFailed: (record, error, deadLettered) =>
      log({
        level: 'warn',
        message: deadLettered ? 'intake payload dead-lettered' : 'intake payload failed; retrying later',
        intakeId: record.id,
        vin: record.vin,
        product: record.product,
        attempts: record.attempts,
        reason: error instanceof Error ? error.message : String(error),
      }),
    onRoundFailed: (error) => log({ level: 'error', message: 'an intake round failed; its payloads stay queued', reason: String(error), stack: (error as Error)?.stack }),
  },
  data.worker,
);

port.on('message', (command: IntakeThreadCommand) => {
  if (command.type === 'wake') worker.notify();
  else if (command.type === 'stop') void stop();
});

async function stop(): Promise<void> {
  await worker.stop();
  await store.close();
  send({ type: 'stopped' });
  port.close();
}

await worker.start();
send({ type: 'ready' });
