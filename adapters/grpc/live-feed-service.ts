/**
 * The `livefeed.v1.LiveFeed` service on @grpc/grpc-js (contract 8), mounted on the core's `LiveHub`.
 * `Subscribe` authenticates the call's `authorization: Bearer <customer JWT>` metadata, sends a
 * heartbeat at once and then every `heartbeatIntervalMs`, and streams the hub's updates for the
 * token's customer. Each update is encoded once and the same bytes are written to every stream of
 * the customer; the stream's write buffer is honoured (the hub coalesces while it is full, see
 * `core/live-hub.ts`). Add it to your own server with `addLiveFeedService(server, options)`, or run
 * the whole thing with `startGrpcServer` (`grpc-server.ts`).
 *
 * Two limits (contract 8). A stream lives no longer than its token: at the token's `exp` it ends
 * UNAUTHENTICATED, as on a rotation, and the client subscribes again with a fresh token — otherwise
 * a token that leaked, or a customer whose access was cut, would keep streaming forever. And a
 * customer holds at most `maxStreamsPerCustomer` streams in this process: the next is refused
 * RESOURCE_EXHAUSTED, so that one customer (or one buggy client reconnecting in a loop) cannot
 * exhaust the memory and file descriptors that every customer's streams share. The count is this
 * process's, over every transport on the hub (`GET /api/v1/live` too): N processes behind a balancer
 * admit up to N times the cap (docs/operations.md). Both rules, and the heartbeat, live in
 * `core/live-streams.ts`, shared with the Server-Sent Events route; this file is the gRPC wire.
 *
 * How a `LiveTrailerEvent` of the core reads on that wire: the `LiveUpdateResponse` of
 * `proto/livefeed/v1/livefeed.proto`, as the plain object proto-loader encodes (field names as in
 * the `.proto`). A field the specification marks `optional` is left out when the trailer has no
 * value for it (a trailer without a unit id, or that never reported a GPS fix), so a client can tell
 * "absent" from "empty".
 */
import * as grpc from '@grpc/grpc-js';
import { type Clock, systemClock } from '../../core/clock.ts';
import { checkLiveStreamRequest, type LiveConnectLimits, type LiveStreamRequest, LiveStreams } from '../../core/live-streams.ts';
import type { Logger } from 'pino';
import { type AccessLogLevel, millisecondsSince, requestIdFrom } from '../../core/audit.ts';
import { TrailwireError } from '../../core/errors.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { LiveHub } from '../../core/live-hub.ts';
import type { LiveSignal } from '../../core/live-subscriber.ts';
import { statusView } from '../../core/trailer-status.ts';
import { type AccessClaims, requireAudience, type TokenService } from '../../core/tokens.ts';
import { encodeLiveUpdateResponse, liveFeedServiceDefinition } from './proto.ts';
import { grpcStatusOf } from './status-codes.ts';

export interface LiveFeedServiceOptions {
  /** Verifies the bearer tokens (a `TokenService`). */
  tokens: Pick<TokenService, 'verify' | 'assertNotRevoked'> & Partial<Pick<TokenService, 'clock'>>;
  /** Where the updates come from. */
  hub: LiveHub;
  /** Milliseconds between heartbeats; the first is sent as soon as the stream opens. Default 15,000. */
  heartbeatIntervalMs?: number;
  /**
   * Open live streams one customer may hold in this process, counted over every transport on `hub`
   * (LiveFeed and `GET /api/v1/live` together); the next is refused RESOURCE_EXHAUSTED. Default 100.
   */
  maxStreamsPerCustomer?: number;
  /**
   * The windowed limits on opening streams, per customer and per client address (pass
   * `Trailwire.liveConnectLimits`, which `GET /api/v1/live` counts against too): a connect over either
   * is refused RESOURCE_EXHAUSTED before it reads a snapshot or a replay. Default: none.
   */
  connectLimits?: LiveConnectLimits;
  /** What "now" is when a stream's token expires. Default: the clock of `tokens`, else the system clock. */
  clock?: Clock;
  /**
   * Subscribes to events after which every open stream's token is checked again at once rather than
   * at its next heartbeat: the signing keys changed (a key was revoked). Answers the unsubscribe
   * function. Default: none (the heartbeat's check only).
   */
  recheckOn?: (listener: () => void) => () => void;
  /**
   * The access log of streams: a line when a stream opens and one when it closes (with its final
   * status and duration), at `level` (default `info`); a refused Subscribe writes the close line
   * only. Default: none.
   */
  accessLog?: { logger: Logger; level?: AccessLogLevel };
}

export interface LiveFeedService {
  /** The service definition to pass to `grpc.Server#addService`. */
  definition: grpc.ServiceDefinition;
  implementation: grpc.UntypedServiceImplementation;
  /** How many streams are open. */
  readonly openStreams: number;
  /**
   * Ends every open stream with `reason` (default `unavailable`: shutting down) and refuses new
   * ones from then on. Call it before shutting the server down.
   */
  endAllStreams(reason?: TrailwireError): void;
}

/** `google.protobuf.Timestamp`. */
export interface TimestampMessage {
  seconds: number;
  nanos: number;
}

export interface StatusMessage {
  name?: string;
  is_warning?: boolean;
  is_fault?: boolean;
}

export interface TelemetryMessage {
  timestamp?: TimestampMessage;
  lat?: number;
  long?: number;
  speed?: number;
  heading?: string;
}

export interface TrailerMessage {
  id: string;
  unit_id?: string;
  vin?: string;
  status?: StatusMessage;
  status_date?: TimestampMessage;
  faulted_devices: number;
  warning_devices: number;
  telemetry?: TelemetryMessage;
}

export interface LiveUpdateMessage {
  fleet_id: number;
  fleet_name?: string;
  ts: TimestampMessage;
  trailer: TrailerMessage;
}

export interface LiveUpdateResponseMessage {
  is_heartbeat: boolean;
  live_update?: LiveUpdateMessage;
  /** (added, issue 32) The update's position; on a heartbeat or snapshot end, the stream's own position. */
  position?: string;
  is_snapshot?: boolean;
  snapshot_end?: boolean;
  resume_reset?: boolean;
}

/** The keep-alive message. */
export const HEARTBEAT_MESSAGE: LiveUpdateResponseMessage = { is_heartbeat: true };

/** Epoch milliseconds (fractions kept to the nanosecond) as a `google.protobuf.Timestamp`. */
export function timestampOf(ms: number): TimestampMessage {
  const seconds = Math.floor(ms / 1000);
  // Timestamp nanos are always in [0, 1e9), also before 1970 (seconds is floored).
  const nanos = Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1e6));
  return { seconds, nanos };
}

/** The stream message of one live update. */
export function liveUpdateResponseOf(event: LiveTrailerEvent): LiveUpdateResponseMessage {
  const { trailer } = event;
  const status = statusView(trailer.statusName);
  const message: TrailerMessage = {
    id: trailer.id,
    vin: trailer.vin,
    status: { name: status.name, is_warning: status.isWarning, is_fault: status.isFault },
    status_date: timestampOf(trailer.statusDate),
    faulted_devices: trailer.faultedDevices,
    warning_devices: trailer.warningDevices,
  };
  if (trailer.unitId !== null) message.unit_id = trailer.unitId;
  if (trailer.telemetry !== null) {
    const fix = trailer.telemetry;
    message.telemetry = { timestamp: timestampOf(fix.timestamp), lat: fix.lat, long: fix.long, speed: fix.speed, heading: fix.heading };
  }
  const response: LiveUpdateResponseMessage = {
    is_heartbeat: false,
    live_update: { fleet_id: event.fleet.id, fleet_name: event.fleet.name, ts: timestampOf(event.ts), trailer: message },
  };
  if (event.position !== undefined) response.position = event.position;
  if (event.snapshot) response.is_snapshot = true;
  return response;
}

/** A heartbeat, with the stream's own position when it has one. */
export function heartbeatMessageOf(position: string | null): LiveUpdateResponseMessage {
  return position === null ? HEARTBEAT_MESSAGE : { is_heartbeat: true, position };
}

/** The message of a stream signal (issue 32): the end of a snapshot, or a resume position outside the window. */
export function signalMessageOf(signal: LiveSignal): LiveUpdateResponseMessage {
  if (signal.kind === 'resume-reset') return { is_heartbeat: false, resume_reset: true };
  return signal.position === null ? { is_heartbeat: false, snapshot_end: true } : { is_heartbeat: false, snapshot_end: true, position: signal.position };
}

const HEARTBEAT_BYTES = encodeLiveUpdateResponse(HEARTBEAT_MESSAGE);

type SubscribeCall = grpc.ServerWritableStream<SubscribeRequestMessage | undefined, Buffer>;

/** `SubscribeRequest` as proto-loader decodes it (repeated fields default to empty). */
interface SubscribeRequestMessage {
  snapshot?: boolean;
  fleet_ids?: number[];
  trailer_ids?: string[];
  resume_after?: string;
}

/** The core's request of a decoded `SubscribeRequest`; an empty message asks for nothing (as before). */
export function liveStreamRequestOf(message: SubscribeRequestMessage | undefined): LiveStreamRequest {
  const request: LiveStreamRequest = {};
  if (message?.snapshot) request.snapshot = true;
  if (message?.fleet_ids?.length || message?.trailer_ids?.length) request.filter = { fleetIds: message.fleet_ids ?? [], trailerIds: message.trailer_ids ?? [] };
  if (message?.resume_after) request.resumeAfter = message.resume_after;
  return request;
}

/** Builds the LiveFeed service; nothing runs until a server serves it. */
export function createLiveFeedService(options: LiveFeedServiceOptions): LiveFeedService {
  const { tokens, hub } = options;
  const streams = new LiveStreams({
    hub,
    tokens,
    clock: options.clock ?? options.tokens.clock ?? systemClock,
    heartbeatIntervalMs: options.heartbeatIntervalMs,
    maxStreamsPerCustomer: options.maxStreamsPerCustomer,
    streamName: 'LiveFeed',
    connectLimits: options.connectLimits,
  });
  // Encoded once per event, whichever stream asks first; the event is dropped with its bytes once
  // no stream's pending updates hold it any more.
  const encoded = new WeakMap<LiveTrailerEvent, Buffer>();
  const encode = (event: LiveTrailerEvent): Buffer => {
    let bytes = encoded.get(event);
    if (bytes === undefined) {
      bytes = encodeLiveUpdateResponse(liveUpdateResponseOf(event));
      encoded.set(event, bytes);
    }
    return bytes;
  };
  const stopRechecks = options.recheckOn?.(() => streams.recheckAll());
  // A heartbeat carries its own stream's position: only the one without a position is shared.
  const heartbeatBytes = (position: string | null): Buffer =>
    position === null ? HEARTBEAT_BYTES : encodeLiveUpdateResponse(heartbeatMessageOf(position));

  async function subscribe(call: SubscribeCall): Promise<void> {
    const log = streamLog(call, options.accessLog);
    let claims: AccessClaims;
    let request: LiveStreamRequest;
    try {
      // Refused before the token is checked once shutting down; `open` checks again after.
      if (streams.closing) throw streams.closing;
      claims = await tokens.verify(bearerToken(call.metadata));
      requireAudience(claims, 'customers');
      request = liveStreamRequestOf(call.request);
      checkLiveStreamRequest(request);
      await streams.countConnect(claims, peerAddress(call.getPeer()));
      streams.admit(claims);
    } catch (error) {
      endCall(call, error);
      log.closed(error);
      return;
    }
    if (call.cancelled) return log.closed(null);
    log.opened(claims.sub);
    const stream = streams.open(
      claims,
      {
        write: (event) => call.write(encode(event)),
        signal: (signal) => call.write(encodeLiveUpdateResponse(signalMessageOf(signal))),
        // No `writeSnapshot`: the contract sends one trailer a message, and grpc-js frames each
        // message itself (a copy behind a 5-byte prefix, one HTTP/2 write) with no public way to
        // hand it framed bytes. A shared snapshot's states are the same objects for every stream,
        // so `encode` serializes each once, not once a stream.
        writeHeartbeat: (position) => void call.write(heartbeatBytes(position)),
        get full() {
          return call.writableNeedDrain;
        },
        end: (reason) => {
          if (!call.cancelled) endCall(call, reason);
        },
      },
      (reason) => log.closed(reason),
      request,
    );
    // 'cancelled' fires whenever the call is over: the client went away, or the status was sent.
    call.on('cancelled', () => stream.clientGone());
    call.on('drain', () => stream.drained());
  }

  return {
    definition: liveFeedServiceDefinition,
    implementation: { Subscribe: subscribe as grpc.handleServerStreamingCall<unknown, Buffer> },
    get openStreams() {
      return streams.size;
    },
    endAllStreams(reason = new TrailwireError('unavailable', 'The live feed is shutting down.')) {
      stopRechecks?.();
      streams.endAll(reason);
    },
  };
}

/** Creates the LiveFeed service and adds it to `server`. */
export function addLiveFeedService(server: grpc.Server, options: LiveFeedServiceOptions): LiveFeedService {
  const service = createLiveFeedService(options);
  server.addService(service.definition, service.implementation);
  return service;
}

const SUBSCRIBE_ROUTE = '/livefeed.v1.LiveFeed/Subscribe';

/**
 * The access-log lines of one Subscribe call: `opened` once authenticated, `closed` with the reason
 * (null: the client went away, CANCELLED). Fields as the HTTP access log's, `access: 'grpc'`.
 */
function streamLog(call: SubscribeCall, accessLog: LiveFeedServiceOptions['accessLog']) {
  const started = performance.now();
  const [incoming] = call.metadata.get('x-request-id');
  const requestId = requestIdFrom(incoming);
  const fields = { access: 'grpc', requestId, route: SUBSCRIBE_ROUTE, clientAddress: call.getPeer() };
  let principalId: string | undefined;
  const write = (line: Record<string, unknown>, message: string) => accessLog?.logger[accessLog.level ?? 'info']({ ...fields, principalId, ...line }, message);
  return {
    opened(customerId: string) {
      principalId = customerId;
      write({ event: 'stream.open', audience: 'customers' }, 'stream opened');
    },
    closed(reason: unknown) {
      const status = reason === null ? 'CANCELLED' : grpc.status[grpcStatusOf(reason).code];
      write({ event: 'stream.close', status, durationMs: millisecondsSince(started) }, 'stream closed');
    },
  };
}

/** Ends the call with the status of `error`, after the messages already written. */
function endCall(call: SubscribeCall, error: unknown): void {
  // grpc-js turns an 'error' event on a server stream into the call's final status.
  call.emit('error', { ...grpcStatusOf(error), metadata: new grpc.Metadata() });
}

/** The address of a call's peer (`ipv4:1.2.3.4:5678`, `ipv6:[::1]:5678`, `unix:/path`), without its port. */
export function peerAddress(peer: string): string {
  const match = /^(?:ipv[46]:)?\[?([^\]]*?)\]?:\d+$/.exec(peer);
  return match ? match[1]! : peer;
}

/** The token of the `authorization: Bearer <token>` metadata. */
function bearerToken(metadata: grpc.Metadata): string {
  const [value] = metadata.get('authorization');
  if (value === undefined) throw new TrailwireError('missing_token', 'The authorization metadata with a Bearer token is required.');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(String(value));
  if (!match) throw new TrailwireError('invalid_token', 'The authorization metadata must be `Bearer <token>`.');
  return match[1]!;
}
