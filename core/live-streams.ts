/**
 * The rules every live-update stream follows, whatever carries it (contract 8 for gRPC, contract 12
 * for Server-Sent Events): a heartbeat at once and then every interval; the token's customer's
 * updates from the `LiveHub` with its back-pressure; the stream ends when its token expires or is
 * revoked (its key rotated, its signing key revoked); a customer holds at most
 * `maxStreamsPerCustomer` streams in this process; and on shutdown every stream ends and no new one
 * starts. A transport adapter verifies the token, asks `LiveStreams#open` for a stream, and
 * implements `LiveStreamTransport` (the hub's `LiveSink` writes, a heartbeat, an end with a
 * reason); it calls `drained()` when its buffer empties and `clientGone()` when the client leaves.
 *
 * The per-customer cap counts the hub's subscribers, not this object's streams: every transport of a
 * process subscribes to the same hub, so a gRPC stream and an SSE stream of one customer count
 * against one cap. The count is this process's: N processes behind a balancer admit up to N times
 * the cap (docs/operations.md).
 *
 * What a stream may ask for (issue 32, `LiveStreamRequest`): a snapshot of every trailer it may see
 * first, some fleets or trailers only, and to resume after the last position it received. Such a
 * stream subscribes to the hub *held* before it reads anything, so nothing published meanwhile is
 * lost; it reads the replay after its position (or, when the position left the window, a
 * `resume-reset` signal and a snapshot) and hands that to the subscription as its backlog, which
 * drops what it queued meanwhile that the backlog already covers, by position. A stream that asks
 * for nothing subscribes exactly as before. Heartbeats carry the stream's own position (the last
 * update or snapshot end it was sent, issue 37), never the system's newest: that would tell a quiet
 * customer when and how often other tenants' trailers change.
 */
import type { Clock } from './clock.ts';
import { TrailwireError } from './errors.ts';
import type { LiveHub } from './live-hub.ts';
import type { LiveBacklogItem, LiveFilter, LiveSignal, LiveSink, LiveSubscription } from './live-subscriber.ts';
import { isPosition } from './live-replay.ts';
import type { FixedWindowLimiter, RateLimitState } from './rate-limit.ts';
import type { AccessClaims, TokenService } from './tokens.ts';

/**
 * One stream's wire, implemented by a transport adapter: the hub's `LiveSink` names (`write` an
 * update, `signal`, `writeSnapshot`), which the stream hands to the hub as they are, plus what only a
 * stream needs (a heartbeat, whether the buffer is full, and an end whatever the reason).
 */
export interface LiveStreamTransport extends Omit<LiveSink, 'signal' | 'end'> {
  /** Writes a signal (`snapshot-end`, `resume-reset`), only ever to a stream that asked for a snapshot or to resume; answers as `write`. */
  signal(signal: LiveSignal): boolean;
  /** Writes a heartbeat; `position`: what the client has caught up to, when known. */
  writeHeartbeat(position: string | null): void;
  /** Whether the transport's buffer is full now: a client that is behind needs no keep-alive. */
  readonly full: boolean;
  /** Ends the stream with `reason`, after what was already written. Not called when the client went away. */
  end(reason: TrailwireError | unknown): void;
}

export interface LiveStreamsOptions {
  hub: LiveHub;
  /** Checks, at each heartbeat and on `recheckAll`, that a stream's token was not revoked. */
  tokens: Pick<TokenService, 'assertNotRevoked'>;
  /** What "now" is when a stream's token expires. Default: the system clock. */
  clock: Clock;
  /** Milliseconds between heartbeats; the first is sent as soon as the stream opens. Default 15,000. */
  heartbeatIntervalMs?: number;
  /** Open streams (of every transport on the hub) one customer may hold in this process. Default 100. */
  maxStreamsPerCustomer?: number;
  /** Names the transport in the cap's message ("LiveFeed", "live event"). */
  streamName: string;
  /**
   * The windowed limits on opening streams (`Trailwire.liveConnectLimits`): a reconnect storm of one
   * customer, or from one address, is refused before it reads a snapshot or a replay. Default: none.
   */
  connectLimits?: LiveConnectLimits;
}

/** The connect limits of the live streams (contract 7's windows; `LimitSettings.liveConnect*`). */
export interface LiveConnectLimits {
  /** Streams opened per customer, over every transport. */
  perCustomer: FixedWindowLimiter;
  /** Streams opened per client address. */
  perAddress: FixedWindowLimiter;
}

/** What a client asks of its stream; every field may be left out (a stream of every update from now on, as before). */
export interface LiveStreamRequest {
  /** Send the current state of every trailer the stream may see first, then a `snapshot-end` signal. */
  snapshot?: boolean;
  /** Only these trailers (union with `filter.fleetIds`). */
  filter?: LiveFilter;
  /** Resume after this position (the last one received): the missed updates first, or `resume-reset` and a snapshot. */
  resumeAfter?: string;
}

/**
 * The most fleet and trailer ids one stream's filter may name, refused before anything is read: a
 * snapshot looks each named trailer up in the store (issue 37: a filter of 1,000 ids the customer
 * does not own cost 2,000 lookups a connect). Named fleets cost nothing past the customer's list.
 */
export const MAX_FILTER_IDS = 100;

/** Checks a request a transport parsed from its wire; throws `validation_failed` naming the field. */
export function checkLiveStreamRequest(request: LiveStreamRequest): void {
  const bad = (path: string, message: string) =>
    new TrailwireError('validation_failed', `The live stream request's ${path} ${message}.`, { errors: [{ path, message }] });
  if (request.resumeAfter !== undefined && !isPosition(request.resumeAfter))
    throw bad('resumeAfter', 'must be a position received on the stream (`<ms>-<seq>`)');
  const { fleetIds = [], trailerIds = [] } = request.filter ?? {};
  if (fleetIds.length > MAX_FILTER_IDS || trailerIds.length > MAX_FILTER_IDS) throw bad('filter', `may name at most ${MAX_FILTER_IDS} fleets and ${MAX_FILTER_IDS} trailers`);
  if (!fleetIds.every((id) => Number.isSafeInteger(id) && id > 0)) throw bad('filter.fleetIds', 'must be positive integers');
  if (!trailerIds.every((id) => typeof id === 'string' && id.length > 0 && id.length <= 64)) throw bad('filter.trailerIds', 'must be trailer ids');
}

/** The defaults of the LiveFeed and the SSE endpoint, one setting each for both (`serve --heartbeat-ms`, `--max-streams-per-customer`). */
export const LIVE_STREAM_DEFAULTS = { heartbeatIntervalMs: 15_000, maxStreamsPerCustomer: 100 } as const;

/** The longest delay `setTimeout` takes (about 24.8 days); a later expiry is re-checked then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The open streams of one transport in one process. */
/** What a stream refused for the per-customer cap is told to wait before trying again, in seconds. */
export const STREAM_CAP_RETRY_SECONDS = 5;

export class LiveStreams {
  private readonly streams = new Set<LiveStream>();
  private readonly hub: LiveHub;
  private readonly tokens: LiveStreamsOptions['tokens'];
  private readonly clock: Clock;
  private readonly streamName: string;
  private readonly connectLimits: LiveConnectLimits | undefined;
  readonly heartbeatIntervalMs: number;
  readonly maxStreamsPerCustomer: number;
  private closedWith: TrailwireError | null = null;

  constructor(options: LiveStreamsOptions) {
    // An option given as undefined means "the default", as if it were left out.
    const heartbeatIntervalMs = options.heartbeatIntervalMs ?? LIVE_STREAM_DEFAULTS.heartbeatIntervalMs;
    const maxStreamsPerCustomer = options.maxStreamsPerCustomer ?? LIVE_STREAM_DEFAULTS.maxStreamsPerCustomer;
    for (const [name, value] of Object.entries({ heartbeatIntervalMs, maxStreamsPerCustomer }))
      if (!Number.isInteger(value) || value < 1) throw new TypeError(`${options.streamName} streams: \`${name}\` must be a positive integer, got ${value}`);
    this.heartbeatIntervalMs = heartbeatIntervalMs;
    this.maxStreamsPerCustomer = maxStreamsPerCustomer;
    this.hub = options.hub;
    this.tokens = options.tokens;
    this.clock = options.clock;
    this.streamName = options.streamName;
    this.connectLimits = options.connectLimits;
  }

  /** How many streams of this transport are open. */
  get size(): number {
    return this.streams.size;
  }

  /** Why new streams are refused (set by `endAll`), or null while streams are taken. */
  get closing(): TrailwireError | null {
    return this.closedWith;
  }

  /**
   * Counts a stream opened by the claims' customer from `address` against the connect limits, and
   * throws `rate_limited` (with the window's state: a 429's `Retry-After`) when either is exhausted.
   * A transport calls it once per connect, before `admit`; it answers the customer's state (for the
   * RateLimit-* headers), or undefined when no connect limit applies.
   */
  async countConnect(claims: AccessClaims, address: string): Promise<RateLimitState | undefined> {
    if (this.closedWith) throw this.closedWith;
    if (!this.connectLimits) return undefined;
    const { perCustomer, perAddress } = this.connectLimits;
    const [customer, client] = await Promise.all([perCustomer.consume(claims.sub), perAddress.consume(address)]);
    if (!customer.allowed) throw perCustomer.limitedError(customer);
    if (!client.allowed) throw perAddress.limitedError(client);
    return customer;
  }

  /**
   * Throws what `open` would refuse the claims with: `unavailable` once shutting down, `rate_limited`
   * when the customer holds the most streams allowed. A transport calls it before it commits to a
   * stream (an HTTP status is sent once), then calls `open` in the same tick.
   */
  admit(claims: AccessClaims): void {
    if (this.closedWith) throw this.closedWith;
    if (this.hub.subscriberCount(claims.sub) >= this.maxStreamsPerCustomer)
      throw new TrailwireError(
        'rate_limited',
        `This customer already holds ${this.maxStreamsPerCustomer} live streams here (LiveFeed and /api/v1/live together), the most allowed; close one first.`,
        // Not a window: a slot frees when one of the customer's streams ends. Every 429 still says
        // when to try again (contract 7), so HTTP clients are told a few seconds.
        { rateLimit: { allowed: false, limit: this.maxStreamsPerCustomer, remaining: 0, resetSeconds: STREAM_CAP_RETRY_SECONDS } },
      );
  }

  /**
   * Opens a stream for verified customer claims: admits it (throwing as `admit` does), writes the
   * first heartbeat and subscribes to the hub. `onFinish` is told once when it is over, with the
   * reason (null: the client went away).
   */
  open(claims: AccessClaims, transport: LiveStreamTransport, onFinish: (reason: unknown) => void, request: LiveStreamRequest = {}): LiveStream {
    checkLiveStreamRequest(request);
    this.admit(claims);
    const stream = new LiveStream(claims, transport, (which, reason) => {
      this.streams.delete(which);
      onFinish(reason);
    });
    this.streams.add(stream);
    stream.open(this.hub, this.tokens, this.heartbeatIntervalMs, this.clock, request);
    return stream;
  }

  /** Checks every open stream's token again now (the signing keys changed: one may have been revoked). */
  recheckAll(): void {
    for (const stream of this.streams) stream.recheck(this.tokens);
  }

  /** Ends every open stream with `reason` (default `unavailable`: shutting down) and refuses new ones from then on. */
  endAll(reason: TrailwireError = new TrailwireError('unavailable', `The ${this.streamName} stream is shutting down.`)): void {
    this.closedWith = reason;
    for (const stream of [...this.streams]) stream.end(reason);
  }
}

/** One open stream: the hub's sink, its heartbeat, its revocation and expiry checks. */
export class LiveStream {
  private subscription: LiveSubscription | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private expiry: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(
    readonly claims: AccessClaims,
    private readonly transport: LiveStreamTransport,
    private readonly onFinish: (stream: LiveStream, reason: unknown) => void,
  ) {}

  get customerId(): string {
    return this.claims.sub;
  }

  /** @internal Started by `LiveStreams#open`. */
  open(hub: LiveHub, tokens: LiveStreamsOptions['tokens'], heartbeatIntervalMs: number, clock: Clock, request: LiveStreamRequest): void {
    const held = request.snapshot === true || request.resumeAfter !== undefined;
    // At once, before the hub listens: a stream that was sent nothing has no position to tell.
    this.transport.writeHeartbeat(null);
    this.heartbeat = setInterval(() => {
      if (!this.transport.full) this.transport.writeHeartbeat(this.subscription?.caughtUpTo ?? null);
      // Catches a rotation done by another process, once this process's key versions know of it.
      this.recheck(tokens);
      // The timer below ends the stream on time; this catches a clock that jumped (or a test's manual clock).
      this.endIfExpired(clock);
    }, heartbeatIntervalMs);
    this.scheduleExpiry(clock);
    // The transport's writes are the hub's sink, bound to it (no forwarder per update per stream,
    // and a transport written as a class keeps its `this`); only `end` is the stream's own, which
    // stops the timers before the transport ends.
    const { transport } = this;
    const sink: LiveSink = {
      write: transport.write.bind(transport),
      signal: transport.signal.bind(transport),
      writeSnapshot: transport.writeSnapshot?.bind(transport),
      end: (reason) => this.finish(reason),
    };
    void hub
      .subscribe(this.claims.sub, sink, { filter: request.filter, held })
      .then(
        (subscription) => {
          // The client went away (or the token expired) while the hub started listening.
          if (this.finished) return subscription.unsubscribe();
          this.subscription = subscription;
          if (held) void this.prepare(hub, subscription, request).catch((error: unknown) => this.end(error));
        },
        (error: unknown) => {
          // The hub closed (shutting down) between admission and here, or the bus could not listen.
          this.finish(error);
        },
      );
  }

  /**
   * Reads what a held subscription writes first — the replay after `resumeAfter`, or a snapshot —
   * and starts it. The subscription queued everything published since it was made, so the two meet
   * without a gap; `start` drops what the replay already holds.
   */
  private async prepare(hub: LiveHub, subscription: LiveSubscription, request: LiveStreamRequest): Promise<void> {
    const backlog: LiveBacklogItem[] = [];
    if (request.resumeAfter !== undefined) {
      // A window that cannot answer now (Redis slow or away) is served as a position it cannot
      // resume: the reset signal and a snapshot from the store. Ending the stream instead would have
      // the client (an EventSource) retry the same position into the same failure.
      const missed = await hub.replayAfter(this.claims.sub, request.resumeAfter).catch(() => null);
      if (missed !== null) {
        let through = request.resumeAfter;
        for (const event of missed) {
          if (subscription.matches(event)) backlog.push(event);
          through = event.position ?? through;
        }
        subscription.start(backlog, through);
        return;
      }
      backlog.push({ kind: 'resume-reset' });
    }
    const snapshot = await hub.readSnapshot(this.claims.sub, request.filter, subscription.positionAtSubscribe);
    backlog.push({ kind: 'snapshot', states: snapshot.states }, { kind: 'snapshot-end', position: snapshot.position });
    // A snapshot shared with another stream covers an earlier position: the updates since follow it.
    const since = snapshot.since.filter((event) => subscription.matches(event));
    backlog.push(...since);
    // Queued updates the snapshot covers are not written again: on Redis one can arrive after the
    // window's newest position was read (another connection), older than the snapshot's end.
    subscription.start(backlog, snapshot.since.at(-1)?.position ?? snapshot.position);
  }

  /** The transport can take more again: the hub writes what waits. */
  drained(): void {
    this.subscription?.drained();
  }

  /** The client went away: stop without writing anything more. */
  clientGone(): void {
    this.finish(null);
  }

  /** Ends the stream with `invalid_token` when its token was revoked (its principal's key rotated, or its signing key revoked). */
  recheck(tokens: LiveStreamsOptions['tokens']): void {
    tokens.assertNotRevoked(this.claims).catch((error: unknown) => this.end(error));
  }

  end(reason: unknown): void {
    this.finish(reason);
  }

  /** Ends the stream at its token's `exp`, timed by `clock`. */
  private scheduleExpiry(clock: Clock): void {
    if (this.endIfExpired(clock)) return;
    const delay = Math.min(this.claims.exp * 1000 - clock.now(), MAX_TIMER_MS);
    this.expiry = setTimeout(() => this.scheduleExpiry(clock), delay);
    this.expiry.unref();
  }

  private endIfExpired(clock: Clock): boolean {
    if (this.finished || clock.now() < this.claims.exp * 1000) return this.finished;
    this.end(new TrailwireError('invalid_token', 'The token has expired; authenticate again and subscribe with the fresh token.'));
    return true;
  }

  private finish(reason: unknown): void {
    if (this.finished) return;
    this.finished = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.expiry);
    this.subscription?.unsubscribe();
    this.onFinish(this, reason);
    if (reason !== null) this.transport.end(reason);
  }
}
