/**
 * Operator changes on the LiveFeed (contract 8): deactivating a device, switching a trailer off or
 * on, assigning a trailer to a fleet — every change of a trailer's status or fleet reaches the
 * subscribers, as intake's changes do. An operator command often runs in another process than the
 * server (`trailwire devices deactivate` beside `trailwire serve` on one SQLite file), with no bus
 * between them, so the change travels through the store they share: `AdminService` notes each change
 * in the store's change feed (`TrailerChangeStore`), and every serving process reads the feed
 * (`TrailerChangeFeed`, every `pollMs`) and hands each change to its own hub's subscribers. Each
 * process delivers locally rather than publishing on the live bus: every process reads the feed, so
 * publishing would tell each subscriber once per process. A change made in this process wakes the
 * feed at once; another process's change is heard within `pollMs` (one indexed read per poll).
 * When the bus keeps a replay window, every change must have a position in it too: the hub then
 * publishes it on the bus once for all processes (keyed by the change's sequence number), rather
 * than delivering it here (`LiveHub#deliverHere`).
 */
import type { Clock } from './clock.ts';
import { type LiveHub } from './live-hub.ts';
import { liveEventOf } from './live-bus.ts';
import type { TrailerChange, TrailerChangeStore } from './store.ts';

/** `createTrailwire`'s `operatorChanges` option. */
export interface OperatorChangeOptions {
  /** How often a serving process reads the change feed, in ms: the most another process's change waits. Default 1,000. */
  pollMs?: number;
  /** Told of a failed read of the feed (it is retried at the next poll). Default: ignored; the server passes its logger's warn. */
  onError?: (error: unknown) => void;
}

const DEFAULTS = { pollMs: 1_000, onError: () => {} };
/** Notes read per query; a longer backlog is read in several. */
const BATCH = 100;

/** Reads the store's change feed and delivers each change to this process's LiveFeed subscribers. */
export class TrailerChangeFeed {
  private readonly settings: Required<OperatorChangeOptions>;
  private afterSeq = 0;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> = Promise.resolve();
  private started = false;
  private readonly listeners: Array<(change: TrailerChange) => void> = [];

  constructor(
    private readonly store: TrailerChangeStore,
    private readonly hub: LiveHub,
    private readonly clock: Clock,
    options: OperatorChangeOptions = {},
  ) {
    this.settings = { ...DEFAULTS, ...options };
    if (!Number.isInteger(this.settings.pollMs) || this.settings.pollMs < 1)
      throw new TypeError(`createTrailwire: \`operatorChanges.pollMs\` must be a positive integer, got ${this.settings.pollMs}`);
  }

  /** Starts reading from the feed's current end (older changes were before this process's subscribers). */
  async start(): Promise<void> {
    if (this.started) return;
    this.afterSeq = await this.store.latestTrailerChange();
    this.started = true;
    this.schedule();
  }

  /** Also hands every change read to `listener` (intake's cache of who owns a VIN listens). */
  onChange(listener: (change: TrailerChange) => void): void {
    this.listeners.push(listener);
  }

  /** Reads what is new now; one read at a time, so changes are delivered once and in order. No-op until started. */
  poll(): Promise<void> {
    if (!this.started) return Promise.resolve();
    this.reading = this.reading.then(() => this.readNew()).catch((error: unknown) => this.settings.onError(error));
    return this.reading;
  }

  /** Stops reading; resolves once a read in hand is done. */
  async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    await this.reading;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      void this.poll().then(() => {
        if (this.started) this.schedule();
      });
    }, this.settings.pollMs);
    this.timer.unref();
  }

  private async readNew(): Promise<void> {
    for (;;) {
      const changes = await this.store.trailerChangesAfter(this.afterSeq, BATCH);
      for (const change of changes) {
        this.afterSeq = change.seq;
        for (const listener of this.listeners) listener(change);
        const event = liveEventOf(change, this.clock.now());
        // The change's sequence number in the store names it for every process reading the feed.
        if (event) this.hub.deliverHere(event, `change:${change.seq}`);
      }
      if (changes.length < BATCH || !this.started) return;
    }
  }
}
