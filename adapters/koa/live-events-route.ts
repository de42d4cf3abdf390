/**
 * `GET /api/v1/live`: the LiveFeed's updates as Server-Sent Events (contract 12), for browsers
 * (`fetch` with an `Authorization` header and a streaming body reader) and tools without gRPC
 * (`curl -N`). The stream follows the LiveFeed's rules through the core's `LiveStreams` over the same
 * `LiveHub` as the gRPC adapter: a heartbeat at once and every interval, the token's customer's
 * updates only, one cap per customer over both transports, the end at the token's expiry or
 * revocation, and on shutdown. What differs is the wire:
 *
 * - `event: update`, `id: <position>` (`<ms>-<seq>`, its place in the replay window; when the server
 *   keeps no window, `<update time in epoch ms>-<trailer id>`), `data:` the trailer as
 *   `GET /api/v1/trailers/{id}` answers it (`core/views.ts`) and `updatedAt`, when the server made
 *   the update (RFC 3339 in ms, the LiveFeed's `ts`), on one line.
 * - `event: heartbeat`, `data: {"timestamp": "<RFC 3339>"}`, with `id: <position>` when the stream
 *   has caught up to one (so a browser's `Last-Event-ID` stays current while nothing changes).
 * - Asked for with `?snapshot=true` (or after a resume that is too old): `event: snapshot` per
 *   trailer (the same trailer JSON, no `id`), then `event: snapshot-end` with `id: <position>`.
 * - `event: resume-reset`: the position resumed from had left the replay window (a snapshot follows).
 * - `event: error`, `data:` an RFC 9457 problem naming why the stream ends (`invalid_token`: expired
 *   or rotated, authenticate again; `unavailable`: shutting down; `rate_limited`: the client fell too
 *   far behind), then the response ends. A refusal before the stream starts (401, 403, 429, 503) is
 *   an ordinary problem+json response; so is a connect over the connect limits (429 with
 *   `Retry-After`: per customer and per client address, `LimitSettings.liveConnect*`).
 *
 * Back-pressure: an update's `write` answers what the socket's `write` answers, and the socket's
 * `drain` tells the hub to go on, so a slow reader only ever holds its own coalesced updates. A
 * snapshot's frames are serialized once per snapshot, which streams of one customer and filter share
 * for 2 s, into one Buffer, and each stream sends that same Buffer with one write (issue 37).
 * Resume (issue 32): `Last-Event-ID` (which `EventSource` sends by itself when it reconnects) or
 * `?resumeAfter=` is the position to resume after, as the LiveFeed's `resume_after`; `?fleetIds=`
 * and `?trailerIds=` (comma-separated, or repeated) filter. A `Last-Event-ID` that is no position
 * (an id of a server without a window) is resumed as one no window holds: `resume-reset` and a
 * snapshot, rather than a 400 the browser would retry forever.
 */
import Router from '@koa/router';
import type { ServerResponse } from 'node:http';
import type { TrailwireLogger } from './logger.ts';
import { TrailwireError, isTrailwireError } from '../../core/errors.ts';
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { LiveSignal } from '../../core/live-subscriber.ts';
import { checkLiveStreamRequest, type LiveStreamRequest, LiveStreams } from '../../core/live-streams.ts';
import { isPosition } from '../../core/live-replay.ts';
import type { Trailwire } from '../../core/trailwire.ts';
import { rfc3339, trailerView } from '../../core/views.ts';
import { type AuthenticatedState, bearerAuth } from './bearer-auth.ts';
import { problemBody } from './problem.ts';
import { setRateLimitHeaders } from './answer-headers.ts';
import { type AccessLogState, setRequestIdHeader } from './edge.ts';

export const LIVE_EVENTS_PATH = '/api/v1/live';

export interface LiveEventsOptions {
  /** Milliseconds between heartbeats; the first is sent as soon as the stream opens. Default 15,000 (the LiveFeed's). */
  heartbeatIntervalMs?: number;
  /** Open live streams (SSE and LiveFeed together) one customer may hold in this process; the next is refused 429. Default 100. */
  maxStreamsPerCustomer?: number;
  /** Where a stream ended by an unexpected error is logged. Default: nowhere. */
  logger?: TrailwireLogger;
}

/** The route and a handle on its streams. */
export interface LiveEventsRoute {
  router: Router;
  /** How many streams are open. */
  readonly openStreams: number;
  /**
   * Ends every open stream with `reason` (default `unavailable`: shutting down), a final `error`
   * event each, and refuses new ones (503) from then on. Call it before closing the HTTP server,
   * which otherwise waits for the streams.
   */
  endAllStreams(reason?: TrailwireError): void;
}

/** Builds the route; mount `router` below `problemMiddleware` (the app does). */
export function createLiveEventsRoute(trailwire: Trailwire, options: LiveEventsOptions = {}): LiveEventsRoute {
  const streams = new LiveStreams({
    hub: trailwire.live,
    tokens: trailwire.tokens,
    clock: trailwire.clock,
    heartbeatIntervalMs: options.heartbeatIntervalMs,
    maxStreamsPerCustomer: options.maxStreamsPerCustomer,
    streamName: 'live event',
    connectLimits: trailwire.liveConnectLimits,
  });
  // A revoked signing key ends the streams its tokens opened at once, not at the next heartbeat.
  const stopRechecks = trailwire.keys.onChange(() => streams.recheckAll());
  // Encoded once per event, whichever stream asks first, and dropped with it.
  const encoded = new WeakMap<LiveTrailerEvent, Buffer>();
  const encode = (event: LiveTrailerEvent): Buffer => {
    let bytes = encoded.get(event);
    if (bytes === undefined) {
      bytes = Buffer.from(eventFrame(event));
      encoded.set(event, bytes);
    }
    return bytes;
  };
  // A snapshot's frames, serialized once into one Buffer per snapshot (the states array a shared
  // snapshot hands every stream of its customer and filter) and dropped with it.
  const encodedSnapshots = new WeakMap<readonly LiveTrailerEvent[], Buffer>();
  const encodeSnapshot = (states: readonly LiveTrailerEvent[]): Buffer => {
    let bytes = encodedSnapshots.get(states);
    if (bytes === undefined) {
      bytes = Buffer.from(states.map(eventFrame).join(''));
      encodedSnapshots.set(states, bytes);
    }
    return bytes;
  };
  const heartbeat = (position: string | null) =>
    `${position === null ? '' : `id: ${position}\n`}event: heartbeat\ndata: ${JSON.stringify({ timestamp: rfc3339(trailwire.clock.now()) })}\n\n`;
  const signal = (which: LiveSignal) =>
    which.kind === 'resume-reset'
      ? `event: resume-reset\ndata: ${JSON.stringify({ detail: 'The position resumed from has left the replay window; updates may have been missed. A snapshot follows.' })}\n\n`
      : `${which.position === null ? '' : `id: ${which.position}\n`}event: snapshot-end\ndata: {}\n\n`;

  const router = new Router();
  router.get(LIVE_EVENTS_PATH, bearerAuth(trailwire.tokens, 'customers'), async (ctx) => {
    const { claims } = ctx.state as AuthenticatedState;
    const state = ctx.state as AccessLogState;
    // Refused with a problem+json status while no byte of the stream is sent yet.
    const request = liveStreamRequestOf(ctx.query, ctx.get('Last-Event-ID'));
    checkLiveStreamRequest(request);
    const connects = await streams.countConnect(claims, ctx.ip);
    streams.admit(claims);
    if (connects) setRateLimitHeaders(ctx, connects);
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    ctx.set('Cache-Control', 'no-cache');
    // nginx buffers proxied responses unless told not to; a buffered event stream delivers nothing.
    ctx.set('X-Accel-Buffering', 'no');
    if (ctx.method === 'HEAD') return;
    ctx.respond = false;
    // The headers go out now, before the edge layer would add the request id.
    setRequestIdHeader(ctx);
    const res = ctx.res;
    res.flushHeaders();
    const reason = await new Promise<unknown>((resolve) => {
      const stream = streams.open(
        claims,
        {
          write: (event) => res.write(encode(event)),
          signal: (which) => res.write(signal(which)),
          // One write of the shared Buffer, which the socket queues by reference (no copy per
          // stream). A reader that does not read holds that reference only: the write answers
          // false, and the hub then coalesces its live updates (bounded) until 'drain'.
          writeSnapshot: (states) => res.write(encodeSnapshot(states)),
          writeHeartbeat: (position) => void res.write(heartbeat(position)),
          get full() {
            return res.writableNeedDrain;
          },
          end: (why) => endResponse(res, why, state.requestId, options.logger),
        },
        resolve,
        request,
      );
      state.streamOpened?.();
      res.on('drain', () => stream.drained());
      // A socket error ends the response and 'close' follows; the error itself needs no handling here.
      res.on('error', () => {});
      // 'close' also follows our own end(); the stream is finished by then and ignores it.
      res.on('close', () => stream.clientGone());
      if (res.destroyed) stream.clientGone();
    });
    state.streamEnd = reason === null ? 'client_closed' : isTrailwireError(reason) ? reason.code : 'internal';
  });

  return {
    router,
    get openStreams() {
      return streams.size;
    },
    endAllStreams(reason?: TrailwireError) {
      stopRechecks();
      streams.endAll(reason);
    },
  };
}

/** The SSE frame of an update or a snapshot's state. */
function eventFrame(event: LiveTrailerEvent): string {
  // A snapshot's updates carry no id: the client resumes after the snapshot's end, not inside it.
  // An update carries when the server made it (the LiveFeed's `ts`), from which a client measures
  // how long it took to arrive; a snapshot is a state, not an update.
  return event.snapshot
    ? `event: snapshot\ndata: ${JSON.stringify(trailerView(event.trailer))}\n\n`
    : `id: ${event.position ?? `${event.ts}-${event.trailer.id}`}\nevent: update\ndata: ${JSON.stringify({ ...trailerView(event.trailer), updatedAt: rfc3339(event.ts) })}\n\n`;
}

/** Where a resume from an id that is no position starts: a position no window holds (`resume-reset` and a snapshot). */
const UNKNOWN_POSITION = '0-0';

/**
 * The core's request of the query (`snapshot`, `fleetIds`, `trailerIds`, `resumeAfter`) and the
 * `Last-Event-ID` header; `resumeAfter` wins over the header when both are given.
 */
export function liveStreamRequestOf(query: Record<string, string | string[] | undefined>, lastEventId: string): LiveStreamRequest {
  const list = (name: string) =>
    ([] as string[])
      .concat(query[name] ?? [])
      .flatMap((value) => value.split(','))
      .map((value) => value.trim())
      .filter((value) => value !== '');
  const request: LiveStreamRequest = {};
  const snapshot = ([] as string[]).concat(query.snapshot ?? []).at(-1);
  if (snapshot !== undefined) {
    if (!['true', 'false', '1', '0', ''].includes(snapshot)) throw badQuery('snapshot', 'must be true or false');
    if (snapshot === 'true' || snapshot === '1' || snapshot === '') request.snapshot = true;
  }
  const fleetIds = list('fleetIds');
  const trailerIds = list('trailerIds');
  if (fleetIds.length > 0 || trailerIds.length > 0) {
    if (!fleetIds.every((id) => /^\d{1,15}$/.test(id))) throw badQuery('fleetIds', 'must be fleet ids (integers)');
    request.filter = { fleetIds: fleetIds.map(Number), trailerIds };
  }
  const resumeAfter = ([] as string[]).concat(query.resumeAfter ?? []).at(-1);
  if (resumeAfter !== undefined) request.resumeAfter = resumeAfter;
  else if (lastEventId !== '') request.resumeAfter = isPosition(lastEventId) ? lastEventId : UNKNOWN_POSITION;
  return request;
}

function badQuery(path: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `The query parameter ${path} ${message}.`, { errors: [{ path, message }] });
}

/** Writes the final `error` event naming why the stream ends, and ends the response. */
function endResponse(res: ServerResponse, reason: unknown, requestId: string | undefined, logger: TrailwireLogger | undefined): void {
  if (res.destroyed || res.writableEnded) return;
  const error = isTrailwireError(reason) ? reason : new TrailwireError('internal', 'The live stream failed.', { cause: reason });
  if (error.code === 'internal') logger?.error({ err: reason, requestId, route: LIVE_EVENTS_PATH }, 'live event stream failed');
  res.end(`event: error\ndata: ${JSON.stringify(problemBody(error, requestId))}\n\n`);
}
