/**
 * The rules every live-update stream follows, whatever carries it (contract 8 for gRPC, contract 12
 * for Server-Sent Events): a heartbeat at once and then every interval; the token's customer's
 * updates from the `LiveHub` with its back-pressure; the stream ends when its token expires or is
 * revoked (its key rotated, its signing key revoked); a customer holds at most
 * `maxStreamsPerCustomer` streams in this process; and on shutdown every stream ends and no new one
 * starts. A transport adapter verifies the token, asks `LiveStreams#open` for a stream, and
 * implements `LiveStreamTransport` (write an update, write a heartbeat, end with a reason); it calls
 * `drained()` when its buffer empties and `clientGone()` when the client leaves.
 *
 * The per-customer cap counts the hub's subscribers, not this object's streams: every transport of a
 * process subscribes to the same hub, so a gRPC stream and an SSE stream of one customer count
 * against one cap. The count is this process's: N processes behind a balancer admit up to N times
 * the cap (docs/operations.md).
 */
import type { Clock } from './clock.ts';
import { TrailwireError } from './errors.ts';
import type { LiveHub, LiveSubscription, LiveTrailerEvent } from './live-hub.ts';
import type { AccessClaims, TokenService } from './tokens.ts';

/** One stream's wire, implemented by a transport adapter. */
export interface LiveStreamTransport {
  /** Writes one update; answers false when the transport's buffer is full (see `LiveSink.write`). */
  writeUpdate(event: LiveTrailerEvent): boolean;
  /** Writes a heartbeat. */
  writeHeartbeat(): void;
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
}

/** The defaults of the LiveFeed and the SSE endpoint, one setting each for both (`serve --heartbeat-ms`, `--max-streams-per-customer`). */
export const LIVE_STREAM_DEFAULTS = { heartbeatIntervalMs: 15_000, maxStreamsPerCustomer: 100 } as const;

/** The longest delay `setTimeout` takes (about 24.8 days); a later expiry is re-checked then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The open streams of one transport in one process. */
export class LiveStreams {
  private readonly streams = new Set<LiveStream>();
  private readonly hub: LiveHub;
  private readonly tokens: LiveStreamsOptions['tokens'];
  private readonly clock: Clock;
  private readonly streamName: string;
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
      );
  }

  /**
   * Opens a stream for verified customer claims: admits it (throwing as `admit` does), writes the
   * first heartbeat and subscribes to the hub. `onFinish` is told once when it is over, with the
   * reason (null: the client went away).
   */
  open(claims: AccessClaims, transport: LiveStreamTransport, onFinish: (reason: unknown) => void): LiveStream {
    this.admit(claims);
    const stream = new LiveStream(claims, transport, (which, reason) => {
      this.streams.delete(which);
      onFinish(reason);
    });
    this.streams.add(stream);
    stream.open(this.hub, this.tokens, this.heartbeatIntervalMs, this.clock);
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
  open(hub: LiveHub, tokens: LiveStreamsOptions['tokens'], heartbeatIntervalMs: number, clock: Clock): void {
    this.transport.writeHeartbeat();
    try {
      this.subscription = hub.subscribe(this.claims.sub, {
        write: (event) => this.transport.writeUpdate(event),
        end: (reason) => this.finish(reason),
      });
    } catch (error) {
      // The hub closed (shutting down) between admission and here.
      this.finish(error);
      return;
    }
    this.heartbeat = setInterval(() => {
      if (!this.transport.full) this.transport.writeHeartbeat();
      // Catches a rotation done by another process, once this process's key versions know of it.
      this.recheck(tokens);
      // The timer below ends the stream on time; this catches a clock that jumped (or a test's manual clock).
      this.endIfExpired(clock);
    }, heartbeatIntervalMs);
    this.scheduleExpiry(clock);
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
