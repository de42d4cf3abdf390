/**
 * A LiveFeed client for integrators and the load simulator: subscribes to
 * `livefeed.v1.LiveFeed/Subscribe` with the customer's bearer token, hands each heartbeat and each
 * trailer update (decoded to the read API's lowerCamelCase shape, times as epoch ms) to the caller,
 * and reconnects when the stream ends — with exponential backoff and jitter, and a fresh token when
 * the server said UNAUTHENTICATED (the key was rotated, the token expired). PERMISSION_DENIED (a
 * partner token) is not retried: reconnecting cannot cure it.
 *
 * The client keeps its place (contract 8, "no gaps"): it remembers the last position the server
 * gave it (on an update, or on a heartbeat once the stream has caught up) and every stream after
 * the first asks to resume after it, so a reconnection receives what was missed, in order. When the
 * position has left the server's replay window the server says so (`onResumeReset`) and sends a
 * snapshot of every trailer instead. An update at or before the remembered position is not handed
 * on twice.
 *
 * A stream lives no longer than its token (contract 8), so the client renews ahead of `exp`: shortly
 * before the token expires it fetches a fresh one and opens a second stream, resuming after the last
 * position received, and once that stream has answered (its first heartbeat comes at once) it
 * cancels the old one. Make before break, and the resume is what makes it exact: the new stream's
 * first heartbeat says only that it hears updates from now on, not that the old stream's earlier
 * messages have all arrived — two streams of one connection are not ordered with each other, and a
 * cancelled call's messages still on their way are dropped — so an update published just before the
 * new stream was subscribed, still in flight on the old one, would be lost at the switch. The new
 * stream's replay carries it; what the old stream delivered meanwhile is not repeated. (A server
 * that keeps no replay window gives no positions: the switch is then as exact as the two streams'
 * timing.) The caller may pause and resume reading, which is how a slow consumer looks to the server
 * (HTTP/2 flow control fills up).
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Backoff } from '../../core/backoff.ts';
import { comparePositions, isPosition } from '../../core/live-replay.ts';
import { TrailwireClient } from './http-client.ts';

/** The trailer of a live update, as the read API spells it. */
export interface LiveTrailer {
  id: string;
  unitId: string | null;
  vin: string | null;
  status: { name: string; isWarning: boolean; isFault: boolean } | null;
  /** Epoch ms. */
  statusDate: number | null;
  faultedDevices: number;
  warningDevices: number;
  telemetry: { timestamp: number | null; lat: number; long: number; speed: number; heading: string } | null;
}

/** One trailer update of the feed. */
export interface LiveUpdate {
  fleetId: number;
  fleetName: string | null;
  /** When the server created the update, epoch ms. */
  ts: number;
  trailer: LiveTrailer;
  /** Set on the updates of a snapshot (after `onResumeReset`): the trailer's current state rather than a change. */
  snapshot?: true;
}

/** Why a connection ended: the gRPC status, or `null` when the client closed it. */
export interface LiveFeedDisconnect {
  code: grpc.status;
  details: string;
  /** Whether the client will connect again. */
  willReconnect: boolean;
}

export interface LiveFeedHandlers {
  onUpdate?(update: LiveUpdate): void;
  onHeartbeat?(): void;
  /**
   * The position the client resumed from had left the server's replay window: updates may have been
   * missed, and a snapshot of every trailer (updates with `snapshot: true`) follows in their place.
   */
  onResumeReset?(): void;
  /** A connection attempt starts: the token is in hand and the Subscribe call is being made. */
  onConnecting?(attempt: number): void;
  onDisconnect?(disconnect: LiveFeedDisconnect): void;
  /** The client gave up (PERMISSION_DENIED, no token, or `maxReconnects` reached). */
  onGiveUp?(error: Error): void;
}

export interface LiveFeedOptions {
  /** `host:port` of the LiveFeed. */
  target: string;
  /** Answers a customer access token; called for every connection. */
  token: () => Promise<string>;
  /** Told when the server rejected the token, or it is about to expire, so the next `token()` fetches a new one. */
  onTokenRejected?: () => void;
  /**
   * How long before its token's `exp` a stream is renewed (a new stream with a fresh token, then
   * the old one closed); a token living less than twice this is renewed at half its remaining life.
   * 0 turns renewal off (the stream then ends UNAUTHENTICATED at `exp` and the client reconnects).
   * Default 60,000 ms.
   */
  renewBeforeMs?: number;
  /** The client's clock (epoch ms), against which `exp` is read. Default `Date.now`. */
  now?: () => number;
  /** First reconnection delay, doubled each failed attempt. Default 250 ms. */
  reconnectBaseMs?: number;
  /** Longest reconnection delay. Default 10,000 ms. */
  reconnectMaxMs?: number;
  /** Upper bound of the random jitter added to each delay. Default 250 ms. */
  jitterMs?: number;
  /** Reconnections before giving up. Default: unlimited. */
  maxReconnects?: number;
  /**
   * Resume after this position on the first stream (a `position` saved from an earlier
   * subscription): what was published since arrives first. Default: none (updates from now on).
   */
  resumeAfter?: string;
  /** Default: insecure (plain HTTP/2), as on a local or in-cluster address. */
  credentials?: grpc.ChannelCredentials;
  /** gRPC channel options. Default: `grpc.use_local_subchannel_pool` (a connection per subscription). */
  channelOptions?: grpc.ChannelOptions;
  random?: () => number;
}

/** An open subscription: closing it ends the current call and stops reconnecting. */
export interface LiveFeedSubscription {
  /** Whether a stream is open now (the call was made and has not ended). */
  readonly connected: boolean;
  /** How many times the client connected again after a stream ended. */
  readonly reconnects: number;
  /** How many times a stream was renewed before its token expired. */
  readonly renewals: number;
  /** The last position received (everything up to it was handed on), or null: what a new stream resumes after. */
  readonly position: string | null;
  /** Stops reading from the stream (the server sees a slow consumer). */
  pause(): void;
  resume(): void;
  close(): void;
}

// Through the package's own `trailwire/proto/*` export: the same folder from the sources and from dist/.
const PROTO_ROOT = fileURLToPath(new URL('../../', import.meta.resolve('trailwire/proto/livefeed/v1/livefeed.proto')));

let liveFeedConstructor: grpc.ServiceClientConstructor | undefined;

function liveFeedClientClass(): grpc.ServiceClientConstructor {
  if (!liveFeedConstructor) {
    const definition = protoLoader.loadSync('livefeed/v1/livefeed.proto', {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: false,
      oneofs: true,
      includeDirs: [PROTO_ROOT],
    });
    const loaded = grpc.loadPackageDefinition(definition) as unknown as { livefeed: { v1: { LiveFeed: grpc.ServiceClientConstructor } } };
    liveFeedConstructor = loaded.livefeed.v1.LiveFeed;
  }
  return liveFeedConstructor;
}

/** Subscribes to the LiveFeed; updates and heartbeats go to `handlers` until `close()`. */
export function subscribeLiveFeed(options: LiveFeedOptions, handlers: LiveFeedHandlers): LiveFeedSubscription {
  if (options.resumeAfter !== undefined && !isPosition(options.resumeAfter))
    throw new TypeError(`subscribeLiveFeed: \`resumeAfter\` must be a position received on the stream (\`<ms>-<seq>\`), got ${String(options.resumeAfter)}`);
  const settings = {
    reconnectBaseMs: 250,
    reconnectMaxMs: 10_000,
    jitterMs: 250,
    maxReconnects: Infinity,
    renewBeforeMs: 60_000,
    now: Date.now,
    random: Math.random,
    ...options,
  };
  const Client = liveFeedClientClass();
  // A connection of its own: on a shared HTTP/2 connection, a paused subscription would hold back
  // every other stream of the process through the connection's flow-control window.
  const client = new Client(settings.target, settings.credentials ?? grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    ...settings.channelOptions,
  });
  let call: grpc.ClientReadableStream<unknown> | undefined;
  /** The stream opened to replace `call` before its token expires, until it answers. */
  let renewal: grpc.ClientReadableStream<unknown> | undefined;
  const retired = new WeakSet<grpc.ClientReadableStream<unknown>>();
  let closed = false;
  let paused = false;
  let reconnects = 0;
  let renewals = 0;
  const backoff = new Backoff(settings.reconnectBaseMs, settings.reconnectMaxMs);
  /** The last position received: every update up to it was handed on. */
  let position: string | null = settings.resumeAfter ?? null;
  let timer: NodeJS.Timeout | undefined;
  let renewTimer: NodeJS.Timeout | undefined;

  const giveUp = (error: Error) => {
    closed = true;
    clearTimeout(renewTimer);
    client.close();
    handlers.onGiveUp?.(error);
  };

  /** Opens a stream: the first one or a reconnection, or (`renewing`) the successor of `call`. */
  const connect = async (renewing = false): Promise<void> => {
    if (closed) return;
    let token: string;
    try {
      token = await settings.token();
    } catch (error) {
      // A renewal that cannot get a token leaves the current stream to run until it ends.
      if (!renewing) scheduleReconnect(grpc.status.UNAUTHENTICATED, `no token: ${(error as Error).message}`);
      return;
    }
    if (closed) return;
    handlers.onConnecting?.(reconnects);
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    // Resume after the last position received: a reconnection misses nothing, and a renewal's replay
    // carries whatever was still in flight on the stream it replaces.
    const request = position === null ? {} : { resume_after: position };
    const current = (client as unknown as { Subscribe(request: object, metadata: grpc.Metadata): grpc.ClientReadableStream<unknown> }).Subscribe(request, metadata);
    if (renewing) renewal = current;
    else call = current;
    if (paused) current.pause();
    current.on('data', (message: RawResponse) => {
      if (retired.has(current)) return;
      if (current === renewal) switchTo(current);
      backoff.reset();
      receive(message);
    });
    let ended = false;
    const onEnd = (code: grpc.status, details: string) => {
      if (ended || retired.has(current)) return;
      ended = true;
      // A renewal that failed before answering: the current stream runs on until it ends.
      if (current === renewal) {
        renewal = undefined;
        return;
      }
      if (call !== current) return;
      // The old stream ended (its token expired) before the renewal answered: the renewal takes over.
      if (renewal) {
        switchTo(renewal);
        return;
      }
      call = undefined;
      clearTimeout(renewTimer);
      if (closed) return;
      if (code === grpc.status.UNAUTHENTICATED) settings.onTokenRejected?.();
      scheduleReconnect(code, details);
    };
    current.on('error', (error: grpc.ServiceError) => onEnd(error.code, error.details));
    // A stream the server ends with OK is over too: the client connects again.
    current.on('status', (status: grpc.StatusObject) => {
      if (status.code === grpc.status.OK) onEnd(status.code, status.details);
    });
    scheduleRenewal(current, token);
  };

  /** Hands one message of the current stream on, keeping the position and passing over repeats. */
  const receive = (message: RawResponse) => {
    if (message.is_heartbeat) {
      advanceTo(message.position);
      handlers.onHeartbeat?.();
    } else if (message.resume_reset) {
      handlers.onResumeReset?.();
    } else if (message.snapshot_end) {
      advanceTo(message.position);
    } else if (message.live_update) {
      // A renewal replays from where the client stood when it was opened; what the old stream
      // delivered after that comes again, and is passed over.
      if (message.position !== undefined && position !== null && comparePositions(message.position, position) <= 0) return;
      advanceTo(message.position);
      const update = liveUpdateOf(message.live_update);
      if (message.is_snapshot) update.snapshot = true;
      handlers.onUpdate?.(update);
    }
  };

  const advanceTo = (next: string | undefined) => {
    if (next === undefined || !isPosition(next)) return;
    if (position === null || comparePositions(next, position) > 0) position = next;
  };

  /** Makes the renewal the current stream and cancels the one it replaces. */
  const switchTo = (successor: grpc.ClientReadableStream<unknown>) => {
    const previous = call;
    renewal = undefined;
    call = successor;
    renewals++;
    if (previous && previous !== successor) {
      retired.add(previous);
      previous.cancel();
    }
  };

  /** Renews `current` ahead of its token's `exp`. */
  const scheduleRenewal = (current: grpc.ClientReadableStream<unknown>, token: string) => {
    const exp = expiryOf(token);
    if (settings.renewBeforeMs <= 0 || exp === undefined) return;
    const left = exp - settings.now();
    clearTimeout(renewTimer);
    renewTimer = setTimeout(
      () => {
        if (closed || call !== current || renewal) return;
        settings.onTokenRejected?.();
        void connect(true);
      },
      Math.max(left - settings.renewBeforeMs, left / 2, 0),
    );
  };

  const scheduleReconnect = (code: grpc.status, details: string) => {
    const fatal = code === grpc.status.PERMISSION_DENIED || code === grpc.status.UNIMPLEMENTED;
    const willReconnect = !fatal && reconnects < settings.maxReconnects;
    handlers.onDisconnect?.({ code, details, willReconnect });
    if (!willReconnect) {
      giveUp(new Error(`LiveFeed stream ended with ${grpc.status[code]}: ${details}`));
      return;
    }
    reconnects++;
    const delay = backoff.next() + Math.floor(settings.random() * settings.jitterMs);
    timer = setTimeout(() => void connect(), delay);
  };

  void connect();

  return {
    get connected() {
      return call !== undefined;
    },
    get reconnects() {
      return reconnects;
    },
    get renewals() {
      return renewals;
    },
    get position() {
      return position;
    },
    pause() {
      paused = true;
      call?.pause();
      renewal?.pause();
    },
    resume() {
      paused = false;
      call?.resume();
      renewal?.resume();
    },
    close() {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      clearTimeout(renewTimer);
      for (const open of [call, renewal]) {
        if (!open) continue;
        retired.add(open);
        open.cancel();
      }
      call = renewal = undefined;
      client.close();
    },
  };
}

/**
 * Subscribes with a customer `TrailwireClient`'s token: the client caches it, and fetches a new one
 * (with its current key, also after `rotateKey`) when the server rejects it.
 */
export function subscribeWithClient(client: TrailwireClient, options: Omit<LiveFeedOptions, 'token' | 'onTokenRejected'>, handlers: LiveFeedHandlers): LiveFeedSubscription {
  return subscribeLiveFeed({ ...options, token: () => client.accessToken(), onTokenRejected: () => client.dropToken() }, handlers);
}

/** The `exp` of a JWT in epoch ms, read without verifying (the server verifies); undefined if unreadable. */
function expiryOf(token: string): number | undefined {
  try {
    const exp = (JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

interface RawTimestamp {
  seconds?: number;
  nanos?: number;
}

interface RawResponse {
  is_heartbeat?: boolean;
  position?: string;
  is_snapshot?: boolean;
  snapshot_end?: boolean;
  resume_reset?: boolean;
  live_update?: {
    fleet_id?: number;
    fleet_name?: string;
    ts?: RawTimestamp;
    trailer?: {
      id?: string;
      unit_id?: string;
      vin?: string;
      status?: { name?: string; is_warning?: boolean; is_fault?: boolean };
      status_date?: RawTimestamp;
      faulted_devices?: number;
      warning_devices?: number;
      telemetry?: { timestamp?: RawTimestamp; lat?: number; long?: number; speed?: number; heading?: string };
    };
  };
}

function msOf(timestamp: RawTimestamp | undefined): number | null {
  if (!timestamp) return null;
  return (timestamp.seconds ?? 0) * 1000 + Math.round((timestamp.nanos ?? 0) / 1e6);
}

/** A decoded `LiveUpdate` message in the read API's shape. */
export function liveUpdateOf(raw: NonNullable<RawResponse['live_update']>): LiveUpdate {
  const trailer = raw.trailer ?? {};
  const fix = trailer.telemetry;
  return {
    fleetId: raw.fleet_id ?? 0,
    fleetName: raw.fleet_name ?? null,
    ts: msOf(raw.ts) ?? 0,
    trailer: {
      id: trailer.id ?? '',
      unitId: trailer.unit_id ?? null,
      vin: trailer.vin ?? null,
      status: trailer.status
        ? { name: trailer.status.name ?? '', isWarning: trailer.status.is_warning ?? false, isFault: trailer.status.is_fault ?? false }
        : null,
      statusDate: msOf(trailer.status_date),
      faultedDevices: trailer.faulted_devices ?? 0,
      warningDevices: trailer.warning_devices ?? 0,
      telemetry: fix
        ? { timestamp: msOf(fix.timestamp), lat: fix.lat ?? 0, long: fix.long ?? 0, speed: fix.speed ?? 0, heading: fix.heading ?? '' }
        : null,
    },
  };
}
