/**
 * `close()` under traffic: keep-alive connections whose requests were still in flight when it was
 * called are answered, then closed, so a shutdown (SIGTERM, a test's teardown) ends in moments
 * rather than after the 65 s idle timeout of keep-alive connections.
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../../adapters/server/index.ts';

it('answers the requests in flight on keep-alive connections, then closes within moments', { timeout: 30_000 }, async () => {
  const server = await startServer({ db: ':memory:', port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'silent' }) });
  const partner = await server.trailwire.auth.createPartner({ name: 'Closing Co', product: 'gps-basic' });
  const token = (await server.trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;
  const agent = new Agent({ keepAlive: true });
  const body = JSON.stringify({ timestamp: 1767268800, position: { latitude: 41, longitude: -87 }, speedKph: 80, bearingDeg: 10 });
  // Each request's body is sent in two halves, the second after close() is called: the request is in flight meanwhile.
  const requests = Array.from({ length: 4 }, () => {
    const req = request(`${server.url}/api/v1/telemetry/intake/1FUJGLDR3CLBP8834`, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const answered = new Promise<number>((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
    });
    const flushed = new Promise<void>((resolve) => req.write(body.slice(0, 20), () => resolve()));
    return { req, answered, flushed };
  });
  // Every first half handed to the kernel, then an answer on a connection opened after them: the
  // server has accepted the four connections and read their headers by then.
  await Promise.all(requests.map(({ flushed }) => flushed));
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  const started = Date.now();
  const closing = server.close();
  for (const { req } of requests) req.end(body.slice(20));
  assert.deepEqual(await Promise.all(requests.map(({ answered }) => answered)), [202, 202, 202, 202]);
  await closing;
  const took = Date.now() - started;
  agent.destroy();
  assert.ok(took < 5_000, `close() took ${took} ms`);
});
