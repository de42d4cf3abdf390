/**
 * `--cors-origin` (contract 12, issue 31 finding 6): off by default (no CORS header at all); with an
 * origin configured, a page there may authenticate, read and open the event stream — preflights
 * answered 204 with the methods and headers, every answer (refusals too) naming the origin and
 * exposing the RateLimit headers — while another origin, intake and rotate get no CORS headers.
 * In-process HTTP, as a browser sends it (Origin, Access-Control-Request-*).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseCorsOrigins } from '../../../adapters/koa/cors.ts';
import { customerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';

const APP_ORIGIN = 'https://fleet.example.com';

describe('CORS', () => {
  let app: TestApp;
  let plain: TestApp;
  let token: string;
  let apiKey: string;
  before(async () => {
    app = await startTestApp({ app: { corsOrigins: [APP_ORIGIN, 'http://localhost:3000'] } });
    plain = await startTestApp();
    ({ token, apiKey } = await customerWithToken(app));
  });
  after(async () => {
    await app.close();
    await plain.close();
  });

  const preflight = (target: TestApp, path: string, method: string, origin = APP_ORIGIN) =>
    fetch(target.url + path, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization, x-api-key' },
    });

  it('a preflight from the allowed origin to authenticate, a read and the event stream answers 204 with what it may send', async () => {
    for (const [path, method] of [
      ['/api/v1/customers/authenticate', 'POST'],
      ['/api/v1/fleets', 'GET'],
      ['/api/v1/trailers/telemetry/gps/t-1', 'GET'],
      ['/api/v1/live', 'GET'],
    ] as const) {
      const response = await preflight(app, path, method);
      assert.equal(response.status, 204, path);
      assert.equal(response.headers.get('access-control-allow-origin'), APP_ORIGIN, path);
      assert.equal(response.headers.get('access-control-allow-methods'), method, path);
      assert.match(response.headers.get('access-control-allow-headers') ?? '', /Authorization/);
      assert.match(response.headers.get('access-control-allow-headers') ?? '', /X-API-KEY/);
      // EventSource and the live page resume the event stream with it.
      assert.match(response.headers.get('access-control-allow-headers') ?? '', /Last-Event-ID/);
      assert.match(response.headers.get('vary') ?? '', /Origin/);
    }
  });

  it('answers, refusals included, name the origin and expose the RateLimit headers and the request id', async () => {
    const auth = await app.call('POST', '/api/v1/customers/authenticate', { apiKey, headers: { origin: APP_ORIGIN } });
    assert.equal(auth.status, 200);
    assert.equal(auth.headers.get('access-control-allow-origin'), APP_ORIGIN);
    const read = await app.call('GET', '/api/v1/fleets', { token, headers: { origin: APP_ORIGIN } });
    assert.equal(read.status, 200);
    assert.equal(read.headers.get('access-control-allow-origin'), APP_ORIGIN);
    assert.match(read.headers.get('access-control-expose-headers') ?? '', /RateLimit-Remaining.*X-Request-Id/);
    const refused = await app.call('GET', '/api/v1/fleets', { token: 'not-a-token', headers: { origin: APP_ORIGIN } });
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get('access-control-allow-origin'), APP_ORIGIN);
  });

  it('the event stream answers the allowed origin', async () => {
    const controller = new AbortController();
    const response = await fetch(`${app.url}/api/v1/live`, { headers: { authorization: `Bearer ${token}`, origin: APP_ORIGIN }, signal: controller.signal });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('access-control-allow-origin'), APP_ORIGIN);
    controller.abort();
  });

  it('another origin, intake and rotate get no CORS headers; without --cors-origin nothing has them', async () => {
    const other = await preflight(app, '/api/v1/fleets', 'GET', 'https://evil.example.net');
    assert.equal(other.headers.get('access-control-allow-origin'), null);
    const otherRead = await app.call('GET', '/api/v1/fleets', { token, headers: { origin: 'https://evil.example.net' } });
    assert.equal(otherRead.headers.get('access-control-allow-origin'), null);
    for (const [path, method] of [
      ['/api/v1/telemetry/intake/1HGCM82633A004352', 'POST'],
      ['/api/v1/customers/rotate', 'PUT'],
    ] as const) assert.equal((await preflight(app, path, method)).headers.get('access-control-allow-origin'), null, path);
    const off = await preflight(plain, '/api/v1/fleets', 'GET');
    assert.equal(off.headers.get('access-control-allow-origin'), null);
    const offRead = await plain.call('GET', '/api/v1/fleets', { headers: { origin: APP_ORIGIN } });
    assert.equal(offRead.headers.get('access-control-allow-origin'), null);
  });

  it('--cors-origin takes origins only', () => {
    assert.deepEqual(parseCorsOrigins(['https://a.example.com', 'http://localhost:3000/']), ['https://a.example.com', 'http://localhost:3000']);
    for (const bad of ['*', 'a.example.com', 'https://a.example.com/app', 'ftp://a.example.com', 'https://a$b.example.com'])
      assert.throws(() => parseCorsOrigins([bad]), /--cors-origin/, bad);
    assert.deepEqual(parseCorsOrigins(['http://[::1]:8080', 'http://127.0.0.1:3000', 'https://my_app.example.com']), ['http://[::1]:8080', 'http://127.0.0.1:3000', 'https://my_app.example.com']);
  });

  it('--cors-origin refuses a wildcard pattern, which would never match, with a message that says so (issue 37)', () => {
    for (const pattern of ['https://*.example.com', 'https://app.*.example.com', 'https://exa*mple.com', 'http://localhost:*'])
      assert.throws(() => parseCorsOrigins([pattern]), (error: any) => error.code === 'validation_failed' && /wildcards are not supported; list each origin/.test(error.message), pattern);
  });
});
