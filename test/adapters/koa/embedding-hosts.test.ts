/**
 * The node handler (`createTrailwireHandler`) and the Koa middleware in the hosts an embedder uses:
 * Express 5, Fastify 5, Koa with koa-mount and bare node:http. Under each, what Trailwire writes for
 * the client to follow — intake's `Location`, the OpenAPI server URL, the map's links — carries the
 * path it is mounted at, whether the host says so (Express's `req.originalUrl`, koa-mount's
 * `ctx.mountPath`) or the `prefix` option does. A body a host's parser read before Trailwire is
 * answered at once with a problem+json 500 (`body_already_read`) and one log line, never left to
 * hang until the client gives up. Without a logger, Trailwire logs to stderr as `serve` does.
 */
import assert from 'node:assert/strict';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import mount from 'koa-mount';
import { pino } from 'pino';
import { createTrailwireHandler, createTrailwireMiddleware } from '../../../adapters/koa/app.ts';
import { defaultLogger } from '../../../adapters/koa/logger.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { logLines } from '../../support/log-lines.ts';
import { partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const VIN = withCheckDigit('1HXST0TST0Z000001');
const silent = pino({ level: 'silent' });

async function listen(listener: RequestListener): Promise<{ url: string; server: Server }> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

describe('Trailwire mounted in each host', () => {
  let app: TestApp;
  let partner: { token: string };
  let timestamp = 0;

  before(async () => {
    app = await startTestApp();
    partner = await partnerWithToken(app, 'gps-basic');
    timestamp = Math.floor(app.clock.now() / 1000) - 600;
  });
  after(() => app.close());

  // A fetch that fails the test, rather than waiting for the server's timeouts, if no answer comes.
  const intake = (url: string) =>
    fetch(`${url}/api/v1/telemetry/intake/${VIN}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${partner.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ timestamp: timestamp++, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 }),
      signal: AbortSignal.timeout(20_000),
    });

  /** Location, the OpenAPI server and the map's links all start with `prefix`, as served at `base + prefix`. */
  async function assertServedUnder(base: string, prefix: string): Promise<void> {
    const accepted = await intake(base + prefix);
    assert.equal(accepted.status, 202);
    const { id } = (await accepted.json()) as { id: string };
    assert.equal(accepted.headers.get('location'), `${prefix}/api/v1/telemetry/intake/status/${id}`);
    const document = (await (await fetch(`${base}${prefix}/openapi.json`)).json()) as { servers: Array<{ url: string }> };
    assert.deepEqual(
      document.servers.map((server) => server.url),
      [prefix],
    );
    const page = await (await fetch(`${base}${prefix}/docs`)).text();
    assert.match(page, new RegExp(`<script src="${prefix}/assets/docs.js"`));
    assert.equal((await fetch(`${base}${prefix}/assets/docs.js`)).status, 200);
  }

  it('Express: app.use(prefix, handler) reads the prefix from req.originalUrl', async () => {
    const host = express();
    host.use('/fleet-api', createTrailwireHandler(app.trailwire, { logger: silent }));
    const { url, server } = await listen(host);
    try {
      await assertServedUnder(url, '/fleet-api');
    } finally {
      await close(server);
    }
  });

  it('Koa: koa-mount around the middleware gives the prefix as ctx.mountPath', async () => {
    const host = new Koa();
    host.use(mount('/fleet-api', createTrailwireMiddleware(app.trailwire, { logger: silent })));
    const { url, server } = await listen(host.callback());
    try {
      await assertServedUnder(url, '/fleet-api');
    } finally {
      await close(server);
    }
  });

  it('node:http and Fastify, which hand over whole URLs: the prefix option', async () => {
    const bare = await listen(createTrailwireHandler(app.trailwire, { logger: silent, prefix: '/fleet-api' }));
    const fastify = Fastify();
    const handler = createTrailwireHandler(app.trailwire, { logger: fastify.log, prefix: '/fleet-api' });
    fastify.addHook('onRequest', async (request, reply) => {
      if (!request.url.startsWith('/fleet-api/')) return;
      reply.hijack();
      handler(request.raw, reply.raw);
    });
    const fastifyUrl = await fastify.listen({ port: 0, host: '127.0.0.1' });
    try {
      await assertServedUnder(bare.url, '/fleet-api');
      await assertServedUnder(fastifyUrl, '/fleet-api');
    } finally {
      await close(bare.server);
      await fastify.close();
    }
  });

  it('a body a parser of the host already read is answered at once: 500 body_already_read, one log line', async () => {
    const { lines, stream } = logLines();
    const logger = pino({ level: 'error' }, stream);
    // Express: express.json() above the mount.
    const misordered = express();
    misordered.use(express.json());
    misordered.use('/fleet-api', createTrailwireHandler(app.trailwire, { logger }));
    const expressHost = await listen(misordered);
    // Fastify: a route of the host's, which parsed the body before handing the request over.
    const fastify = Fastify();
    const handler = createTrailwireHandler(app.trailwire, { logger, prefix: '/fleet-api' });
    fastify.post('/fleet-api/*', async (request, reply) => {
      reply.hijack();
      handler(request.raw, reply.raw);
    });
    const fastifyUrl = await fastify.listen({ port: 0, host: '127.0.0.1' });
    try {
      for (const base of [`${expressHost.url}/fleet-api`, `${fastifyUrl}/fleet-api`]) {
        const answer = await intake(base);
        assert.equal(answer.status, 500, base);
        assert.equal(answer.headers.get('content-type'), 'application/problem+json');
        const problem = (await answer.json()) as { type: string; detail: string; requestId: string };
        assert.equal(problem.type, 'https://trailwire.dev/problems/body-already-read');
        assert.match(problem.detail, /Mount Trailwire above the body parser/);
        const logged = lines.filter((line) => line.requestId === problem.requestId);
        assert.equal(logged.length, 1, 'one line for the operator');
        assert.equal(logged[0]!.code, 'body_already_read');
        assert.equal(logged[0]!.level, 50);
      }
    } finally {
      await close(expressHost.server);
      await fastify.close();
    }
  });
});

describe('without a logger', () => {
  it('Trailwire logs to stderr, as `trailwire serve` does, never into the host’s stdout', () => {
    const logger = defaultLogger();
    assert.equal((logger as unknown as Record<symbol, { fd: number }>)[pino.symbols.streamSym]!.fd, 2);
    assert.equal(logger.level, 'info');
  });
});
