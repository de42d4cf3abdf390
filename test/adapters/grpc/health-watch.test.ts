/**
 * `grpc.health.v1.Health/Watch` is unauthenticated and a stream lives until its client leaves, so it
 * is capped per connection and in total (issue 29, finding 6: 10,000 uncapped streams on 100
 * connections took the server from 126 to 231 MB). Many clients watch, the streams over a cap end
 * with RESOURCE_EXHAUSTED while `Check` still answers, and once the clients close, the server tracks
 * nothing of them: no stream, no connection, no service name (a watcher of made-up names included).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { loadTrailwireProto } from '../../../adapters/grpc/proto.ts';
import { type RunningGrpcServer, startGrpcServer } from '../../../adapters/grpc/grpc-server.ts';
import { startTestApp, type TestApp } from '../../support/test-app.ts';
import { until } from '../../support/until.ts';

const health = (grpc.loadPackageDefinition(loadTrailwireProto('grpc/health/v1/health.proto')) as any).grpc.health.v1;

/** One client on its own connection. */
function healthClient(port: number) {
  return new health.Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
}

/** Opens a Watch: answers the first status it gets, or the error it ends with. */
function watch(client: any, service: string): Promise<{ status?: string; error?: grpc.ServiceError; call: grpc.ClientReadableStream<unknown> }> {
  const call = client.Watch({ service });
  return new Promise((resolve) => {
    call.once('data', (reply: { status: string }) => resolve({ status: reply.status, call }));
    call.on('error', (error: grpc.ServiceError) => resolve({ error, call }));
  });
}


describe('the health service Watch caps', () => {
  let app: TestApp;
  let server: RunningGrpcServer;

  before(async () => {
    app = await startTestApp();
    server = await startGrpcServer({
      port: 0,
      host: '127.0.0.1',
      tokens: app.trailwire.tokens,
      hub: app.trailwire.live,
      healthWatch: { maxWatches: 40, maxWatchesPerConnection: 2 },
    });
  });
  after(async () => {
    await server.shutdown();
    await app.close();
  });

  it('refuses a Watch over the per-connection or the total cap, and forgets every stream once the clients close', async () => {
    const clients = Array.from({ length: 30 }, () => healthClient(server.port));
    const opened: Array<Awaited<ReturnType<typeof watch>>> = [];
    try {
      // Three watches per connection, each of a made-up service name: the third is over the per-connection cap.
      for (const [index, client] of clients.slice(0, 10).entries())
        for (let n = 0; n < 3; n++) opened.push(await watch(client, `made.up.Service${index}.${n}`));
      const refusedPerConnection = opened.filter((result) => result.error);
      assert.equal(refusedPerConnection.length, 10, 'one Watch of three refused on each connection');
      for (const { error } of refusedPerConnection) {
        assert.equal(error!.code, grpc.status.RESOURCE_EXHAUSTED);
        assert.match(error!.details, /one connection/);
      }
      assert.ok(opened.filter((result) => !result.error).every((result) => result.status === 'SERVICE_UNKNOWN'));
      assert.deepEqual(server.health.watches, { streams: 20, connections: 10, services: 20 });

      // Twenty more connections with one each: the total cap (40) refuses the last ones.
      const more = await Promise.all(clients.slice(10).map((client) => watch(client, 'livefeed.v1.LiveFeed')));
      opened.push(...more);
      assert.equal(more.filter((result) => result.status === 'SERVING').length, 20);
      const overTotal = await watch(healthClient(server.port), '');
      assert.equal(overTotal.error?.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(overTotal.error!.details, /this server/);
      assert.equal(server.health.watches.streams, 40);

      // Check is a unary call: it answers whatever the Watch streams hold.
      const checked = await new Promise<{ status: string }>((resolve, reject) =>
        clients[0]!.Check({ service: 'livefeed.v1.LiveFeed' }, (error: Error | null, reply: { status: string }) => (error ? reject(error) : resolve(reply))),
      );
      assert.equal(checked.status, 'SERVING');
    } finally {
      for (const { call } of opened) {
        call.on('error', () => {});
        call.cancel();
      }
      for (const client of clients) client.close();
    }
    await until(() => server.health.watches.streams === 0, 'the server to see every Watch end');
    assert.deepEqual(server.health.watches, { streams: 0, connections: 0, services: 0 }, 'nothing of the closed streams is kept');

    // The slots are free again.
    const client = healthClient(server.port);
    const again = await watch(client, '');
    assert.equal(again.status, 'SERVING');
    again.call.on('error', () => {});
    again.call.cancel();
    client.close();
  });
});
