/**
 * The webhook deliverer (contract 14): takes what the outbox holds to the customers' endpoints.
 * Each round it leases the endpoints with due work that no other process holds (the store's lease,
 * so on a shared PostgreSQL each delivery is sent by one process), and for each one, concurrently,
 * takes its pending delivery or forms one of up to `maxEvents` events, sends it, records the outcome
 * and lets the lease go.
 *
 * - Batching, as a Kafka producer with `linger.ms=0` and one request in flight (or Nagle's
 *   algorithm) does it: an endpoint with nothing in flight is sent what waits at once, so at a light
 *   load an event goes out alone, some milliseconds after it was processed; while a delivery is in
 *   flight the endpoint's new events gather, and the next delivery takes up to `maxEvents` of them
 *   the moment it settles, so under load deliveries fill by themselves. At 500 updates/s over 100
 *   endpoints the p99 from the 202 to the receiver was 37 ms, against 1,212 ms with a 1 s linger
 *   (docs/performance.md, "Issue 40: webhook delivery"). `lingerMs` above 0 holds an idle
 *   endpoint's first event up to that long for more (fewer, fuller requests, for a receiver that
 *   prefers them); it is the longest the deliverer itself holds an event back, never a wait added
 *   to a busy endpoint's.
 * - Order: an endpoint has one delivery in flight at most and the next is formed only once it is
 *   delivered, so every trailer's events arrive in order; a retry sends the same body with the same
 *   `webhook-id`.
 * - Retries: exponential backoff from `retryFirstMs` up to `retryMaxMs`, each delay drawn between
 *   half and all of it (jitter, so receivers coming back are not hit by every sender at once), for
 *   `retryPeriodMs` (about 24 h); then the endpoint is `failing` and is sent nothing until resumed.
 * - Isolation: endpoints are sent to concurrently (`concurrency` at once), each by its own task, so
 *   a receiver that never answers holds one slot for the timeout and nothing else; intake never
 *   waits for a delivery (the outbox is written with the batch, the sending happens here).
 */
import type { Clock } from './clock.ts';
import type { WebhookAttemptOutcome, WebhookBatching, WebhookDeliveryStore, WebhookSend, WebhookTarget } from './store.ts';
import type { WebhookPost, WebhookPostResult } from './webhook-sender.ts';

export interface WebhookDelivererOptions {
  /** Events per delivery, at most. Default 100. */
  maxEvents?: number;
  /**
   * How long, at most, an idle endpoint's first event waits for more before a delivery of fewer than
   * `maxEvents` is formed, in ms. Default 0: sent at once; events gather only while a delivery to
   * the endpoint is in flight (see the top).
   */
  lingerMs?: number;
  /** Endpoints sent to at once. Default 64. */
  concurrency?: number;
  /** How long an endpoint's lease lasts (longer than an attempt's timeout), in ms. Default 60,000. */
  leaseMs?: number;
  /**
   * How often an idle deliverer looks for due work it was not woken for (`notify`: processing wakes it), such as a retry
   * coming due or, on a shared database, another process's events, in ms. Default 200.
   */
  pollMs?: number;
  /** The first retry's delay, in ms. Default 5,000. */
  retryFirstMs?: number;
  /** The longest delay between retries, in ms. Default 3,600,000 (1 h). */
  retryMaxMs?: number;
  /** How long a delivery is retried before its endpoint is `failing`, in ms. Default 86,400,000 (24 h). */
  retryPeriodMs?: number;
  /** How long delivered deliveries stay listed, in ms. Default 7 days. */
  retentionMs?: number;
}

export const DEFAULT_WEBHOOK_DELIVERER_OPTIONS: Required<WebhookDelivererOptions> = {
  maxEvents: 100,
  lingerMs: 0,
  concurrency: 64,
  leaseMs: 60_000,
  pollMs: 200,
  retryFirstMs: 5000,
  retryMaxMs: 3_600_000,
  retryPeriodMs: 24 * 60 * 60 * 1000,
  retentionMs: 7 * 24 * 60 * 60 * 1000,
};

/** One attempt, as metrics and the log hear of it. */
export interface WebhookAttemptReport {
  target: Pick<WebhookTarget, 'id' | 'customerId'>;
  delivery: Pick<WebhookSend, 'id' | 'eventCount'>;
  outcome: WebhookAttemptOutcome;
  durationMs: number;
}

export interface WebhookDelivererDependencies {
  store: WebhookDeliveryStore;
  sender: { post(delivery: WebhookPost): Promise<WebhookPostResult> };
  clock: Clock;
  /** This process's name in the leases: unique among the processes sharing the store. */
  owner: string;
  /** New delivery ids (`webhook-id`). */
  newId: () => string;
  /** A number in [0, 1) for the jitter. Default `Math.random`. */
  random?: () => number;
}

const PURGE_EVERY_MS = 10 * 60_000;
const PURGE_BATCH = 1000;

/** Checks the options, naming the first bad field, and fills in the defaults. */
export function resolveWebhookDelivererOptions(options: WebhookDelivererOptions = {}): Required<WebhookDelivererOptions> {
  const defined = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
  const settings = { ...DEFAULT_WEBHOOK_DELIVERER_OPTIONS, ...defined };
  for (const [field, value] of Object.entries(settings))
    if (!Number.isSafeInteger(value) || value < (field === 'lingerMs' ? 0 : 1)) throw new TypeError(`WebhookDeliverer: \`${field}\` must be a positive integer, got ${String(value)}`);
  if (settings.maxEvents > 1000) throw new TypeError(`WebhookDeliverer: \`maxEvents\` must be at most 1000, got ${settings.maxEvents}`);
  return settings;
}

/** The delay before retry `attempt` (1 = the first retry): doubling from `firstMs` up to `maxMs`, drawn between half and all of it. */
export function retryDelay(attempt: number, firstMs: number, maxMs: number, random: number): number {
  const full = Math.min(maxMs, firstMs * 2 ** Math.min(attempt - 1, 40));
  return Math.round(full / 2 + (full / 2) * random);
}

export class WebhookDeliverer {
  private readonly settings: Required<WebhookDelivererOptions>;
  private readonly batching: WebhookBatching;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private woken = false;
  private lastPurgeAt = Number.NEGATIVE_INFINITY;
  private readonly attemptListeners = new Set<(report: WebhookAttemptReport) => void>();
  private readonly errorListeners = new Set<(error: unknown) => void>();

  constructor(
    private readonly deps: WebhookDelivererDependencies,
    options: WebhookDelivererOptions = {},
  ) {
    this.settings = resolveWebhookDelivererOptions(options);
    this.batching = { maxEvents: this.settings.maxEvents, lingerMs: this.settings.lingerMs, newId: deps.newId };
  }

  get options(): Readonly<Required<WebhookDelivererOptions>> {
    return this.settings;
  }

  /** Tells `listener` of every attempt (metrics, the log); answers the function that stops it. */
  onAttempt(listener: (report: WebhookAttemptReport) => void): () => void {
    this.attemptListeners.add(listener);
    return () => this.attemptListeners.delete(listener);
  }

  /** Tells `listener` of a failed store call (the work stays where it was and is taken again). */
  onError(listener: (error: unknown) => void): () => void {
    this.errorListeners.add(listener);
    return () => this.errorListeners.delete(listener);
  }

  private reportError(error: unknown): void {
    for (const listener of this.errorListeners) listener(error);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops leasing; the attempts in flight finish (each within the sender's timeout). */
  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    await this.loop;
    await Promise.all(this.inFlight);
  }

  /** Looks for work at once (new events in the outbox). */
  notify(): void {
    this.woken = true;
    this.wake?.();
  }

  /** Claims and sends until nothing is due, then waits for the sends; for tests and one-off runs. */
  async drainDue(): Promise<void> {
    for (;;) {
      const started = await this.claimAndSend();
      await Promise.all(this.inFlight);
      if (started === 0) return;
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      this.woken = false;
      const started = await this.claimAndSend().catch((error: unknown) => {
        this.reportError(error);
        return 0;
      });
      await this.purgeIfDue();
      if (started > 0 && this.inFlight.size < this.settings.concurrency) continue;
      await this.pause();
    }
  }

  private async pause(): Promise<void> {
    if (!this.running || this.woken) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.wake = resolve;
      timer = setTimeout(resolve, this.settings.pollMs);
    });
    clearTimeout(timer);
    this.wake = undefined;
  }

  /** Leases what the free slots can take and starts a send for each; answers how many started. */
  private async claimAndSend(): Promise<number> {
    const free = this.settings.concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    const { store, clock, owner } = this.deps;
    const targets = await store.claimWebhookEndpoints(owner, clock.now(), this.settings.leaseMs, free, this.batching);
    for (const target of targets) {
      const task = this.deliver(target).finally(() => {
        this.inFlight.delete(task);
        // A slot is free, and the endpoint may have more to send.
        this.notify();
      });
      this.inFlight.add(task);
    }
    return targets.length;
  }

  /** One delivery to a leased endpoint, then the lease goes. */
  private async deliver(target: WebhookTarget): Promise<void> {
    const { store, clock, owner, sender } = this.deps;
    try {
      const send = await store.takeWebhookDelivery(target.id, clock.now(), this.batching);
      if (send === null) return;
      const startedAt = clock.now();
      const result = await sender.post({ url: target.url, secret: target.secret, id: send.id, body: send.body, at: startedAt });
      const at = clock.now();
      const outcome = this.outcomeOf(send, result, at);
      await store.settleWebhookDelivery(target.id, send.id, outcome);
      const report = { target, delivery: send, outcome, durationMs: at - startedAt };
      for (const listener of this.attemptListeners) listener(report);
    } catch (error) {
      this.reportError(error);
    } finally {
      await store.releaseWebhookEndpoint(target.id, owner).catch((error: unknown) => this.reportError(error));
    }
  }

  private outcomeOf(send: WebhookSend, result: WebhookPostResult, at: number): WebhookAttemptOutcome {
    if (result.delivered) return { kind: 'delivered', at, status: result.status };
    const { status, error } = result;
    if (at - send.createdAt >= this.settings.retryPeriodMs) return { kind: 'failing', at, status, error };
    const delay = retryDelay(send.attempts + 1, this.settings.retryFirstMs, this.settings.retryMaxMs, (this.deps.random ?? Math.random)());
    return { kind: 'retry', at, status, error, nextAttemptAt: at + delay };
  }

  private async purgeIfDue(): Promise<void> {
    const now = this.deps.clock.now();
    if (now - this.lastPurgeAt < PURGE_EVERY_MS) return;
    this.lastPurgeAt = now;
    try {
      while ((await this.deps.store.purgeWebhookDeliveries(now - this.settings.retentionMs, PURGE_BATCH)) === PURGE_BATCH)
        await new Promise((resolve) => setImmediate(resolve));
    } catch (error) {
      this.reportError(error);
    }
  }
}
