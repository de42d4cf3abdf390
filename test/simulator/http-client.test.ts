import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TrailwireClient, TrailwireHttpError } from '../../simulator/client/http-client.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

describe('TrailwireClient', () => {
  let app: TestApp;
  let customer: { id: string; apiKey: string };

  before(async () => {
    app = await startTestApp({ core: { limits: { read: { requests: 3, windowSeconds: 60 } } } });
    const created = await app.trailwire.auth.createCustomer({ name: 'Client Co' });
    customer = { id: created.principal.id, apiKey: created.apiKey };
    for (let i = 0; i < 7; i++) await app.trailwire.admin.createFleet({ customerId: customer.id, name: `Fleet ${i}` });
  });
  after(() => app.close());

  /** A client whose fetch is counted, whose clock is the app's, and whose sleeps advance that clock. */
  function client(options: { maxRetries?: number } = {}) {
    const calls: string[] = [];
    const sleeps: number[] = [];
    const instance = new TrailwireClient({
      baseUrl: app.url,
      audience: 'customers',
      apiKey: customer.apiKey,
      now: () => app.clock.now(),
      random: () => 0.5,
      jitterMs: 100,
      sleep: async (ms) => {
        sleeps.push(ms);
        app.clock.advance(ms);
      },
      fetch: (input, init) => {
        calls.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
        return fetch(input, init);
      },
      ...options,
    });
    return { instance, calls, sleeps };
  }

  it('authenticates once and reuses the token until shortly before it expires', async () => {
    const { instance, calls } = client();
    await instance.request('GET', '/api/v1/fleets', { query: { take: 1 } });
    await instance.request('GET', '/api/v1/fleets', { query: { take: 1 } });
    assert.equal(calls.filter((call) => call.endsWith('/authenticate')).length, 1);
    app.clock.advance((1800 - 30) * 1000); // inside the 60 s refresh margin
    await instance.request('GET', '/api/v1/fleets', { query: { take: 1 } });
    assert.equal(calls.filter((call) => call.endsWith('/authenticate')).length, 2);
    app.clock.advance(61_000); // new read window
  });

  it('waits out a 429 for Retry-After plus jitter, then succeeds', async () => {
    app.clock.set(Math.ceil(app.clock.now() / 60_000) * 60_000 + 50_000); // 10 s before a window ends
    const { instance, sleeps } = client();
    for (let i = 0; i < 3; i++) await instance.request('GET', '/api/v1/fleets', { query: { take: 1 } });
    const response = await instance.request<{ data: unknown[] }>('GET', '/api/v1/fleets', { query: { take: 1 } });
    assert.equal(response.status, 200);
    assert.deepEqual(sleeps, [10_000 + 50]);
  });

  it('hands a 429 back when asked not to retry, and gives up after maxRetries otherwise', async () => {
    app.clock.set(Math.ceil(app.clock.now() / 60_000) * 60_000 + 1_000);
    const { instance } = client({ maxRetries: 0 });
    for (let i = 0; i < 3; i++) await instance.request('GET', '/api/v1/fleets', { query: { take: 1 } });
    const limited = await instance.request('GET', '/api/v1/fleets', { noRetryOnRateLimit: true });
    assert.equal(limited.status, 429);
    await assert.rejects(instance.request('GET', '/api/v1/fleets'), (error: unknown) => error instanceof TrailwireHttpError && error.status === 429);
    app.clock.advance(60_000);
  });

  it('with noRetry answers the first 429 or 5xx as it came, without waiting', async () => {
    app.clock.set(Math.ceil(app.clock.now() / 60_000) * 60_000 + 1_000);
    const { instance, sleeps } = client();
    for (let i = 0; i < 3; i++) await instance.request('GET', '/api/v1/fleets', { query: { take: 1 } });
    const limited = await instance.request('GET', '/api/v1/fleets', { noRetry: true });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('ratelimit-remaining'), '0');
    let served = 0;
    const failing = new TrailwireClient({
      baseUrl: app.url,
      audience: 'customers',
      apiKey: customer.apiKey,
      now: () => app.clock.now(),
      sleep: async (ms) => void sleeps.push(ms),
      fetch: async (input, init) => (new URL(String(input)).pathname.endsWith('/authenticate') ? fetch(input, init) : (served++, new Response('{"title":"boom"}', { status: 503 }))),
    });
    const failed = await failing.request('GET', '/api/v1/fleets', { noRetry: true });
    assert.equal(failed.status, 503);
    assert.equal(served, 1);
    assert.deepEqual(sleeps, []);
    app.clock.advance(60_000);
  });

  it('follows next across pages and yields every item once, in order', async () => {
    app.clock.set(Math.ceil(app.clock.now() / 60_000) * 60_000);
    const { instance } = client();
    const names: string[] = [];
    for await (const fleet of instance.paginate<{ name: string }>('/api/v1/fleets', { take: 3 })) names.push(fleet.name);
    assert.deepEqual(names, Array.from({ length: 7 }, (_, i) => `Fleet ${i}`));
  });

  it('re-authenticates once when its token is rejected, and surfaces problems as TrailwireHttpError', async () => {
    app.clock.advance(60_000);
    const { instance, calls } = client();
    await instance.accessToken();
    // Rotating the key elsewhere revokes the token; with the old key gone the retry must fail clearly.
    await app.trailwire.auth.rotate({ aud: 'customers', sub: customer.id, ver: 1 } as never);
    await assert.rejects(instance.request('GET', '/api/v1/fleets'), (error: unknown) => error instanceof TrailwireHttpError && error.status === 401);
    assert.equal(calls.filter((call) => call.endsWith('/authenticate')).length, 2, 'tried a fresh token once');
  });

  it('rotateKey switches the client to the new key; the old key stops working', async () => {
    app.clock.advance(3_600_000);
    const fresh = await app.trailwire.auth.createCustomer({ name: 'Rotating Co' });
    const instance = new TrailwireClient({ baseUrl: app.url, audience: 'customers', apiKey: fresh.apiKey, now: () => app.clock.now() });
    const { apiKey } = await instance.rotateKey();
    assert.notEqual(apiKey, fresh.apiKey);
    assert.equal(instance.currentApiKey, apiKey);
    assert.equal((await instance.request('GET', '/api/v1/fleets')).status, 200);
    const stale = await app.call('POST', '/api/v1/customers/authenticate', { apiKey: fresh.apiKey });
    assert.equal(stale.status, 401);
  });
});
