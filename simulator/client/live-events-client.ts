/**
 * A client of `GET /api/v1/live`, the live feed as Server-Sent Events, for integrators without gRPC
 * and for the load simulator's SSE subscribers. It reads the stream with `fetch` (so it can send the
 * `Authorization` header, which `EventSource` cannot), hands each heartbeat and trailer update on
 * (in the LiveFeed client's `LiveUpdate` shape), and reconnects when the stream ends — with
 * exponential backoff and jitter, a fresh token when the server said the token is no longer good
 * (a 401 answer, or an `error` event with status 401: expired or rotated), and no retry after a 403
 * (a partner token), which reconnecting cannot cure.
 *
 * It keeps its place as `EventSource` does: each reconnection sends `Last-Event-ID` with the last
 * position received (on an update, or on a heartbeat once caught up), so the server replays what
 * was missed, or says `resume-reset` and sends a snapshot; an update at or before that position is
 * not handed on twice. An update's `ts` is the `updatedAt` its event carries (when the server made
 * it, as the LiveFeed's `ts`).
 * Pausing stops reading the body, which is how a slow consumer looks to the server (TCP fills up).
 */
import { Backoff } from '../../core/backoff.ts';
import { comparePositions, isPosition } from '../../core/live-replay.ts';
import type { LiveFeedHandlers, LiveTrailer, LiveUpdate } from './live-feed-client.ts';

/** Why a stream ended. */
export interface LiveEventsDisconnect {
  /** The HTTP status of a refusal, or of the problem in the stream's final `error` event; 0 when the connection broke or ended without one. */
  status: number;
  detail: string;
  /** Whether the client will connect again. */
  willReconnect: boolean;
}

/** The LiveFeed client's handlers (updates, heartbeats, resume resets, connecting, giving up — after a 403 here), with the stream's end in HTTP terms. */
export type LiveEventsHandlers = Omit<LiveFeedHandlers, 'onDisconnect'> & { onDisconnect?(disconnect: LiveEventsDisconnect): void };

export interface LiveEventsOptions {
  /** Base URL of the data API; the stream is `GET {baseUrl}/api/v1/live`. */
  baseUrl: string;
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
  random?: () => number;
}

/** An open subscription: closing it ends the current stream and stops reconnecting. */
export interface LiveEventsSubscription {
  /** The last position received, or null: what a new stream resumes after. */
  readonly position: string | null;
  readonly reconnects: number;
  /** Stops reading from the stream (the server sees a slow consumer). */
  pause(): void;
  resume(): void;
  close(): void;
}

/** Subscribes to `GET /api/v1/live`; updates and heartbeats go to `handlers` until `close()`. */
export function subscribeLiveEvents(options: LiveEventsOptions, handlers: LiveEventsHandlers): LiveEventsSubscription {
  const settings = { reconnectBaseMs: 250, reconnectMaxMs: 10_000, jitterMs: 250, maxReconnects: Infinity, random: Math.random, ...options };
  let closed = false;
  let position: string | null = null;
  let reconnects = 0;
  const backoff = new Backoff(settings.reconnectBaseMs, settings.reconnectMaxMs);
  let timer: NodeJS.Timeout | undefined;
  let abort: AbortController | undefined;
  // Reading waits on this gate while paused.
  let paused = false;
  let unpause: (() => void) | undefined;

  const connect = async (): Promise<void> => {
    if (closed) return;
    let token: string;
    try {
      token = await settings.token();
    } catch (error) {
      return ended(401, `no token: ${(error as Error).message}`);
    }
    if (closed) return;
    handlers.onConnecting?.(reconnects);
    abort = new AbortController();
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'text/event-stream' };
    if (position !== null) headers['last-event-id'] = position;
    let response: Response;
    try {
      response = await fetch(`${settings.baseUrl}/api/v1/live`, { headers, signal: abort.signal });
    } catch (error) {
      return ended(0, (error as Error).message);
    }
    if (response.status !== 200 || !response.body) {
      const problem = (await response.json().catch(() => ({}))) as { detail?: string };
      return ended(response.status, problem.detail ?? `answered ${response.status}`);
    }
    let final = { status: 0, detail: 'the stream ended' };
    try {
      for await (const event of serverSentEvents(response.body)) {
        if (closed) return;
        // The next read waits while paused: the body stays unread and the server's writes back up.
        if (paused) await new Promise<void>((resolve) => (unpause = resolve));
        backoff.reset();
        if (event.type === 'error') {
          const problem = JSON.parse(event.data) as { status?: number; detail?: string };
          final = { status: problem.status ?? 0, detail: problem.detail ?? 'error event' };
        } else receive(event);
      }
    } catch (error) {
      if (closed) return;
      final = { status: 0, detail: (error as Error).message };
    }
    ended(final.status, final.detail);
  };

  const receive = (event: { type: string; id: string | undefined; data: string }) => {
    switch (event.type) {
      case 'heartbeat':
        advanceTo(event.id);
        handlers.onHeartbeat?.();
        return;
      case 'resume-reset':
        handlers.onResumeReset?.();
        return;
      case 'snapshot-end':
        advanceTo(event.id);
        return;
      case 'snapshot':
      case 'update': {
        if (event.type === 'update' && event.id !== undefined && position !== null && isPosition(event.id) && comparePositions(event.id, position) <= 0) return;
        advanceTo(event.id);
        const update = liveUpdateOfEvent(JSON.parse(event.data) as UpdateJson);
        if (event.type === 'snapshot') update.snapshot = true;
        handlers.onUpdate?.(update);
      }
    }
  };

  const advanceTo = (next: string | undefined) => {
    if (next === undefined || !isPosition(next)) return;
    if (position === null || comparePositions(next, position) > 0) position = next;
  };

  const ended = (status: number, detail: string) => {
    abort = undefined;
    if (closed) return;
    const fatal = status === 403;
    const willReconnect = !fatal && reconnects < settings.maxReconnects;
    handlers.onDisconnect?.({ status, detail, willReconnect });
    if (!willReconnect) {
      closed = true;
      handlers.onGiveUp?.(new Error(`live event stream ended with ${status}: ${detail}`));
      return;
    }
    if (status === 401) settings.onTokenRejected?.();
    reconnects++;
    const delay = backoff.next() + Math.floor(settings.random() * settings.jitterMs);
    timer = setTimeout(() => void connect(), delay);
  };

  void connect();

  return {
    get position() {
      return position;
    },
    get reconnects() {
      return reconnects;
    },
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      unpause?.();
      unpause = undefined;
    },
    close() {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      abort?.abort();
      unpause?.();
    },
  };
}

/**
 * The events of a `text/event-stream` body (the WHATWG parsing rules: `event`, `id`, `data` lines,
 * a blank line ends an event, `:` lines are comments, CR, LF or CRLF line ends). The live page has
 * its own reader (`adapters/koa/pages/public/live/sse.js`, browser code with DOM types); this one
 * keeps each event's own id, which an update's time is read from.
 */
async function* serverSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ type: string; id: string | undefined; data: string }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let type = '';
  let id: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A lone CR at the end of what has come may be the first half of a CRLF: wait for more.
        if (buffer[newline] === '\r' && newline === buffer.length - 1) break;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          if (data.length > 0 || type !== '') yield { type: type || 'message', id, data: data.join('\n') };
          type = '';
          id = undefined;
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') type = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id') id = value;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

/** A trailer as `GET /api/v1/trailers/{id}` (and the stream's `data`) spells it. */
interface TrailerJson {
  id: string;
  fleetId: number | null;
  unitId: string | null;
  vin: string | null;
  status: { name: string; isWarning: boolean; isFault: boolean } | null;
  statusDate: string | null;
  faultedDevices: number;
  warningDevices: number;
  telemetry: { timestamp: string; lat: number; long: number; speed: number; heading: string } | null;
}

/** An update event's `data`: the trailer and when the server made the update (a snapshot's has no time). */
interface UpdateJson extends TrailerJson {
  updatedAt?: string;
}

/** An update event as a `LiveUpdate`: its time is the server's `updatedAt` (0 on a snapshot's). */
function liveUpdateOfEvent(trailer: UpdateJson): LiveUpdate {
  const at = (text: string | null | undefined) => (text ? Date.parse(text) : null);
  const live: LiveTrailer = {
    id: trailer.id,
    unitId: trailer.unitId,
    vin: trailer.vin,
    status: trailer.status,
    statusDate: at(trailer.statusDate),
    faultedDevices: trailer.faultedDevices,
    warningDevices: trailer.warningDevices,
    telemetry: trailer.telemetry ? { ...trailer.telemetry, timestamp: at(trailer.telemetry.timestamp) } : null,
  };
  return { fleetId: trailer.fleetId ?? 0, fleetName: null, ts: at(trailer.updatedAt) ?? 0, trailer: live };
}
