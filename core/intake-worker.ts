/**
 * Intake processing (contract 4): a worker claims queued payloads (in order per VIN), runs the
 * product's transform, writes the canonical records with the store's one idempotent write, settles
 * the outcomes and publishes each changed trailer's new state to the live hub. A payload whose
 * transform or write throws is retried with exponential backoff, then dead-lettered as `failed`
 * with the reason; after that it no longer holds its VIN's later payloads back. Because the write
 * is idempotent, a crash between the write and the settle only means the payload is applied again,
 * harmlessly (at-least-once processing).
 *
 * Work goes in rounds: claim a batch in arrival order, process each VIN's items one after another
 * (different VINs side by side under a p-queue bound), settle every outcome at once, then publish.
 * After an item that is to be retried, its VIN's later items in the round go back untried. A
 * backend that can make a round one unit of work (`unitOfWork`: the SQLite processing thread runs
 * it as one transaction on its own connection) pays one commit per round instead of one per
 * payload. Between rounds the worker yields to the event loop, so a synchronous store never holds
 * requests back for longer than one round. Processed payloads are purged after `retentionMs`.
 */
import PQueue from 'p-queue';
import type { Clock } from './clock.ts';
import type { IntakeOutcome, IntakeQueue, IntakeRecord } from './intake-queue.ts';
import { liveEventOf, type LiveTrailerEvent } from './live-hub.ts';
import type { ProductRegistry } from './products.ts';
import type { TelemetryWriteStore } from './store.ts';

export interface IntakeWorkerOptions {
  /** Payloads processed at once within a round (matters for a store with real I/O). Default 8. */
  concurrency?: number;
  /** Payloads claimed per round. Default 64. */
  batchSize?: number;
  /** Attempts before a payload is dead-lettered. Default 5. */
  maxAttempts?: number;
  /** First retry delay, doubled each attempt. Default 1000 ms. */
  retryBaseMs?: number;
  /** How often an idle worker looks for due work (retries come due without a wake-up). Default 250 ms. */
  idlePollMs?: number;
  /** How long processed payloads (and their status) are kept; at least 24 h (idempotency). Default 24 h. */
  retentionMs?: number;
}

/** Runs one round (claim, writes, settle) as one unit, or fails it as a whole. */
export type UnitOfWork = <T>(round: () => Promise<T>) => Promise<T>;

export interface IntakeWorkerDependencies {
  queue: IntakeQueue;
  store: TelemetryWriteStore;
  products: ProductRegistry;
  clock: Clock;
  /** Where live updates go (the live hub's publish). */
  publish?: (event: LiveTrailerEvent) => Promise<void> | void;
  /** Makes each round one unit of work. Default: none (every write commits on its own). */
  unitOfWork?: UnitOfWork;
  /**
   * Asked between payloads: true ends the round early, its untried payloads going back to the
   * queue (a unit of work that holds a lock others wait for). Default: never.
   */
  shouldYield?: () => boolean;
  /** Told about each failed attempt (for the log). */
  onAttemptFailed?: (record: IntakeRecord, error: unknown, deadLettered: boolean) => void;
  /** Told when a live update could not be published (the payload stays processed). */
  onPublishFailed?: (event: LiveTrailerEvent, error: unknown) => void;
  /** Told when a round failed as a whole (its payloads stay queued and are claimed again). */
  onRoundFailed?: (error: unknown) => void;
  /** Told after each committed round that claimed something, once its live updates are published. */
  onRound?: (summary: { claimed: number; processed: number; retried: number; failed: number }) => void;
}

export const DEFAULT_INTAKE_WORKER_OPTIONS: Required<IntakeWorkerOptions> = {
  concurrency: 8,
  batchSize: 64,
  maxAttempts: 5,
  retryBaseMs: 1000,
  idlePollMs: 250,
  retentionMs: 24 * 60 * 60 * 1000,
};

const PURGE_EVERY_MS = 60_000;
const PURGE_BATCH = 1000;

/** Checks worker options, naming the first bad field, and fills in the defaults. */
export function resolveIntakeWorkerOptions(options: IntakeWorkerOptions = {}): Required<IntakeWorkerOptions> {
  const settings = { ...DEFAULT_INTAKE_WORKER_OPTIONS, ...withoutUndefined(options) };
  for (const [field, value] of Object.entries(settings))
    if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`IntakeWorker: \`${field}\` must be a positive integer, got ${String(value)}`);
  if (settings.retentionMs < DEFAULT_INTAKE_WORKER_OPTIONS.retentionMs)
    throw new TypeError(`IntakeWorker: \`retentionMs\` must be at least 24 h (the idempotency window), got ${settings.retentionMs}`);
  return settings;
}

export class IntakeWorker {
  private readonly settings: Required<IntakeWorkerOptions>;
  private readonly pool: PQueue;
  private readonly unitOfWork: UnitOfWork;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** A notify that came while the worker was busy: the next idle wait is skipped, so it is not lost. */
  private notified = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private lastPurgeAt = Number.NEGATIVE_INFINITY;
  /** Outcomes whose settle failed: their payloads are written but still `processing`, so settle them first. */
  private unsettled: IntakeOutcome[] = [];
  private processedCount = 0;
  private failedCount = 0;

  constructor(
    private readonly deps: IntakeWorkerDependencies,
    options: IntakeWorkerOptions = {},
  ) {
    this.settings = resolveIntakeWorkerOptions(options);
    this.pool = new PQueue({ concurrency: this.settings.concurrency });
    this.unitOfWork = deps.unitOfWork ?? ((round) => round());
  }

  /** Takes up work a crash left in flight, then processes until `stop`. */
  async start(): Promise<void> {
    if (this.running) return;
    await this.deps.queue.recoverInFlight();
    this.running = true;
    this.loop = this.run();
  }

  /** Finishes the round in hand and stops claiming; what is still queued stays queued, durably. */
  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    await this.loop;
    await this.pool.onIdle();
  }

  /** Wakes an idle worker at once (called after an enqueue). */
  notify(): void {
    if (this.wake) this.wake();
    else this.notified = true;
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** Payloads processed and dead-lettered by this worker since it started. */
  get counts(): { processed: number; failed: number } {
    return { processed: this.processedCount, failed: this.failedCount };
  }

  /** Processes whatever is due now, round after round, until nothing is; answers how many were claimed. */
  drainDue(): Promise<number> {
    return this.drain(() => true);
  }

  private async drain(keepGoing: () => boolean): Promise<number> {
    let total = 0;
    while (keepGoing()) {
      const claimed = await this.round();
      if (claimed === 0) break;
      total += claimed;
      // Let requests in between rounds: a synchronous store would otherwise hold the event loop.
      await new Promise((resolve) => setImmediate(resolve));
    }
    return total;
  }

  private async run(): Promise<void> {
    while (this.running) {
      this.notified = false;
      const claimed = await this.drain(() => this.running).catch((error: unknown) => {
        this.deps.onRoundFailed?.(error);
        return 0;
      });
      await this.purgeIfDue();
      // A payload enqueued after the last claim read the queue must not wait for the idle poll.
      if (claimed > 0 || this.notified || !this.running) continue;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.idleTimer = setTimeout(resolve, this.settings.idlePollMs);
      });
      clearTimeout(this.idleTimer);
      this.wake = undefined;
    }
  }

  /** One round: claim, process, settle (one unit of work where the backend can), then publish. */
  private async round(): Promise<number> {
    const { queue, clock } = this.deps;
    if (this.unsettled.length > 0) {
      await queue.settle(this.unsettled);
      this.unsettled = [];
    }
    const done = await this.unitOfWork(async () => {
      const batch = await queue.claim(this.settings.batchSize, clock.now());
      const results = new Array<Processed>(batch.length);
      // A VIN's items one after another, in order; different VINs side by side under the pool's bound.
      await Promise.all(
        [...chainsByVin(batch)].map((chain) =>
          this.pool.add(async () => {
            let held = false;
            for (const index of chain) {
              const record = batch[index]!;
              // After an item to be retried, the VIN's later items wait for it: back to the queue untried.
              held ||= this.deps.shouldYield?.() === true;
              results[index] = held ? { outcome: { id: record.id, kind: 'released' }, event: null } : await this.process(record);
              if (results[index].outcome.kind === 'retry') held = true;
            }
          }),
        ),
      );
      const outcomes = results.map((result) => result.outcome);
      try {
        await queue.settle(outcomes);
      } catch (error) {
        // Claimed and written, but not settled: without this the payloads would stay `processing`
        // until the next start-up. A unit of work rolls the whole round back instead (writes
        // included), so its payloads are simply claimed again and must not be settled later.
        if (!this.deps.unitOfWork) this.unsettled = outcomes;
        throw error;
      }
      return results;
    });
    if (done.length === 0) return 0;
    // Only once the round is committed: counts, then live updates, in the order of the round.
    const summary = { claimed: done.length, processed: 0, retried: 0, failed: 0 };
    for (const { outcome } of done) {
      if (outcome.kind === 'processed') summary.processed++;
      else if (outcome.kind === 'failed') summary.failed++;
      else summary.retried++;
    }
    this.processedCount += summary.processed;
    this.failedCount += summary.failed;
    await Promise.all(done.map(({ event }) => (event ? this.publish(event) : undefined)));
    this.deps.onRound?.(summary);
    return done.length;
  }

  private async process(record: IntakeRecord): Promise<Processed> {
    const { store, products, clock } = this.deps;
    try {
      const telemetry = products.transform(record.product, record.vin, JSON.parse(record.payload), record.receivedAt);
      const at = clock.now();
      const applied = await store.applyTelemetry({ vin: record.vin, at, telemetry });
      return { outcome: { id: record.id, kind: 'processed', at }, event: liveEventOf(applied, at) };
    } catch (error) {
      const deadLettered = record.attempts >= this.settings.maxAttempts;
      this.deps.onAttemptFailed?.(record, error, deadLettered);
      const reason = reasonOf(error);
      const now = clock.now();
      const outcome: IntakeOutcome = deadLettered
        ? { id: record.id, kind: 'failed', error: reason, at: now }
        : { id: record.id, kind: 'retry', error: reason, nextAttemptAt: now + this.settings.retryBaseMs * 2 ** (record.attempts - 1) };
      return { outcome, event: null };
    }
  }

  // The payload is processed whatever happens to its live update; a bus failure is not a retry.
  private async publish(event: LiveTrailerEvent): Promise<void> {
    if (!this.deps.publish) return;
    try {
      await this.deps.publish(event);
    } catch (error) {
      this.deps.onPublishFailed?.(event, error);
    }
  }

  private async purgeIfDue(): Promise<void> {
    const now = this.deps.clock.now();
    if (now - this.lastPurgeAt < PURGE_EVERY_MS) return;
    this.lastPurgeAt = now;
    try {
      // In slices, so that a long backlog of old rows never holds the store for long.
      while ((await this.deps.queue.purgeProcessed(now - this.settings.retentionMs, PURGE_BATCH)) === PURGE_BATCH)
        await new Promise((resolve) => setImmediate(resolve));
    } catch (error) {
      this.deps.onRoundFailed?.(error);
    }
  }
}

interface Processed {
  outcome: IntakeOutcome;
  event: LiveTrailerEvent | null;
}

/** The positions of a claim's items grouped by VIN, each group in claim (arrival) order. */
function chainsByVin(batch: readonly IntakeRecord[]): Iterable<number[]> {
  const chains = new Map<string, number[]>();
  batch.forEach((record, index) => {
    const chain = chains.get(record.vin);
    if (chain) chain.push(index);
    else chains.set(record.vin, [index]);
  });
  return chains.values();
}

function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > 1000 ? `${message.slice(0, 1000)}…` : message;
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
