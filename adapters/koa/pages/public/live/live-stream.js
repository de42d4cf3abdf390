// @ts-check
// The live updates of `GET /api/v1/live`, kept flowing: a dropped stream reconnects with backoff
// (1 s doubling to 30 s, reset once a stream is up again), a stream the server ends because the
// token expired re-authenticates with the key in memory and reconnects at once, and a stream silent
// for longer than HEARTBEAT_TIMEOUT_MS (four missed 15 s heartbeats) counts as dropped. A reconnect
// sends the last event id received as `Last-Event-ID`, as EventSource would: the server replays what
// was missed meanwhile, or (the position left its replay window) sends `resume-reset` and a snapshot
// of every trailer, so the map never silently misses an update.
import { ApiError } from './api.js';
import { readEventStream } from './sse.js';

const HEARTBEAT_TIMEOUT_MS = 60_000;
const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

/**
 * @typedef {{ state: 'connecting' } | { state: 'live' } | { state: 'reconnecting', detail: { delayMs: number, attempt: number, reason: string } }
 *   | { state: 'renewing', detail: { problem: Problem } } | { state: 'failed', detail: { error: ApiError } }} StreamState
 */

/**
 * Starts the stream. `onUpdate(trailer)` for each update; `onState(state, detail)` with state one of
 * `connecting`, `live`, `reconnecting` ({ delayMs, attempt, reason }), `renewing` (the token
 * expired), `failed` (an ApiError the key cannot get past: stop and ask for another key).
 * @param {ReturnType<typeof import('./api.js').createApiClient>} api
 * @param {{ onUpdate(trailer: Trailer): void, onState(state: StreamState['state'], detail?: any): void }} handlers
 */
export function startLiveStream(api, { onUpdate, onState }) {
  let stopped = false;
  /** @type {AbortController | undefined} */
  let controller;
  let attempt = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  let live = false;
  /** The position of the last update or heartbeat received: where a reconnect resumes. */
  let lastEventId = '';

  /** @param {number} ms */
  const wait = (ms) => new Promise((resolve) => (timer = setTimeout(resolve, ms)));

  /** @returns {Promise<{ ended: Problem | undefined }>} */
  async function runOnce() {
    const current = (controller = new AbortController());
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let watchdog;
    const feed = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => current.abort(new Error('no heartbeat')), HEARTBEAT_TIMEOUT_MS);
    };
    try {
      onState('connecting');
      feed();
      /** @type {Record<string, string>} */
      const headers = lastEventId === '' ? { Accept: 'text/event-stream' } : { Accept: 'text/event-stream', 'Last-Event-ID': lastEventId };
      const response = await api.authorizedFetch('/api/v1/live', { headers, signal: current.signal });
      if (!response.ok || !response.body) throw await api.failure(response);
      for await (const { event, data, id } of readEventStream(response.body)) {
        feed();
        if (id !== '') lastEventId = id;
        if (event === 'heartbeat') {
          if (!live) onState('live');
          attempt = 0;
          live = true;
        } else if (event === 'update' || event === 'snapshot') onUpdate(JSON.parse(data));
        else if (event === 'error') return { ended: JSON.parse(data) };
      }
      return { ended: undefined };
    } finally {
      clearTimeout(watchdog);
    }
  }

  (async () => {
    while (!stopped) {
      /** @type {string} */
      let reason;
      try {
        const { ended } = await runOnce();
        live = false;
        if (stopped) return;
        if (ended?.status === 401) {
          // The server ends every stream when its token expires (or the key was rotated): renew and go on.
          onState('renewing', { problem: ended });
          await api.authenticate();
          continue;
        }
        reason = ended ? (ended.detail ?? ended.title ?? 'the server ended the stream') : 'the server closed the stream';
      } catch (error) {
        live = false;
        if (stopped) return;
        if (error instanceof ApiError && [401, 403, 404].includes(error.status)) {
          // The key itself is refused (rotated, or not a customer key): retrying cannot help.
          onState('failed', { error });
          return;
        }
        reason = error instanceof Error ? error.message : String(error);
        if (error instanceof ApiError && error.retryAfterSeconds) {
          attempt++;
          const delayMs = error.retryAfterSeconds * 1000;
          onState('reconnecting', { delayMs, attempt, reason });
          await wait(delayMs);
          continue;
        }
      }
      attempt++;
      const delayMs = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (attempt - 1));
      onState('reconnecting', { delayMs, attempt, reason });
      await wait(delayMs);
    }
  })();

  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      controller?.abort();
    },
  };
}
