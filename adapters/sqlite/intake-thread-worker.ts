/**
 * The body of the intake processing thread (`intake-thread.ts` starts it): its own connection to
 * the SQLite file (the intake log's file attached, `intake-queue.ts`), the products loaded by
 * module, and the core's `IntakeWorker` reading the log in batches, each batch one transaction of
 * the store's file. The main thread appends to the log's file meanwhile, and wakes this one after
 * each commit; the two files' locks keep the two apart. Live updates and counts go back to the main
 * thread once per batch, after the commit. The thread runs a little below the HTTP thread's priority.
 *
 * When the store refuses a batch's writes (a full or failing disk), the batch is abandoned whole and
 * tried again by the worker; the main thread is told of each refused batch and of the first commit
 * after them, and keeps the state and the one fault log of the intake (said once, then once per
 * interval with a count).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../../core/clock.ts';
import { isTrailwireError } from '../../core/errors.ts';
import { failedAttemptLine, IntakeWorker, ROUND_FAILED_MESSAGE } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import { createProductRegistry, loadProductModule } from '../../core/products.ts';
import { builtInProducts } from '../../products/index.ts';
import { INTAKE_LOG_SCHEMA, openSqliteIntakeQueue } from './intake-queue.ts';
import {
  type IntakeThreadCommand,
  type IntakeThreadData,
  type IntakeThreadLog,
  type IntakeThreadMessage,
  lowerThisThreadPriority,
  PROCESSING_THREAD_NICENESS,
  PROCESSING_WAL_AUTOCHECKPOINT_PAGES,
} from './intake-thread.ts';
import { openSqliteStore } from './sqlite-store.ts';
import { runWebhookDeliveryCall, type WebhookDeliveryCall } from './webhook-delivery-calls.ts';

lowerThisThreadPriority(PROCESSING_THREAD_NICENESS);
const port = parentPort!;
const data = workerData as IntakeThreadData;
const send = (message: IntakeThreadMessage) => port.postMessage(message);
const log = (entry: IntakeThreadLog) => send({ type: 'log', entry });

const store = await openSqliteStore({ file: data.file, durability: data.durability });
/**
 * The webhook deliverer's calls run on a connection of their own, which never attaches the log's
 * file: each is an immediate transaction (`webhook-tables.ts`), and SQLite's BEGIN IMMEDIATE takes
 * every attached file's write lock, so on the batches' connection each would hold the log's too,
 * and the HTTP thread's appends would wait for it (with 100 endpoints delivering, the HTTP thread's
 * CPU per 202 rose by a fifth). They still run between batches, so they never wait for a batch's lock.
 */
const deliveries = await openSqliteStore({ file: data.file, durability: data.durability });
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

// --- the store's state: each refused write, and the first write after them, told to the main thread
// (which keeps the state and says it once, then once per interval) --------------------------------

let storeFaulted = false;

function storeFailed(reason: string): void {
  storeFaulted = true;
  send({ type: 'store', fault: reason });
}

function storeWrote(): void {
  if (!storeFaulted) return;
  storeFaulted = false;
  send({ type: 'store', fault: null });
}

/**
 * Copies the log file's WAL back into its file between batches, when no batch of this connection
 * reads it. The HTTP thread's connection, which appends, does not checkpoint (`intake.ts`): there a
 * checkpoint would run on the event loop after a commit, and while this thread's batches read the
 * log it could never finish, so it would be tried again after every commit as the WAL grew (the
 * HTTP thread's CPU per 202 rose by a third). Here it finishes, and the next append starts the WAL over.
 */
function checkpointLog(): void {
  store.db.pragma(`${INTAKE_LOG_SCHEMA}.wal_checkpoint(PASSIVE)`);
}

// --- processing -----------------------------------------------------------------------------------

let events: LiveTrailerEvent[] = [];
const worker = new IntakeWorker(
  {
    queue,
    store,
    products,
    clock: systemClock,
    // Read on this thread's connection as of each batch: an operator's registration in any process is seen.
    grants: { store, requireGrants: data.requireGrants },
    publish: (event) => {
      events.push(event);
    },
    onRound: ({ processed, failed }) => {
      storeWrote();
      send({ type: 'round', events, processed, failed });
      events = [];
      checkpointLog();
    },
    onAttemptFailed: (entry, attempt, error, deadLettered) => log(failedAttemptLine(entry, attempt, error, deadLettered)),
    onRoundFailed: (error) => {
      if (isTrailwireError(error) && error.code === 'store_unavailable') return storeFailed(error.message);
      send({ type: 'fault', key: 'round', entry: { level: 'error', message: ROUND_FAILED_MESSAGE, reason: String(error), stack: (error as Error)?.stack } });
    },
  },
  data.worker,
);

/** A call of the webhook deliverer's store, between batches: on this connection it waits for no lock. */
function runWebhookCall(requestId: number, call: WebhookDeliveryCall): void {
  queue.whenNoBatch(() =>
    void runWebhookDeliveryCall(deliveries.webhooks, call).then(
      (value) => send({ type: 'answers', answers: [{ requestId, value }] }),
      (error: unknown) => send({ type: 'answers', answers: [{ requestId, error: error instanceof Error ? error.message : String(error) }] }),
    ),
  );
}

port.on('message', (command: IntakeThreadCommand) => {
  if (command.type === 'wake') worker.notify();
  else if (command.type === 'webhooks') runWebhookCall(command.requestId, command.call);
  else if (command.type === 'stop') void stop();
});

async function stop(): Promise<void> {
  await worker.stop();
  await deliveries.close();
  await store.close();
  send({ type: 'stopped' });
  port.close();
}

await worker.start();
send({ type: 'ready' });
