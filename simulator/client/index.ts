/**
 * `trailwire/client`: the HTTP client (`TrailwireClient`: tokens, retries, paging, intake) and the
 * LiveFeed client (`subscribeLiveFeed`: streaming with reconnection), for integrators and the load
 * simulator alike.
 */
export * from './http-client.ts';
export * from './live-feed-client.ts';
