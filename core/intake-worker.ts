/**
 * Intake processing (contract 4): the worker reads the intake log a batch at a time, runs each
 * payload's product transform, writes the whole batch's canonical records with one store call,
 * commits the batch's outcomes (and so the log's watermark) at once, and then publishes one live
 * update per changed trailer.
 *
 * Order. A batch holds each VIN's payloads in log order, and no other batch holds that VIN, so
 * applying the batch's items in order keeps every VIN's order. When one payload of a VIN is to be
 * retried, the VIN's later payloads of the batch are held behind it (the queue keeps holding the
 * VIN's newer payloads until the retry is done); a dead letter holds nothing back.
 *
 * Failures. One store call writes the batch, all or nothing. When it throws, the worker finds the
 * culprit instead of failing everyone: each VIN's items alone, then, within a VIN that still fails,
 * payload by payload. A failure of the store itself (`store_unavailable`: a full or failing disk) blames
 * no payload: the round is abandoned and its batch taken again later. A payload whose transform or write throws is retried with exponential backoff,
 * then dead-lettered as `failed` with the reason. A payload dated more than `MAX_READING_LEAD_MS`
 * after it was received is dead-lettered at once: a clock that is wrong stays wrong on a retry. So is
 * a payload whose VIN's owner, as of processing, does not take intake from its partner
 * (`refusedByGrants` in `partner-intake-rules.ts`): nothing of it is written.
 *
 * Durability. The store's writes are idempotent (a repeated reading changes nothing), so a crash
 * between the writes and the commit only means the batch is applied again, harmlessly
 * (at-least-once). A queue that can make the batch one transaction with the writes (SQLite) pays
 * one commit per batch. Between batches the worker yields to the event loop, so a synchronous store
 * never holds requests back for longer than one batch. Processed payloads are trimmed after
 * `retentionMs`.
 */
import { type CanonicalTelemetry, isAheadOfClock, MAX_READING_LEAD_MS } from './canonical.ts';
import type { Clock } from './clock.ts';
import { isTrailwireError } from './errors.ts';
import { type GrantsAtProcessing, refusedByGrants } from './partner-intake-rules.ts';
import type { IntakeBatch, IntakeEntry, IntakeOutcome, IntakeProcessing } from './intake-queue.ts';
import { liveEventOf, type LiveTrailerEvent } from './live-bus.ts';
import type { ProductRegistry } from './products.ts';
import type { AppliedTelemetry, TelemetryBatch, TelemetryWriteStore } from './store.ts';

export interface IntakeWorkerOptions {
  /** Payloads per batch: one store call and one commit each. Default 512. */
  batchSize?: number;
  /** Attempts before a payload is dead-lettered. Default 5. */
  maxAttempts?: number;
  /** First retry delay, doubled each attempt. Default 1000 ms. */
  retryBaseMs?: number;
  /** How often an idle worker looks for due work (retries come due without a wake-up). Default 250 ms. */
  idlePollMs?: number;
  /**
   * The longest the worker lets payloads gather before a batch that would not be full, in ms: most
   * of a batch's cost (its commit above all) is paid per batch, so under load a wait makes the
   * batches, and the throughput, several times larger. The wait is this long once the last batch held
   * `LINGER_FULL_AT` payloads or more, and shorter in proportion below that (at least 1 ms), so that
   * a light load is not held for batches it cannot fill. 0 reads at once. Default 20.
   */
  lingerMs?: number;
  /** How long processed payloads (and their status) are kept; at least 24 h (idempotency). Default 24 h. */
  retentionMs?: number;
}

export interface IntakeWorkerDependencies {
  queue: IntakeProcessing;
  store: TelemetryWriteStore;
  products: ProductRegistry;
  clock: Clock;
  /**
   * The partner grants, checked again as of processing (`refusedByGrants` in
   * `partner-intake-rules.ts`). Every composition that serves partners passes them; without them (a
   * bench, a test of something else) no payload is refused for its partner.
   */
  grants?: GrantsAtProcessing;
  /** Where live updates go (the live hub's publish). */
  publish?: (event: LiveTrailerEvent) => Promise<void> | void;
  /** Told about each failed attempt (for the log); `attempt` counts from 1. */
  onAttemptFailed?: (entry: IntakeEntry, attempt: number, error: unknown, deadLettered: boolean) => void;
  /** Told when a live update could not be published (the payload stays processed). */
  onPublishFailed?: (event: LiveTrailerEvent, error: unknown) => void;
  /** Told when a batch failed as a whole (its payloads stay queued and are handed out again). */
  onRoundFailed?: (error: unknown) => void;
  /** Told after each committed batch, once its live updates are published. */
  onRound?: (summary: RoundSummary) => void;
}

export interface RoundSummary {
  batched: number;
  processed: number;
  retried: number;
  failed: number;
  held: number;
}

/**
 * The log line of a failed attempt (`onAttemptFailed`), the same wherever a worker runs (the
 * server's event loop, SQLite's processing thread): a retry or a dead letter, with the payload's id,
 * VIN, product, attempts and reason.
 */
export function failedAttemptLine(entry: IntakeEntry, attempt: number, error: unknown, deadLettered: boolean) {
  return {
    level: 'warn' as const,
    message: deadLettered ? 'intake payload dead-lettered' : 'intake payload failed; retrying later',
    intakeId: entry.id,
    vin: entry.vin,
    product: entry.product,
    attempts: attempt,
    reason: error instanceof Error ? error.message : String(error),
  };
}

/** What the log says of a failed batch (`onRoundFailed`): its payloads are handed out again. */
export const ROUND_FAILED_MESSAGE = 'an intake round failed; its payloads stay queued';

export const DEFAULT_INTAKE_WORKER_OPTIONS: Required<IntakeWorkerOptions> = {
  batchSize: 512,
  maxAttempts: 5,
  retryBaseMs: 1000,
  idlePollMs: 250,
  lingerMs: 20,
  retentionMs: 24 * 60 * 60 * 1000,
};

const PURGE_EVERY_MS = 60_000;
const PURGE_BATCH = 1000;

/** Checks worker options, naming the first bad field, and fills in the defaults. */
export function resolveIntakeWorkerOptions(options: IntakeWorkerOptions = {}): Required<IntakeWorkerOptions> {
  const settings = { ...DEFAULT_INTAKE_WORKER_OPTIONS, ...withoutUndefined(options) };
  for (const [field, value] of Object.entries(settings))
    if (!Number.isSafeInteger(value) || value < (field === 'lingerMs' ? 0 : 1)) throw new TypeError(`IntakeWorker: \`${field}\` must be a positive integer, got ${String(value)}`);
  if (settings.retentionMs < DEFAULT_INTAKE_WORKER_OPTIONS.retentionMs)
    throw new TypeError(`IntakeWorker: \`retentionMs\` must be at least 24 h (the idempotency window), got ${settings.retentionMs}`);
  return settings;
}

/** A payload dated beyond the allowed lead: dead-lettered at once, since a retry cannot fix a clock. */
export class FutureReadingError extends Error {
  constructor(timestamp: number, receivedAt: number) {
    super(
      `a reading is dated ${new Date(timestamp).toISOString()}, more than ${MAX_READING_LEAD_MS / 60_000} minutes after the payload was received (${new Date(receivedAt).toISOString()})`,
    );
    this.name = 'FutureReadingError';
  }
}

/**
 * A batch of this many payloads or more earns the next one the whole `lingerMs`. With a fixed 20 ms
 * wait, a light load (LiveFeed's 500 updates a second) waited 20 ms for batches of ten: 202→stream p99
 * 50.9 ms, 33 ms with 5 ms; under the intake bench's load (15,000 a second) a 5 ms wait cost 5 µs of
 * processing per payload more than 20 ms (`npm run bench -- livefeed`, `npm run bench -- intake`).
 * Scaled by the last batch, the wait grows with the load: above about 6,000 payloads a second
 * (128 per 20 ms) each batch earns the next a longer wait, up to the whole linger.
 */
export const LINGER_FULL_AT = 128;

/** The wait before the next batch after one of `batched` payloads: `lingerMs` in proportion to `LINGER_FULL_AT`, at least 1 ms, at most `lingerMs`; 0 when that is 0. */
export function lingerAfter(batched: number, lingerMs: number): number {
  if (lingerMs === 0) return 0;
  return Math.max(1, Math.min(lingerMs, Math.round((lingerMs * batched) / LINGER_FULL_AT)));
}

export class IntakeWorker {
  private readonly settings: Required<IntakeWorkerOptions>;
  /** Payloads in the last batch read (0 after an idle wait): how long the next one may gather (`lingerAfterLastBatch`). */
  private lastBatched = 0;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** A notify that came while the worker was busy: the next idle wait is skipped, so it is not lost. */
  private notified = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private lastPurgeAt = Number.NEGATIVE_INFINITY;
  private processedCount = 0;
  private failedCount = 0;

  constructor(
    private readonly deps: IntakeWorkerDependencies,
    options: IntakeWorkerOptions = {},
  ) {
    this.settings = resolveIntakeWorkerOptions(options);
  }

  /** Processes until `stop`. Nothing needs recovering first: a batch in hand at a crash was never committed. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Finishes the batch in hand and stops; what is still queued stays queued, durably. */
  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    await this.loop;
  }

  /** Wakes an idle worker at once (called after an enqueue). */
  notify(): void {
    this.notified = true;
    this.wake?.();
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** Payloads processed and dead-lettered by this worker since it started. */
  get counts(): { processed: number; failed: number } {
    return { processed: this.processedCount, failed: this.failedCount };
  }

  /** Processes whatever is due now, batch after batch, until nothing is; answers how many payloads were batched. */
  drainDue(): Promise<number> {
    return this.drain(() => true);
  }

  private async drain(keepGoing: () => boolean, linger = false): Promise<number> {
    let total = 0;
    while (keepGoing()) {
      const batched = await this.round();
      this.lastBatched = batched;
      if (batched === 0) break;
      total += batched;
      // Let requests in between batches: a synchronous store would otherwise hold the event loop.
      // After a batch that was not full, let the next one gather.
      if (linger && batched < this.settings.batchSize) await this.pause(this.lingerAfterLastBatch(), false);
      else await new Promise((resolve) => setImmediate(resolve));
    }
    return total;
  }

  private async run(): Promise<void> {
    while (this.running) {
      this.notified = false;
      const batched = await this.drain(() => this.running, true).catch((error: unknown) => {
        this.deps.onRoundFailed?.(error);
        return 0;
      });
      await this.purgeIfDue();
      // A payload appended after the last batch read the log must not wait for the idle poll.
      if (batched > 0 || this.notified || !this.running) continue;
      await this.pause(this.settings.idlePollMs, true);
      // Woken by an append: let its neighbours arrive before reading them in one batch.
      this.lastBatched = 0;
      if (this.running && this.notified) await this.pause(this.lingerAfterLastBatch(), false);
    }
  }

  private lingerAfterLastBatch(): number {
    return lingerAfter(this.lastBatched, this.settings.lingerMs);
  }

  /** Waits `ms`, or less when `wakeable` and `notify` (or `stop`) comes first. */
  private async pause(ms: number, wakeable: boolean): Promise<void> {
    if (ms === 0 || !this.running || (wakeable && this.notified)) return;
    await new Promise<void>((resolve) => {
      if (wakeable) this.wake = resolve;
      this.idleTimer = setTimeout(resolve, ms);
    });
    clearTimeout(this.idleTimer);
    if (wakeable) this.wake = undefined;
  }

  /** One batch: transform, write, commit, then publish. Answers how many payloads it held. */
  private async round(): Promise<number> {
    const { queue, clock } = this.deps;
    const batch = await queue.nextBatch(this.settings.batchSize, clock.now());
    if (!batch) return 0;
    let result: { outcomes: Map<number, IntakeOutcome>; applied: Map<string, AppliedTelemetry>; at: number };
    try {
      result = await this.process(batch);
      // The processed time of every payload of the batch is the time its live updates carry.
      await queue.commitBatch(batch, result.outcomes, result.at);
    } catch (error) {
      await queue.abandonBatch(batch).catch(() => {});
      throw error;
    }
    // Only once the batch is committed: counts, then one live update per changed trailer.
    const summary: RoundSummary = { batched: batch.entries.length, processed: 0, retried: 0, failed: 0, held: 0 };
    for (const outcome of result.outcomes.values()) {
      if (outcome.kind === 'processed') summary.processed++;
      else if (outcome.kind === 'failed') summary.failed++;
      else if (outcome.kind === 'retry') summary.retried++;
      else summary.held++;
    }
    this.processedCount += summary.processed;
    this.failedCount += summary.failed;
    // Published side by side, in order: a bus on one connection (Redis) sends them in this order
    // without waiting for each answer, so a batch of a customer-owned fleet costs about one round trip,
    // not one per trailer (issue 41: 400 trailers a batch, one after the other, kept processing behind).
    const events = [...result.applied.values()].map((applied) => liveEventOf(applied, result.at)).filter((event) => event !== null);
    await Promise.all(events.map((event) => this.publish(event)));
    this.deps.onRound?.(summary);
    return batch.entries.length;
  }

  /** Transforms every payload, writes what transformed, and answers each payload's outcome. */
  private async process(batch: IntakeBatch) {
    const at = this.deps.clock.now();
    const outcomes = new Map<number, IntakeOutcome>();
    /** VINs whose payload is to be retried: their later payloads wait behind it. */
    const blocked = new Set<string>();
    const items: Array<{ entry: IntakeEntry; item: TelemetryBatch }> = [];
    const refused = this.deps.grants ? await refusedByGrants(this.deps.grants, batch.entries) : NOTHING_REFUSED;
    for (const entry of batch.entries) {
      if (blocked.has(entry.vin)) {
        outcomes.set(entry.seq, { kind: 'held' });
        continue;
      }
      const refusal = refused.get(entry.seq);
      if (refusal !== undefined) {
        this.deps.onAttemptFailed?.(entry, entry.attempts + 1, new Error(refusal), true);
        outcomes.set(entry.seq, { kind: 'failed', error: refusal });
        continue;
      }
      try {
        items.push({ entry, item: { vin: entry.vin, at, telemetry: this.transform(entry) } });
      } catch (error) {
        this.recordFailure(entry, error, at, outcomes, blocked);
      }
    }
    const applied = await this.write(items, at, outcomes, blocked);
    return { outcomes, applied, at };
  }

  private transform(entry: IntakeEntry): CanonicalTelemetry {
    const telemetry = this.deps.products.transform(entry.product, entry.vin, JSON.parse(entry.payload), entry.receivedAt);
    for (const reading of [...telemetry.gps, ...telemetry.devices, ...telemetry.cargosafe])
      if (isAheadOfClock(reading.timestamp, entry.receivedAt)) throw new FutureReadingError(reading.timestamp, entry.receivedAt);
    return telemetry;
  }

  /**
   * Writes the items in one store call. When that fails, each VIN's items alone, and within a VIN
   * that still fails, one payload at a time, so that only the culprit fails.
   */
  private async write(
    items: Array<{ entry: IntakeEntry; item: TelemetryBatch }>,
    at: number,
    outcomes: Map<number, IntakeOutcome>,
    blocked: Set<string>,
  ): Promise<Map<string, AppliedTelemetry>> {
    const { store } = this.deps;
    const markProcessed = (written: typeof items) => {
      for (const { entry } of written) outcomes.set(entry.seq, { kind: 'processed' });
    };
    if (items.length === 0) return new Map();
    try {
      const applied = await store.applyTelemetryBatch(items.map(({ item }) => item));
      markProcessed(items);
      return applied;
    } catch (batchError) {
      // The store itself cannot write (a full or failing disk): no payload is to blame, the round fails.
      if (isDependencyFailure(batchError)) throw batchError;
      if (items.length === 1) {
        this.recordFailure(items[0]!.entry, batchError, at, outcomes, blocked);
        return new Map();
      }
    }
    const applied = new Map<string, AppliedTelemetry>();
    for (const vinItems of groupByVin(items)) {
      try {
        for (const [vin, state] of await store.applyTelemetryBatch(vinItems.map(({ item }) => item))) applied.set(vin, state);
        markProcessed(vinItems);
        continue;
      } catch (vinError) {
        if (isDependencyFailure(vinError)) throw vinError;
        // One of this VIN's payloads cannot be written: find which, in order.
      }
      for (const { entry, item } of vinItems) {
        if (blocked.has(entry.vin)) {
          outcomes.set(entry.seq, { kind: 'held' });
          continue;
        }
        try {
          for (const [vin, state] of await store.applyTelemetryBatch([item])) applied.set(vin, state);
          outcomes.set(entry.seq, { kind: 'processed' });
        } catch (error) {
          if (isDependencyFailure(error)) throw error;
          this.recordFailure(entry, error, at, outcomes, blocked);
        }
      }
    }
    return applied;
  }

  /** A retry (the VIN's later payloads then wait behind it) or, after the last attempt, a dead letter. */
  private recordFailure(entry: IntakeEntry, error: unknown, now: number, outcomes: Map<number, IntakeOutcome>, blocked: Set<string>): void {
    const attempt = entry.attempts + 1;
    const deadLettered = attempt >= this.settings.maxAttempts || error instanceof FutureReadingError;
    this.deps.onAttemptFailed?.(entry, attempt, error, deadLettered);
    const reason = reasonOf(error);
    if (deadLettered) {
      outcomes.set(entry.seq, { kind: 'failed', error: reason });
      return;
    }
    outcomes.set(entry.seq, { kind: 'retry', error: reason, nextAttemptAt: now + this.settings.retryBaseMs * 2 ** entry.attempts });
    blocked.add(entry.vin);
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

const NOTHING_REFUSED: ReadonlyMap<number, string> = new Map();

/** Items grouped by VIN, each group in batch (log) order. */
function groupByVin<T extends { entry: IntakeEntry }>(items: readonly T[]): Iterable<T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(item.entry.vin);
    if (group) group.push(item);
    else groups.set(item.entry.vin, [item]);
  }
  return groups.values();
}

/**
 * A failure of the store rather than of a payload (contract 6: `store_unavailable`): retrying or
 * dead-lettering the payloads would blame them for a full disk; the batch is abandoned whole and
 * taken again once the store writes.
 */
function isDependencyFailure(error: unknown): boolean {
  return isTrailwireError(error) && error.code === 'store_unavailable';
}

function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.length > 1000 ? `${message.slice(0, 1000)}…` : message;
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
