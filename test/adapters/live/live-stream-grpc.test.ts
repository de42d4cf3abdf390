/** The live stream conformance suite over the gRPC LiveFeed: a real server on port 0, a real client loading the `.proto` as a user would. */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { startGrpcServer } from '../../../adapters/grpc/grpc-server.ts';
import { PROTO_ROOT } from '../../../adapters/grpc/proto.ts';
import type { LiveStreamRequest } from '../../../core/live-streams.ts';
import { type LiveStreamClient, type LiveStreamEnd, type LiveStreamMessage, runLiveStreamConformance } from '../../conformance/live-stream.ts';
import { startTestApp } from '../../support/test-app.ts';
import { recordMessages } from './record-messages.ts';

const livefeed = (
  grpc.loadPackageDefinition(
    protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, longs: Number, defaults: true, includeDirs: [PROTO_ROOT] }),
  ) as any
).livefeed.v1;

/** The core's error code of a gRPC status, as the status table maps them (`adapters/grpc/status-codes.ts`). */
const CODE_OF_STATUS: Partial<Record<grpc.status, string>> = {
  [grpc.status.UNAUTHENTICATED]: 'invalid_token',
  [grpc.status.RESOURCE_EXHAUSTED]: 'rate_limited',
  [grpc.status.UNAVAILABLE]: 'unavailable',
  [grpc.status.INVALID_ARGUMENT]: 'validation_failed',
};

function messageOf(message: any): LiveStreamMessage {
  const position = message.position || undefined;
  if (message.is_heartbeat) return { kind: 'heartbeat', position };
  if (message.resume_reset) return { kind: 'resume-reset' };
  if (message.snapshot_end) return { kind: 'snapshot-end', position };
  const update = message.live_update;
  return { kind: message.is_snapshot ? 'snapshot' : 'update', position, trailerId: update.trailer.id, fleetId: update.fleet_id };
}

runLiveStreamConformance({
  name: 'gRPC LiveFeed',
  async start(settings) {
    const app = await startTestApp({ core: { live: { snapshot: settings.snapshot }, limits: settings.limits } });
    const server = await startGrpcServer({
      port: 0,
      host: '127.0.0.1',
      tokens: app.trailwire.tokens,
      hub: app.trailwire.live,
      heartbeatIntervalMs: settings.heartbeatIntervalMs,
      maxStreamsPerCustomer: settings.maxStreamsPerCustomer,
      connectLimits: app.trailwire.liveConnectLimits,
    });
    return {
      trailwire: app.trailwire,
      store: app.store,
      clock: app.clock,
      async subscribe(token: string, request: LiveStreamRequest = {}): Promise<LiveStreamClient> {
        const client = new livefeed.LiveFeed(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
        const metadata = new grpc.Metadata();
        metadata.set('authorization', `Bearer ${token}`);
        const call: grpc.ClientReadableStream<unknown> = client.Subscribe(
          {
            snapshot: request.snapshot ?? false,
            fleet_ids: request.filter?.fleetIds ?? [],
            trailer_ids: request.filter?.trailerIds ?? [],
            ...(request.resumeAfter === undefined ? {} : { resume_after: request.resumeAfter }),
          },
          metadata,
        );
        const recorder = recordMessages();
        call.on('data', (message: unknown) => recorder.push(messageOf(message)));
        const ended = new Promise<LiveStreamEnd>((resolve) => {
          call.on('error', (error: grpc.ServiceError) => resolve({ code: CODE_OF_STATUS[error.code] ?? grpc.status[error.code] }));
          call.on('end', () => resolve(null));
        });
        void ended.then(() => recorder.end());
        return {
          messages: recorder.messages,
          ended,
          until: recorder.until,
          close() {
            call.cancel();
            client.close();
          },
        };
      },
      async close() {
        await server.shutdown();
        await app.close();
      },
    };
  },
});
