/**
 * Intake processing in a worker thread, for the embedded SQLite store, as the main thread sees it.
 * better-sqlite3 is synchronous: processing on the event loop would take turns with HTTP requests
 * for one core. The thread opens its own connection to the file and processes the intake log with
 * the core's `IntakeWorker`, each batch one transaction of the store's file
 * (`intake-thread-worker.ts`); the main thread appends to the log (the log's own file) and wakes the
 * thread after each commit (`notify`). Live updates come back here and are handed to `onEvents` in order.
 *
 * Faults. When the store refuses the thread's batches (a full or failing disk), the thread says so
 * once (`onStoreFault`), and again when a batch commits. A thread that dies (an exception, `kill`)
 * is started again with a backoff (1 s, doubling to 30 s), and `isRunning` is false in between:
 * what it had not committed is still in the log, and the new thread reads it from the watermark.
 *
 * The thread loads products by module specifier (the built-in products, and any others named), since
 * product objects cannot cross threads; a server given product objects processes inline instead.
 */
import { once } from 'node:events';
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { Worker } from 'node:worker_threads';
import { Backoff } from '../../core/backoff.ts';
import { type Clock, systemClock } from '../../core/clock.ts';
import { TrailwireError } from '../../core/errors.ts';
import type { IntakeWorkerOptions } from '../../core/intake-worker.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { SqliteDurability } from './sqlite-store.ts';
import type { WebhookDeliveryCall } from './webhook-delivery-calls.ts';

/**
 * The processing thread's connection checkpoints the WAL every 4,000 pages (32 MB of a new file's
 * 8 KiB pages, 16 MB of an older file's 4 KiB) instead of SQLite's 1,000: a page written by several
 * batches between two checkpoints — a fleet's trailer rows are scattered over many — is copied back
 * to the file once, which takes about a tenth off the processing cost (`npm run bench -- intake-processing`).
 */
export const PROCESSING_WAL_AUTOCHECKPOINT_PAGES = 4000;

/**
 * The thread's batches hold up to 2,048 payloads unless `worker.batchSize` says otherwise (the core's
 * default, 512, suits a worker on an event loop that also serves requests). The thread has its own
 * event loop, and a batch's cost is mostly the pages it writes: a larger batch writes each trailer
 * and index page once for more payloads (14–16 µs a payload instead of 21–23 with 512,
 * `npm run bench -- intake-processing`). Latency at a light load is the linger's; under load a payload
 * is processed some tens of milliseconds after its 202.
 */
export const PROCESSING_BATCH_SIZE = 2048;

/** The first restart of a thread that died waits this long by default; each restart in a row doubles it. */
const RESTART_DELAY_MS = 1000;
const MAX_RESTART_DELAY_MS = 30_000;
/** A thread that ran this long before it died is restarted after the first delay again. */
const STABLE_RUN_MS = 60_000;

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
  /** As the core's `partnerIntake.requireGrants`: the worker checks grants again at processing by the same rule. Default false. */
  requireGrants?: boolean;
  /** Receives the live updates of each round, in order. Default: nobody. */
  onEvents?: (events: LiveTrailerEvent[]) => void;
  /** Told after each round how many payloads it processed and dead-lettered. */
  onRound?: (counts: { processed: number; failed: number }) => void;
  /** Receives what the thread has to say (failed attempts and restarts). */
  onLog?: (entry: IntakeThreadLog) => void;
  /** Told when the store stops taking the thread's writes (the reason) and when it takes them again (null). */
  onStoreFault?: (fault: string | null) => void;
  /** Told of each fault that may repeat (a failed round), by key, to be said once and then once per interval. */
  onFault?: (key: string, entry: IntakeThreadLog & { level: 'error' }) => void;
  /** Delay before a thread that died is started again, doubled for each restart in a row. Default 1000 ms. */
  restartDelayMs?: number;
  /** What a thread's run is timed by (a run of `STABLE_RUN_MS` resets the restart delay). Default: the system clock. */
  clock?: Clock;
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
  requireGrants: boolean;
}

/** Messages from the thread. */
export type IntakeThreadMessage =
  | { type: 'ready' }
  | { type: 'round'; events: LiveTrailerEvent[]; processed: number; failed: number }
  | { type: 'log'; entry: IntakeThreadLog }
  /** A fault that may repeat (a failed round): said once, then once per interval, by the main thread. */
  | { type: 'fault'; key: string; entry: IntakeThreadLog & { level: 'error' } }
  /** Answers to requests (`webhooks`: the store call's result, or the message of its error). */
  | { type: 'answers'; answers: Array<{ requestId: number; value?: unknown; error?: string }> }
  | { type: 'store'; fault: string | null }
  | { type: 'stopped' };

/** Messages to the thread. */
export type IntakeThreadCommand =
  | { type: 'wake' }
  /** A call of the webhook deliverer's store, run on the thread's connection between batches (`webhook-delivery-calls.ts`). */
  | { type: 'webhooks'; requestId: number; call: WebhookDeliveryCall }
  | { type: 'stop' };

interface PendingRequest {
  resolve: (value: unknown) => void;
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
  /** Requests sent to the thread and not answered yet, by id. */
  private readonly pending = new Map<number, PendingRequest>();
  private restartTimer: NodeJS.Timeout | undefined;
  /** The start of a thread after one died, while it is under way. */
  private restarting: Promise<void> | undefined;
  private startedAt = 0;

  /** The delay before restarting a thread that died: doubled for each restart in a row. */
  private readonly restartDelay: Backoff;
  private readonly clock: Clock;

  private constructor(private readonly options: IntakeThreadOptions) {
    this.restartDelay = new Backoff(options.restartDelayMs ?? RESTART_DELAY_MS, MAX_RESTART_DELAY_MS);
    this.clock = options.clock ?? systemClock;
  }

  /** Starts the thread and resolves once it processes. */
  static async start(options: IntakeThreadOptions): Promise<IntakeThread> {
    if (!options?.file) throw new TypeError('IntakeThread: `file` is required');
    if (options.file === ':memory:') throw new TypeError('IntakeThread: an in-memory database cannot be shared with a thread');
    const thread = new IntakeThread(options);
    await thread.spawn();
    return thread;
  }

  /** Tells the thread that payloads are queued (appended, or dead letters re-queued); several calls in one turn send one message. */
  notify(): void {
    if (this.wakePending || !this.worker) return;
    this.wakePending = true;
    setImmediate(() => {
      this.wakePending = false;
      this.worker?.postMessage({ type: 'wake' } satisfies IntakeThreadCommand);
    });
  }

  /** Has the thread run a call of the webhook deliverer's store; rejects with `unavailable` when the thread is not running or ends before it answers, or with the store's error. */
  callWebhooks(call: WebhookDeliveryCall): Promise<unknown> {
    return this.request((requestId) => ({ type: 'webhooks', requestId, call }));
  }

  get isRunning(): boolean {
    return this.worker !== undefined && !this.stopping;
  }

  /** Finishes the round in hand, closes the thread's connection and ends the thread. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const worker = this.worker;
    // Not running: a restart that is under way ends itself once started (`spawn`).
    if (!worker) return this.restarting;
    const exited = once(worker, 'exit');
    worker.postMessage({ type: 'stop' } satisfies IntakeThreadCommand);
    await exited;
  }

  /** Ends the thread at once, as a crash would; it is restarted like a thread that died. For fault drills and tests. */
  async kill(): Promise<void> {
    await this.worker?.terminate();
  }

  private request(command: (requestId: number) => IntakeThreadCommand): Promise<unknown> {
    const worker = this.worker;
    if (!worker || this.stopping) return Promise.reject(new TrailwireError('unavailable', 'The intake thread is not running; try again shortly.'));
    const requestId = this.nextRequestId++;
    return new Promise((resolve, reject) => {
      this.pending.set(requestId, { resolve, reject });
      try {
        worker.postMessage(command(requestId));
      } catch (error) {
        // Not sent (a value that cannot be cloned): nothing will answer it.
        this.pending.delete(requestId);
        reject(error);
      }
    });
  }

  private async spawn(): Promise<void> {
    const data: IntakeThreadData = {
      file: this.options.file,
      durability: this.options.durability ?? 'process',
      productModules: this.options.productModules ?? [],
      cwd: this.options.cwd ?? process.cwd(),
      worker: { batchSize: PROCESSING_BATCH_SIZE, ...this.options.worker },
      requireGrants: this.options.requireGrants ?? false,
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
    // Stopped while it started (a restart under way when the server closed): end it, rather than leave it running.
    if (this.stopping) {
      await worker.terminate();
      return;
    }
    worker.removeAllListeners('error').removeAllListeners('exit');
    worker.on('error', (error) => this.log({ level: 'error', message: 'the intake thread failed', err: error }));
    worker.on('exit', (code) => this.exited(code));
    this.worker = worker;
    this.startedAt = this.clock.now();
  }

  private receive(message: IntakeThreadMessage): void {
    if (message.type === 'round') {
      this.options.onRound?.({ processed: message.processed, failed: message.failed });
      if (message.events.length > 0) this.options.onEvents?.(message.events);
    } else if (message.type === 'answers') {
      for (const { requestId, value, error } of message.answers) {
        const request = this.pending.get(requestId);
        if (error === undefined) request?.resolve(value);
        else request?.reject(new Error(error));
        this.pending.delete(requestId);
      }
    } else if (message.type === 'store') this.options.onStoreFault?.(message.fault);
    else if (message.type === 'fault') this.options.onFault?.(message.key, message.entry);
    else if (message.type === 'log') this.log(message.entry);
  }

  private exited(code: number): void {
    this.worker = undefined;
    const ended = new TrailwireError('unavailable', 'The intake thread ended before it answered; try again.');
    for (const request of this.pending.values()) request.reject(ended);
    this.pending.clear();
    if (this.stopping) return;
    // Queued payloads are in the log, and the next thread reads on from the watermark: a restart loses nothing.
    if (this.clock.now() - this.startedAt >= STABLE_RUN_MS) this.restartDelay.reset();
    const delay = this.restartDelay.next();
    this.log({ level: 'error', message: `the intake thread exited (code ${code}); restarting in ${delay} ms` });
    this.restartTimer = setTimeout(() => {
      this.restarting = this.spawn().catch((error: unknown) => {
        if (this.stopping) return;
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

/**
 * Lowers the scheduling priority of the calling thread alone (not its process), where the system
 * allows it: on Linux a thread is a task with its own id, which `setpriority` accepts, and
 * `/proc/thread-self` names it. Elsewhere nothing changes.
 *
 * The intake processing thread runs a little below the HTTP thread (`PROCESSING_THREAD_NICENESS`):
 * when the cores are short, the scheduler then gives them to the thread that answers partners first,
 * and a payload waits a moment longer in the durable log instead of a partner waiting for its 202.
 * Under contention the processing thread still gets about a quarter of a core, and all of what is idle.
 */
/** How far below the process's priority the processing thread runs (a nice value; higher is lower). */
export const PROCESSING_THREAD_NICENESS = 5;

/** Lowers this thread's priority by `niceness` steps; answers whether it could. */
export function lowerThisThreadPriority(niceness: number): boolean {
  let threadId: number;
  try {
    // "<pid>/task/<tid>"
    threadId = Number(readlinkSync('/proc/thread-self').split('/').pop());
  } catch {
    return false;
  }
  if (!Number.isSafeInteger(threadId) || threadId <= 0) return false;
  try {
    setPriority(threadId, Math.min(19, getPriority(threadId) + niceness));
    return true;
  } catch {
    return false;
  }
}
