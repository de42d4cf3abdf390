/**
 * `trailwire/client`: the HTTP client (`TrailwireClient`: tokens, retries, paging, intake) and the
 * LiveFeed client (`subscribeLiveFeed`: streaming with reconnection), for integrators and the load
 * simulator alike. It talks to any Trailwire deployment over the network; nothing here needs the
 * server's code.
 */

/**
 * `new TrailwireClient({ baseUrl, audience, apiKey, ... })` (`TrailwireClientOptions`) caches the
 * token and refreshes it before expiry, re-authenticates once on a 401, honours `Retry-After` and
 * backs off with jitter; `request` answers a `ClientResponse` (`RequestOptions`), `paginate`
 * follows `next`, `sendTelemetry`, `intakeStatus` (`IntakeStatus`) and `intakeStatuses`
 * (`IntakeStatuses`: up to `MAX_INTAKE_STATUS_IDS` as one read) are partner intake, `rotateKey`
 * rotates. An error that retries did not cure is a `TrailwireHttpError` carrying the problem.
 */
export {
  MAX_INTAKE_STATUS_IDS,
  TrailwireClient,
  TrailwireHttpError,
  type ClientResponse,
  type IntakeStatus,
  type IntakeStatuses,
  type RequestOptions,
  type TrailwireClientOptions,
} from './http-client.ts';
/**
 * `subscribeLiveFeed({ target, token }, handlers)` (`LiveFeedOptions`, `LiveFeedHandlers`) streams
 * `LiveUpdate`s (each a `LiveTrailer` in the read API's spelling) and heartbeats, reconnecting with
 * backoff (a fresh token after UNAUTHENTICATED, giving up after PERMISSION_DENIED) and resuming after
 * the last position received (`onResumeReset` when it left the server's window), and answers a
 * `LiveFeedSubscription` (`pause`, `resume`, `close`); each `LiveFeedDisconnect` is reported.
 * `subscribeWithClient(client, { target }, handlers)` takes its tokens from a customer `TrailwireClient`.
 */
export {
  subscribeLiveFeed,
  subscribeWithClient,
  type LiveFeedDisconnect,
  type LiveFeedHandlers,
  type LiveFeedOptions,
  type LiveFeedSubscription,
  type LiveTrailer,
  type LiveUpdate,
} from './live-feed-client.ts';
/**
 * `subscribeLiveEvents({ baseUrl, token }, handlers)` (`LiveEventsOptions`, `LiveEventsHandlers`)
 * reads the same feed from `GET /api/v1/live` (Server-Sent Events) for those without gRPC:
 * reconnection with backoff, `Last-Event-ID` resume, a fresh token after a 401, `pause()`/`resume()`.
 */
export {
  subscribeLiveEvents,
  type LiveEventsDisconnect,
  type LiveEventsHandlers,
  type LiveEventsOptions,
  type LiveEventsSubscription,
} from './live-events-client.ts';
