/**
 * `trailwire/grpc`: the gRPC transport of Trailwire — the LiveFeed service over the core's live hub,
 * the standard health service, a ready-to-run server, and the error-code-to-gRPC-status table.
 */
export { addLiveFeedService, createLiveFeedService, type LiveFeedService, type LiveFeedServiceOptions } from './live-feed-service.ts';
export { addHealthService, HealthStatus, type ServingStatus } from './health-service.ts';
export { LIVE_FEED_SERVICE_NAME, startGrpcServer, type GrpcServerOptions, type RunningGrpcServer } from './grpc-server.ts';
export { GRPC_STATUS_BY_CODE, grpcStatusOf, type GrpcStatusObject } from './status-codes.ts';
export { HEARTBEAT_MESSAGE, liveUpdateResponseOf, timestampOf, type LiveUpdateResponseMessage } from './live-update-message.ts';
export { decodeLiveUpdateResponse, encodeLiveUpdateResponse, liveFeedServiceDefinition, PROTO_ROOT } from './proto.ts';
