/**
 * A LiveFeed client for integrators and the load simulator: subscribes to
 * `livefeed.v1.LiveFeed/Subscribe` with the customer's bearer token, hands each heartbeat and each
 * trailer update (decoded to the read API's lowerCamelCase shape, times as epoch ms) to the caller,
 * and reconnects when the stream ends — with exponential backoff and jitter, and a fresh token when
 * the server said UNAUTHENTICATED (the key was rotated, the token expired). PERMISSION_DENIED (a
 * partner token) is not retried: reconnecting cannot cure it. The caller may pause and resume
 * reading, which is how a slow consumer looks to the server (HTTP/2 flow control fills up).
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
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
  /** Told when the server rejected the token, so the next `token()` fetches a new one. */
  onTokenRejected?: () => void;
  /** First reconnection delay, doubled each failed attempt. Default 250 ms. */
  reconnectBaseMs?: number;
  /** Longest reconnection delay. Default 10,000 ms. */
  reconnectMaxMs?: number;
  /** Upper bound of the random jitter added to each delay. Default 250 ms. */
  jitterMs?: number;
  /** Reconnections before giving up. Default: unlimited. */
  maxReconnects?: number;
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
  const settings = { reconnectBaseMs: 250, reconnectMaxMs: 10_000, jitterMs: 250, maxReconnects: Infinity, random: Math.random, ...options };
  const Client = liveFeedClientClass();
  // A connection of its own: on a shared HTTP/2 connection, a paused subscription would hold back
  // every other stream of the process through the connection's flow-control window.
  const client = new Client(settings.target, settings.credentials ?? grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    ...settings.channelOptions,
  });
  let call: grpc.ClientReadableStream<unknown> | undefined;
  let closed = false;
  let paused = false;
  let reconnects = 0;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;

  const giveUp = (error: Error) => {
    closed = true;
    client.close();
    handlers.onGiveUp?.(error);
  };

  const connect = async (): Promise<void> => {
    if (closed) return;
    let token: string;
    try {
      token = await settings.token();
    } catch (error) {
      scheduleReconnect(grpc.status.UNAUTHENTICATED, `no token: ${(error as Error).message}`);
      return;
    }
    if (closed) return;
    handlers.onConnecting?.(reconnects);
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    const current = (client as unknown as { Subscribe(request: object, metadata: grpc.Metadata): grpc.ClientReadableStream<unknown> }).Subscribe({}, metadata);
    call = current;
    if (paused) current.pause();
    current.on('data', (message: RawResponse) => {
      failures = 0;
      if (message.is_heartbeat) handlers.onHeartbeat?.();
      else if (message.live_update) handlers.onUpdate?.(liveUpdateOf(message.live_update));
    });
    let ended = false;
    const onEnd = (code: grpc.status, details: string) => {
      if (ended) return;
      ended = true;
      if (call === current) call = undefined;
      if (closed) return;
      if (code === grpc.status.UNAUTHENTICATED) settings.onTokenRejected?.();
      scheduleReconnect(code, details);
    };
    current.on('error', (error: grpc.ServiceError) => onEnd(error.code, error.details));
    // A stream the server ends with OK is over too: the client connects again.
    current.on('status', (status: grpc.StatusObject) => {
      if (status.code === grpc.status.OK) onEnd(status.code, status.details);
    });
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
    const delay = Math.min(settings.reconnectMaxMs, settings.reconnectBaseMs * 2 ** failures) + Math.floor(settings.random() * settings.jitterMs);
    failures++;
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
    pause() {
      paused = true;
      call?.pause();
    },
    resume() {
      paused = false;
      call?.resume();
    },
    close() {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      call?.cancel();
      call = undefined;
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

interface RawTimestamp {
  seconds?: number;
  nanos?: number;
}

interface RawResponse {
  is_heartbeat?: boolean;
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
