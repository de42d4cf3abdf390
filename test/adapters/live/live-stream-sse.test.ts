/**
 * The live stream conformance suite over `GET /api/v1/live` (Server-Sent Events), read with fetch as
 * a page does. A resume is asked for as `EventSource` asks for it when it reconnects: the
 * `Last-Event-ID` header; the snapshot and the filters as query parameters.
 */
import { createLiveEventsRoute } from '../../../adapters/koa/live-events-route.ts';
import type { LiveStreamRequest } from '../../../core/live-streams.ts';
import { type LiveStreamClient, type LiveStreamEnd, type LiveStreamMessage, runLiveStreamConformance } from '../../conformance/live-stream.ts';
import { startTestApp } from '../../support/test-app.ts';
import { recordMessages } from './record-messages.ts';

/** The core's error code of an HTTP problem status (the codes these cases meet). */
const CODE_OF_STATUS: Record<number, string> = { 400: 'validation_failed', 401: 'invalid_token', 429: 'rate_limited', 503: 'unavailable' };

function messageOf(event: string, id: string | undefined, data: string): LiveStreamMessage | null {
  if (event === 'heartbeat' || event === 'snapshot-end') return { kind: event, position: id };
  if (event === 'resume-reset') return { kind: 'resume-reset' };
  if (event === 'update' || event === 'snapshot') {
    const trailer = JSON.parse(data) as { id: string; fleetId: number };
    return { kind: event, position: id, trailerId: trailer.id, fleetId: trailer.fleetId };
  }
  return null;
}

runLiveStreamConformance({
  name: 'Server-Sent Events',
  invalidPosition: 'reset',
  async start(settings) {
    const app = await startTestApp({
      core: { live: { snapshot: settings.snapshot }, limits: settings.limits },
      app: (trailwire) => ({
        liveEvents: createLiveEventsRoute(trailwire, { heartbeatIntervalMs: settings.heartbeatIntervalMs, maxStreamsPerCustomer: settings.maxStreamsPerCustomer }),
      }),
    });
    return {
      trailwire: app.trailwire,
      store: app.store,
      clock: app.clock,
      async subscribe(token: string, request: LiveStreamRequest = {}): Promise<LiveStreamClient> {
        const query = new URLSearchParams();
        if (request.snapshot) query.set('snapshot', 'true');
        if (request.filter?.fleetIds?.length) query.set('fleetIds', request.filter.fleetIds.join(','));
        if (request.filter?.trailerIds?.length) query.set('trailerIds', request.filter.trailerIds.join(','));
        const headers: Record<string, string> = { authorization: `Bearer ${token}` };
        if (request.resumeAfter !== undefined) headers['last-event-id'] = request.resumeAfter;
        const controller = new AbortController();
        const recorder = recordMessages();
        const response = await fetch(`${app.url}/api/v1/live?${query}`, { headers, signal: controller.signal });
        const ended = (async (): Promise<LiveStreamEnd> => {
          if (!response.ok || !response.body) {
            await response.text();
            return { code: CODE_OF_STATUS[response.status] ?? String(response.status) };
          }
          let end: LiveStreamEnd = null;
          let buffer = '';
          const decoder = new TextDecoder();
          try {
            for await (const chunk of response.body) {
              buffer += decoder.decode(chunk as Uint8Array, { stream: true });
              let split: number;
              while ((split = buffer.indexOf('\n\n')) >= 0) {
                const fields = new Map<string, string>();
                for (const line of buffer.slice(0, split).split('\n')) {
                  const colon = line.indexOf(':');
                  fields.set(line.slice(0, colon), line.slice(colon + 1).replace(/^ /, ''));
                }
                buffer = buffer.slice(split + 2);
                const event = fields.get('event') ?? 'message';
                if (event === 'error') end = { code: CODE_OF_STATUS[(JSON.parse(fields.get('data')!) as { status: number }).status] ?? 'internal' };
                const message = messageOf(event, fields.get('id'), fields.get('data') ?? '');
                if (message) recorder.push(message);
              }
            }
          } catch {
            // Aborted by close().
          }
          return end;
        })();
        void ended.then(() => recorder.end());
        return { messages: recorder.messages, ended, until: recorder.until, close: () => controller.abort() };
      },
      close: () => app.close(),
    };
  },
});
