/**
 * `trailwire/grpc`: the gRPC transport of Trailwire — the LiveFeed service (`livefeed.v1.LiveFeed`,
 * contract 8) over the core's live hub, the standard health service, a ready-to-run server, and the
 * error-code-to-gRPC-status table. The `.proto` files are under `PROTO_ROOT` (also exported as
 * `trailwire/proto/livefeed/v1/livefeed.proto`).
 */

/**
 * `startGrpcServer({ port, host, tokens, hub, heartbeatIntervalMs })` is the ready-made server
 * (`GrpcServerOptions`): LiveFeed and health on one `grpc.Server`, answering a `RunningGrpcServer`
 * with the bound `port` and a graceful `shutdown()`. `LIVE_FEED_SERVICE_NAME` is the name the health
 * service reports for the LiveFeed.
 */
export { LIVE_FEED_SERVICE_NAME, startGrpcServer, type GrpcServerOptions, type RunningGrpcServer } from './grpc-server.ts';
/**
 * For a `grpc.Server` of your own: `addLiveFeedService(server, { tokens, hub, heartbeatIntervalMs })`
 * adds the LiveFeed (`LiveFeedServiceOptions`) and answers the `LiveFeedService` — call its
 * `endAllStreams()` before shutting your server down. `createLiveFeedService` builds it without
 * adding it.
 */
export { addLiveFeedService, createLiveFeedService, type LiveFeedService, type LiveFeedServiceOptions } from './live-feed-service.ts';
/** `addHealthService(server, new HealthStatus([...names]))` adds `grpc.health.v1.Health`; `ServingStatus` is what it reports. */
export { addHealthService, DEFAULT_HEALTH_WATCH_LIMITS, HealthStatus, type HealthWatchLimits, type ServingStatus } from './health-service.ts';
/** `GRPC_STATUS_BY_CODE` maps every Trailwire error code to a gRPC status; `grpcStatusOf(error)` answers the `GrpcStatusObject` to end a call with. */
export { GRPC_STATUS_BY_CODE, grpcStatusOf, type GrpcStatusObject } from './status-codes.ts';
/**
 * For clients that read the wire themselves: `PROTO_ROOT` is the include directory of the `.proto`
 * files, `decodeLiveUpdateResponse` decodes one message's bytes, and `LiveUpdateResponseMessage` is
 * its shape (the proto's snake_case field names).
 */
export { decodeLiveUpdateResponse, PROTO_ROOT } from './proto.ts';
export type { LiveUpdateResponseMessage } from './live-feed-service.ts';
