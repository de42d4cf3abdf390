/**
 * What the gRPC port bounds before any handler runs (issue 37, item 8): a stream that never sends
 * its request whole (no half-close) is ended with DEADLINE_EXCEEDED after `requestTimeoutMs` — no
 * handler, cap or token check holds it until then — and `prepareListener` lets the composition cap
 * the port's connections per address, as `startServer` does with the HTTP port's caps.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect as connectHttp2, constants } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { type RunningGrpcServer, startGrpcServer } from '../../../adapters/grpc/grpc-server.ts';
import { loadTrailwireProto } from '../../../adapters/grpc/proto.ts';
import { type RunningServer, startServer } from '../../../adapters/server/index.ts';
import { startTestApp, type TestApp } from '../../support/test-app.ts';
import { until } from '../../support/until.ts';

const health = (grpc.loadPackageDefinition(loadTrailwireProto('grpc/health/v1/health.proto')) as any).grpc.health.v1;

/**
 * Opens a LiveFeed Subscribe stream that sends its headers and never its request: answers the
 * grpc-status the server ends it with, and whether the server then reset the stream (it closes
 * although this side never ended it).
 */
async function neverHalfClosed(port: number): Promise<{ status: string | undefined; reset: Promise<number>; close(): void }> {
  const session = connectHttp2(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const stream = session.request({
    [constants.HTTP2_HEADER_METHOD]: 'POST',
    [constants.HTTP2_HEADER_PATH]: '/livefeed.v1.LiveFeed/Subscribe',
    'content-type': 'application/grpc',
    te: 'trailers',
  }, { endStream: false });
  stream.on('error', () => {});
  // The server's status comes as a trailers-only answer (no handler ran, so no message was sent).
  const status = await new Promise<string | undefined>((resolve) => {
    stream.on('response', (headers) => headers['grpc-status'] !== undefined && resolve(String(headers['grpc-status'])));
    stream.on('trailers', (trailers) => resolve(String(trailers['grpc-status'])));
    stream.on('close', () => resolve(undefined));
    stream.resume();
  });
  const reset = new Promise<number>((resolve) => (stream.closed ? resolve(stream.rstCode ?? -1) : stream.once('close', () => resolve(stream.rstCode ?? -1))));
  return { status, reset, close: () => session.destroy() };
}

describe('the gRPC port before a handler runs', () => {
  let app: TestApp;
  let server: RunningGrpcServer;
  before(async () => {
    app = await startTestApp();
    server = await startGrpcServer({ port: 0, host: '127.0.0.1', tokens: app.trailwire.tokens, hub: app.trailwire.live, requestTimeoutMs: 300 });
  });
  after(async () => {
    await server.shutdown();
    await app.close();
  });

  it('ends a stream that never half-closes with DEADLINE_EXCEEDED and resets it, so the server keeps nothing of it', { timeout: 15_000 }, async () => {
    const ended = await neverHalfClosed(server.port);
    assert.equal(ended.status, String(grpc.status.DEADLINE_EXCEEDED));
    assert.equal(await ended.reset, constants.NGHTTP2_CANCEL, 'the server reset the stream (RST_STREAM CANCEL)');
    ended.close();
  });

  it('refuses a request timeout that is not a positive whole number of ms', async () => {
    for (const requestTimeoutMs of [0, -1, 1.5])
      await assert.rejects(
        startGrpcServer({ port: 0, tokens: app.trailwire.tokens, hub: app.trailwire.live, requestTimeoutMs }),
        /requestTimeoutMs/,
      );
  });
});

describe('the gRPC port under startServer', () => {
  let server: RunningServer;
  before(async () => {
    server = await startServer({
      db: ':memory:',
      port: 0,
      grpcPort: 0,
      host: '127.0.0.1',
      logger: pino({ level: 'silent' }),
      connectionLimits: { maxConnectionsPerAddress: 2 },
    });
  });
  after(() => server.close());

  it('caps connections per address as the HTTP port does; another address still gets in', { timeout: 30_000 }, async () => {
    const open = async (localAddress: string) => {
      const socket: Socket = connect({ port: server.grpcPort, host: '127.0.0.1', localAddress });
      socket.on('error', () => {});
      await once(socket, 'connect');
      const closed = once(socket, 'close').then(() => true);
      return { socket, closedSoon: () => Promise.race([closed, new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 1000))]) };
    };
    const first = [await open('127.0.0.1'), await open('127.0.0.1')];
    const over = await open('127.0.0.1');
    assert.equal(await over.closedSoon(), true, 'the third connection from one address is closed');
    for (const held of first) held.socket.destroy();
    const client = new health.Health(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    try {
      // The server forgets the closed connections as it sees them close: until then a call may be refused.
      let answer: { status: string } | undefined;
      await until(async () => {
        answer = await new Promise((resolve) =>
          client.Check({ service: '' }, { deadline: Date.now() + 2000 }, (error: grpc.ServiceError | null, reply: { status: string }) => resolve(error ? undefined : reply)),
        );
        return answer !== undefined;
      }, 'a Check once the address is under its cap', 15_000);
      assert.equal(answer?.status, 'SERVING', 'calls go through the injected connections');
    } finally {
      client.close();
    }
    const elsewhere = await open('127.0.0.2');
    assert.equal(await elsewhere.closedSoon(), false, 'another address is not held to the first one\'s cap');
    elsewhere.socket.destroy();
  });
});
