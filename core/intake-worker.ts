/**
 * Intake processing (contract 4): workers claim queued payloads (in order per VIN), run the
 * product's transform, write the canonical records with the store's one idempotent write, mark the
 * payload processed and publish the trailer's new state to the live hub. A payload whose transform
 * or write throws is retried with exponential backoff, then dead-lettered as `failed` with the
 * reason; it never holds its VIN's later payloads back after that. Because the write is idempotent,
 * a crash between the write and `complete` only means the payload is applied again, harmlessly.
 *
 * Claims come in batches (at most one item per VIN each), processed concurrently under a p-queue
 * bound; between batches the loop yields to the event loop so the HTTP path stays responsive while
 * a synchronous store writes.
 */
import PQueue from 'p-queue';
import type { Clock } from './clock.ts';
import type { IntakeQueue, IntakeRecord } from './intake-queue.ts';
import { liveEventOf, type LiveTrailerEvent } from './live-hub.ts';
import type { ProductRegistry } from './products.ts';
import type { TelemetryWriteStore } from './store.ts';

export interface IntakeWorkerOptions {
  /** Payloads processed at once. Default 8. */
  concurrency?: number;
  /** Payloads claimed per batch. Default 64. */
  batchSize?: number;
  /** Attempts before a payload is dead-lettered. Default 5. */
  maxAttempts?: number;
  /** First retry delay, doubled each attempt. Default 1000 ms. */
  retryBaseMs?: number;
  /** How often an idle worker looks for due work (retries come due without a wake-up). Default 250 ms. */
  idlePollMs?: number;
}

export interface IntakeWorkerDependencies {
  queue: IntakeQueue;
  store: TelemetryWriteStore;
  products: ProductRegistry;
  clock: Clock;
  /** Where live updates go (the live hub's publish). */
  publish?: (event: LiveTrailerEvent) => Promise<void> | void;
  /** Told about each failed attempt (for the log). */
  onAttemptFailed?: (record: IntakeRecord, error: unknown, deadLettered: boolean) => void;
  /** Told when a live update could not be published (the payload stays processed). */
  onPublishFailed?: (event: LiveTrailerEvent, error: unknown) => void;
}

const DEFAULTS: Required<IntakeWorkerOptions> = { concurrency: 8, batchSize: 64, maxAttempts: 5, retryBaseMs: 1000, idlePollMs: 250 };

export class IntakeWorker {
  private readonly settings: Required<IntakeWorkerOptions>;
  private readonly pool: PQueue;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private processedCount = 0;
  private failedCount = 0;

  constructor(
    private readonly deps: IntakeWorkerDependencies,
    options: IntakeWorkerOptions = {},
  ) {
    this.settings = { ...DEFAULTS, ...options };
    for (const [field, value] of Object.entries(this.settings))
      if (!Number.isInteger(value) || value < 1) throw new TypeError(`IntakeWorker: \`${field}\` must be a positive integer, got ${value}`);
    this.pool = new PQueue({ concurrency: this.settings.concurrency });
  }

  /** Takes up work a crash left in flight, then processes until `stop`. */
  async start(): Promise<void> {
    if (this.running) return;
    await this.deps.queue.recoverInFlight();
    this.running = true;
    this.loop = this.run();
  }

  /** Finishes the payloads in hand and stops claiming. */
  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    await this.loop;
    await this.pool.onIdle();
  }

  /** Wakes an idle worker at once (called after an enqueue). */
  notify(): void {
    this.wake?.();
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** Payloads processed and dead-lettered by this worker since it started. */
  get counts(): { processed: number; failed: number } {
    return { processed: this.processedCount, failed: this.failedCount };
  }

  /** Processes whatever is due now, batch after batch, until nothing is; answers how many were claimed. */
  async drainDue(): Promise<number> {
    let total = 0;
    for (;;) {
      const batch = await this.deps.queue.claim(this.settings.batchSize, this.deps.clock.now());
      if (batch.length === 0) return total;
      total += batch.length;
      await Promise.all(batch.map((record) => this.pool.add(() => this.process(record))));
      // Let requests in between batches: a synchronous store would otherwise hold the loop.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      const claimed = await this.drainDue();
      if (claimed > 0 || !this.running) continue;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.idleTimer = setTimeout(resolve, this.settings.idlePollMs);
      });
      clearTimeout(this.idleTimer);
      this.wake = undefined;
    }
  }

  private async process(record: IntakeRecord): Promise<void> {
    const { queue, store, products, clock, publish } = this.deps;
    let event: LiveTrailerEvent | null;
    try {
      const telemetry = products.transform(record.product, record.vin, JSON.parse(record.payload), record.receivedAt);
      const at = clock.now();
      const applied = await store.applyTelemetry({ vin: record.vin, at, telemetry });
      await queue.complete(record.id, at);
      this.processedCount++;
      event = liveEventOf(applied, at);
    } catch (error) {
      const deadLettered = record.attempts >= this.settings.maxAttempts;
      const reason = error instanceof Error ? error.message : String(error);
      this.deps.onAttemptFailed?.(record, error, deadLettered);
      if (deadLettered) {
        this.failedCount++;
        await queue.fail(record.id, reason, clock.now());
      } else {
        await queue.retryLater(record.id, reason, clock.now() + this.settings.retryBaseMs * 2 ** (record.attempts - 1));
      }
      return;
    }
    // The payload is processed whatever happens to its live update; a bus failure is not a retry.
    if (event && publish) {
      try {
        await publish(event);
      } catch (error) {
        this.deps.onPublishFailed?.(event, error);
      }
    }
  }
}
