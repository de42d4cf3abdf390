/**
 * The body of the intake processing thread (`intake-thread.ts` starts it): its own connection to
 * the SQLite file, the products loaded by module, the groups of payloads the main thread accepted
 * (each written in one commit, then answered), and the core's `IntakeWorker` reading the log in
 * batches, each batch one transaction of this connection. Only this code uses the connection, so no
 * other write ever joins a batch's transaction, and the event loop that serves requests never waits
 * for the write lock. Live updates and counts go back to the main thread once per batch, after the
 * commit. The thread runs a little below the HTTP thread's priority (`thread-priority.ts`).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../../core/clock.ts';
import { IntakeWorker } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-hub.ts';
import { createProductRegistry, loadProductModule } from '../../core/products.ts';
import { builtInProducts } from '../../products/index.ts';
import type { NewIntake } from '../../core/intake-queue.ts';
import {
  type IntakeThreadCommand,
  type IntakeThreadData,
  type IntakeThreadLog,
  type IntakeThreadMessage,
  PROCESSING_WAL_AUTOCHECKPOINT_PAGES,
  type ThreadEnqueueOutcome,
} from './intake-thread.ts';
import { decodeIntakeGroup } from './intake-group-codec.ts';
import { openSqliteIntakeQueue } from './intake-queue.ts';
import { openSqliteStore } from './sqlite-store.ts';
import { lowerThisThreadPriority, PROCESSING_THREAD_NICENESS } from './thread-priority.ts';

lowerThisThreadPriority(PROCESSING_THREAD_NICENESS);
const port = parentPort!;
const data = workerData as IntakeThreadData;
const send = (message: IntakeThreadMessage) => port.postMessage(message);
const log = (entry: IntakeThreadLog) => send({ type: 'log', entry });

const store = await openSqliteStore({ file: data.file, durability: data.durability });
store.db.pragma(`wal_autocheckpoint = ${PROCESSING_WAL_AUTOCHECKPOINT_PAGES}`);
const queue = openSqliteIntakeQueue(store.db, { mayWaitForLock: true });
const products = createProductRegistry([
  ...builtInProducts,
  ...(await Promise.all(data.productModules.map((specifier) => loadProductModule(specifier, { cwd: data.cwd, importModule: importProductModule })))),
]);
/**
 * Node 20 runs no `--import` loader in a worker thread, so a product module in TypeScript — which the
 * main thread loaded under the operator's loader (`NODE_OPTIONS='--import tsx'`, the product guide's
 * development path) — is imported here with tsx's own importer, from the project's `tsx`. Compiled
 * modules are plain imports.
 */
async function importProductModule(target: string): Promise<Record<string, unknown>> {
  if (!/\.[cm]?ts$/.test(target)) return (await import(target)) as Record<string, unknown>;
  const tsx = await import('tsx/esm/api').catch((cause: unknown) => {
    throw new Error('a TypeScript product module needs tsx installed beside trailwire (or build the module with tsc)', { cause });
  });
  return (await tsx.tsImport(target, import.meta.url)) as Record<string, unknown>;
}

let events: LiveTrailerEvent[] = [];
const worker = new IntakeWorker(
  {
    queue,
    store,
    products,
    clock: systemClock,
    publish: (event) => {
      events.push(event);
    },
    onRound: ({ processed, failed }) => {
      send({ type: 'round', events, processed, failed });
      events = [];
    },
    onAttemptFailed: (entry, attempt, error, deadLettered) =>
      log({
        level: 'warn',
        message: deadLettered ? 'intake payload dead-lettered' : 'intake payload failed; retrying later',
        intakeId: entry.id,
        vin: entry.vin,
        product: entry.product,
        attempts: attempt,
        reason: error instanceof Error ? error.message : String(error),
      }),
    onRoundFailed: (error) => log({ level: 'error', message: 'an intake round failed; its payloads stay queued', reason: String(error), stack: (error as Error)?.stack }),
  },
  data.worker,
);

/** Groups received and not written yet, in arrival order. */
let received: Array<{ requestId: number; items: NewIntake[] }> = [];
let writeScheduled = false;

/** Groups that arrive together (the port delivers what is waiting at once) share a commit. */
function scheduleWrite(): void {
  if (writeScheduled) return;
  writeScheduled = true;
  setImmediate(writeReceived);
}

/**
 * Writes every group received so far in one commit, answers them all in one message, and wakes the worker for them.
 * Never inside an open round: the group would commit with the round, after its answer.
 */
function writeReceived(): void {
  writeScheduled = false;
  if (received.length === 0) return;
  if (store.db.inTransaction) return scheduleWrite();
  const groups = received;
  received = [];
  const outcomes = queue.enqueueNow(groups.flatMap((group) => group.items));
  let offset = 0;
  const answers = groups.map(({ requestId, items }) => {
    const itemOutcomes = outcomes.slice(offset, (offset += items.length)).map((outcome): ThreadEnqueueOutcome => {
      if ('error' in outcome) return { error: outcome.error instanceof Error ? outcome.error.message : String(outcome.error) };
      return outcome.result.created ? { created: true } : { created: false, record: outcome.result.record };
    });
    return { requestId, outcomes: itemOutcomes.every((answer) => 'created' in answer && answer.created) ? null : itemOutcomes };
  });
  send({ type: 'enqueued', answers });
  worker.notify();
}

port.on('message', (command: IntakeThreadCommand) => {
  if (command.type === 'wake') worker.notify();
  else if (command.type === 'enqueue') {
    received.push({ requestId: command.requestId, items: decodeIntakeGroup(command.group) });
    scheduleWrite();
  } else if (command.type === 'stop') void stop();
});

async function stop(): Promise<void> {
  await worker.stop();
  // Groups that came before the stop are answered: written, to be processed by the next start.
  writeReceived();
  await store.close();
  send({ type: 'stopped' });
  port.close();
}

await worker.start();
send({ type: 'ready' });
