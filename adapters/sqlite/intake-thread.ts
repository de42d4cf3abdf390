/**
 * Intake processing in a worker thread, for the embedded SQLite store. better-sqlite3 is
 * synchronous: processing on the event loop would take turns with HTTP requests for one core. The
 * thread opens its own connection to the file and is its one intake writer: the main thread only
 * accepts (authenticates, validates, limits) and hands each turn's accepted payloads to the thread
 * (`enqueue`), which writes them in one commit and answers, then processes what is queued with the
 * core's `IntakeWorker`. SQLite has one writer at a time; with a single writer for intake, nothing
 * contends for the lock, the event loop never waits for it, and every commit (the fsync in `power`
 * durability) happens off the event loop. Owning its connection, the thread runs each batch of the
 * log — its reads, the store's writes, the outcomes and the new watermark — as one transaction: one
 * commit per batch, not one per payload, and under load the groups and batches grow, so the commits
 * stay few. Live updates come back to the main
 * thread, which publishes them on its live hub in order. A server does not wait for the thread's
 * commit before its 202s: it makes each group durable in the intake journal first
 * (`intake-journal.ts`, `threaded-intake-queue.ts`), and the thread's answer only confirms it.
 *
 * The thread loads products by module specifier (the built-in products, and any others named), since
 * product objects cannot cross threads; a server given product objects processes inline instead.
 */
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { TrailwireError } from '../../core/errors.ts';
import type { IntakeRecord } from '../../core/intake-queue.ts';
import type { IntakeWorkerOptions } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-hub.ts';
import type { SqliteDurability } from './sqlite-store.ts';

/**
 * The processing thread's connection checkpoints the WAL every 4,000 pages (32 MB of a new file's
 * 8 KiB pages, 16 MB of an older file's 4 KiB) instead of SQLite's 1,000: a page written by several
 * batches between two checkpoints — a fleet's trailer
 * rows are scattered over many — is copied back to the file once, which takes about a tenth off the
 * processing cost (`npm run bench -- intake-processing`).
 */
export const PROCESSING_WAL_AUTOCHECKPOINT_PAGES = 4000;

/**
 * The thread's batches hold up to 2,048 payloads unless `worker.batchSize` says otherwise (the core's
 * default, 512, suits a worker on an event loop that also serves requests). The thread has its own
 * event loop, and a batch's cost is mostly the pages it writes: a larger batch writes each trailer
 * and index page once for more payloads. With batches of 512 a full batch was followed at once by
 * a small one, where with 2,048 every batch gathers for the linger: processing took 14–16 µs a
 * payload instead of 21–23 (`npm run bench -- intake-processing`), and intake about 10 % more 202/s.
 * Latency at a light load is the linger's, as before; under load a payload is processed some tens
 * of milliseconds after its 202.
 */
export const PROCESSING_BATCH_SIZE = 2048;

export interface IntakeThreadOptions {
  /** The SQLite file of the store; the thread opens its own connection to it. Required. */
  file: string;
  /** As the store's. Default `process`. */
  durability?: SqliteDurability;
  /** Product modules the thread loads besides the built-in products (`loadProductModule` specifiers). Default: none. */
  productModules?: readonly string[];
  /** Where relative product module specifiers resolve. Default: `process.cwd()`. */
  cwd?: string;
  /** Worker tuning (batch size, retries, retention...). */
  worker?: IntakeWorkerOptions;
  /** Receives the live updates of each round, in order (the main thread's hub publishes them). */
  onEvents: (events: LiveTrailerEvent[]) => void;
  /** Receives what the thread has to say (failed attempts and rounds, restarts). */
  onLog?: (entry: IntakeThreadLog) => void;
  /** Delay before a thread that died is started again. Default 1000 ms. */
  restartDelayMs?: number;
}

export interface IntakeThreadLog {
  level: 'warn' | 'error';
  message: string;
  [field: string]: unknown;
}

/** What the thread receives (`workerData`). */
export interface IntakeThreadData {
  file: string;
  durability: SqliteDurability;
  productModules: readonly string[];
  cwd: string;
  worker: IntakeWorkerOptions;
}

/** Messages from the thread. */
export type IntakeThreadMessage =
  | { type: 'ready' }
  | { type: 'round'; events: LiveTrailerEvent[]; processed: number; failed: number }
  | { type: 'log'; entry: IntakeThreadLog }
  /**
   * The answers to `enqueue` commands, once their groups are committed — one message for every group
   * of a commit: per group an outcome per item, or null when every item was stored (the usual
   * answer, and the cheapest to send across).
   */
  | { type: 'enqueued'; answers: Array<{ requestId: number; outcomes: ThreadEnqueueOutcome[] | null }> }
  | { type: 'stopped' };

/**
 * What became of one item of a group. A stored item is answered in one flag, since the main thread
 * holds the item and knows its record (`queuedRecord`); only a replay (an idempotency key used
 * before) carries the earlier record back, so that payloads do not cross the threads twice.
 */
export type ThreadEnqueueOutcome = { created: true } | { created: false; record: IntakeRecord } | { error: string };

/** Messages to the thread. */
export type IntakeThreadCommand = { type: 'wake' } | { type: 'enqueue'; requestId: number; group: Uint8Array } | { type: 'stop' };

interface PendingGroup {
  resolve: (outcomes: ThreadEnqueueOutcome[] | null) => void;
  reject: (error: unknown) => void;
}

/** The thread's module, of the same kind as this one: compiled `.js` under dist/, or a checkout's `.ts`. */
const RUNS_FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER_MODULE = new URL(`./intake-thread-worker.${RUNS_FROM_SOURCE ? 'ts' : 'js'}`, import.meta.url);

/** A running processing thread, as the main thread sees it. */
export class IntakeThread {
  private worker: Worker | undefined;
  private stopping = false;
  private wakePending = false;
  private nextRequestId = 1;
  /** Groups sent to the thread and not answered yet. */
  private readonly pendingGroups = new Map<number, PendingGroup>();
  private processedCount = 0;
  private failedCount = 0;
  private restartTimer: NodeJS.Timeout | undefined;

  private constructor(private readonly options: IntakeThreadOptions) {}

  /** Starts the thread and resolves once it processes (its start-up recovery done). */
  static async start(options: IntakeThreadOptions): Promise<IntakeThread> {
    if (!options?.file) throw new TypeError('IntakeThread: `file` is required');
    if (options.file === ':memory:') throw new TypeError('IntakeThread: an in-memory database cannot be shared with a thread');
    const thread = new IntakeThread(options);
    await thread.spawn();
    return thread;
  }

  /** Tells the thread that new payloads are queued; several calls in one turn send one message. */
  notify(): void {
    if (this.wakePending || !this.worker) return;
    this.wakePending = true;
    setImmediate(() => {
      this.wakePending = false;
      this.worker?.postMessage({ type: 'wake' } satisfies IntakeThreadCommand);
    });
  }

  /**
   * Has the thread write a group of payloads (`encodeIntakeGroup`) in one commit; resolves once they are durable, with
   * each item's result or error (null: every item was stored). Rejects with `unavailable` when the thread is not running, or ends
   * before it answers (the group may or may not have been committed: a client retries with its
   * `Idempotency-Key`).
   */
  enqueue(group: Uint8Array): Promise<ThreadEnqueueOutcome[] | null> {
    const worker = this.worker;
    if (!worker || this.stopping) return Promise.reject(new TrailwireError('unavailable', 'The intake thread is not running; try again shortly.'));
    const requestId = this.nextRequestId++;
    return new Promise((resolve, reject) => {
      this.pendingGroups.set(requestId, { resolve, reject });
      worker.postMessage({ type: 'enqueue', requestId, group } satisfies IntakeThreadCommand);
    });
  }

  get isRunning(): boolean {
    return this.worker !== undefined && !this.stopping;
  }

  /** Payloads processed and dead-lettered by the thread since it started. */
  get counts(): { processed: number; failed: number } {
    return { processed: this.processedCount, failed: this.failedCount };
  }

  /** Finishes the round in hand, closes the thread's connection and ends the thread. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const worker = this.worker;
    if (!worker) return;
    const exited = once(worker, 'exit');
    worker.postMessage({ type: 'stop' } satisfies IntakeThreadCommand);
    await exited;
  }

  private async spawn(): Promise<void> {
    const data: IntakeThreadData = {
      file: this.options.file,
      durability: this.options.durability ?? 'process',
      productModules: this.options.productModules ?? [],
      cwd: this.options.cwd ?? process.cwd(),
      worker: { batchSize: PROCESSING_BATCH_SIZE, ...this.options.worker },
    };
    const worker = RUNS_FROM_SOURCE ? spawnSourceWorker(data) : new Worker(WORKER_MODULE, { workerData: data });
    const ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (message: IntakeThreadMessage) => {
        if (message.type === 'ready') resolve();
        else this.receive(message);
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the intake thread exited with code ${code} while starting`)));
    });
    await ready;
    worker.removeAllListeners('error').removeAllListeners('exit');
    worker.on('error', (error) => this.log({ level: 'error', message: 'the intake thread failed', err: error }));
    worker.on('exit', (code) => this.exited(code));
    this.worker = worker;
  }

  private receive(message: IntakeThreadMessage): void {
    if (message.type === 'round') {
      this.processedCount += message.processed;
      this.failedCount += message.failed;
      if (message.events.length > 0) this.options.onEvents(message.events);
    } else if (message.type === 'enqueued') {
      for (const { requestId, outcomes } of message.answers) {
        const group = this.pendingGroups.get(requestId);
        this.pendingGroups.delete(requestId);
        group?.resolve(outcomes);
      }
    } else if (message.type === 'log') this.log(message.entry);
  }

  private exited(code: number): void {
    this.worker = undefined;
    for (const group of this.pendingGroups.values())
      group.reject(new TrailwireError('unavailable', 'The intake thread ended before it confirmed the payload; try again.'));
    this.pendingGroups.clear();
    if (this.stopping) return;
    // Queued payloads are durable and the thread recovers what it had in hand, so a restart loses nothing.
    const delay = this.options.restartDelayMs ?? 1000;
    this.log({ level: 'error', message: `the intake thread exited (code ${code}); restarting in ${delay} ms` });
    this.restartTimer = setTimeout(() => {
      this.spawn().catch((error: unknown) => {
        this.log({ level: 'error', message: 'the intake thread could not restart', err: error });
        this.exited(1);
      });
    }, delay);
  }

  private log(entry: IntakeThreadLog): void {
    this.options.onLog?.(entry);
  }
}

/**
 * A checkout runs the thread from TypeScript through tsx, whose module hooks are not inherited by
 * worker threads: the entry imports the module with tsx's own importer. (The compiled thread inherits
 * the process's `execArgv`, so a product module run under `node --import tsx` loads there too.)
 */
function spawnSourceWorker(data: IntakeThreadData): Worker {
  const tsx = import.meta.resolve('tsx/esm/api');
  const module = JSON.stringify(WORKER_MODULE.href);
  const entry = `import(${JSON.stringify(tsx)}).then(({ tsImport }) => tsImport(${module}, ${module}))`;
  return new Worker(entry, { eval: true, workerData: data, execArgv: [] });
}
