/**
 * The intake lane (`adapters/koa/intake-lane.ts`): Trailwire's own app takes the usual intake POST
 * before Koa builds a context for it. What a partner relies on is that it cannot tell: the 202, the
 * refusals (problem+json with the request id, Retry-After, Connection: close before the body was
 * read), the metrics and the access line are the same whichever way the request went, and whatever
 * the lane does not take (a token not seen yet, a browser, an encoded path, another audience, another
 * media type) is Koa's as before. Koa's contexts are counted to show which way each request went.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { AccessLog } from '../../../adapters/koa/access-log.ts';
import { createTrailwireApp } from '../../../adapters/koa/app.ts';
import { createIntakeLane } from '../../../adapters/koa/intake-lane.ts';
import type { HttpMetrics } from '../../../adapters/koa/metrics.ts';
import type { AccessClaims, TokenService } from '../../../core/tokens.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../../support/test-app.ts';
import { logLines } from '../../support/log-lines.ts';
import { until } from '../../support/until.ts';

const VIN = withCheckDigit('1LANE0TST0Z000001');
const fix = (timestamp: number) => ({ timestamp, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 });

/** The app's own server again, over a second Koa app whose contexts are counted: a request the lane takes makes none. */
async function countingServer(app: TestApp, sink: Writable): Promise<{ url: string; contexts: () => number; server: Server }> {
  const koa = createTrailwireApp(app.trailwire, { logger: pino({ level: 'info' }, sink), intakeRefusalDelayMs: 0, corsOrigins: ['https://app.example.com'] });
  let contexts = 0;
  const createContext = koa.createContext.bind(koa);
  koa.createContext = ((req, res) => {
    contexts++;
    return createContext(req, res);
  }) as typeof koa.createContext;
  const server = createServer(koa.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, contexts: () => contexts, server };
}

describe('the intake lane', () => {
  let app: TestApp;
  let lane: Awaited<ReturnType<typeof countingServer>>;
  const { lines, stream } = logLines();
  let partner: { id: string; token: string };
  let timestamp = Math.floor(Date.UTC(2026, 5, 1, 11, 0, 0) / 1000);

  before(async () => {
    app = await startTestApp({ core: { partnerIntake: { budget: { requests: 8, windowSeconds: 60 } } } });
    lane = await countingServer(app, stream);
    partner = await partnerWithToken(app, 'gps-basic');
  });
  after(async () => {
    lane.server.closeAllConnections();
    await new Promise((resolve) => lane.server.close(resolve));
    await app.close();
  });

  const post = (headers: Record<string, string> = {}, body: string = JSON.stringify(fix(timestamp++)), path = `/api/v1/telemetry/intake/${VIN}`) =>
    fetch(lane.url + path, { method: 'POST', headers: { authorization: `Bearer ${partner.token}`, 'content-type': 'application/json', ...headers }, body });

  it('answers a token seen before without Koa, with the same 202 as Koa gave its first request', async () => {
    // The app under test verified this token for its own server, not for this one: its cache is the core's, shared.
    const first = await post();
    const viaKoa = lane.contexts();
    const second = await post({ 'x-request-id': 'lane-test-0001' });
    assert.equal(lane.contexts(), viaKoa, 'the second request made no Koa context');
    for (const answer of [first, second]) {
      assert.equal(answer.status, 202);
      const body = await answer.json();
      assert.equal(body.status, 'queued');
      assert.equal(answer.headers.get('location'), `/api/v1/telemetry/intake/status/${body.id}`);
      assert.equal(answer.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.equal(answer.headers.get('cache-control'), 'no-store');
      assert.equal(answer.headers.get('x-content-type-options'), 'nosniff');
      for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) assert.match(answer.headers.get(name) ?? '', /^\d+$/, name);
    }
    assert.equal(second.headers.get('x-request-id'), 'lane-test-0001', "the caller's request id is kept");
    assert.equal(Number(second.headers.get('ratelimit-remaining')), Number(first.headers.get('ratelimit-remaining')) - 1, 'the budget counted both');
    const accessLines = lines.filter((line) => line.access === 'http' && line.status === 202);
    assert.equal(accessLines.length, 2);
    for (const line of accessLines) {
      assert.equal(line.route, '/api/v1/telemetry/intake/:VIN');
      assert.equal(line.principalId, partner.id);
      assert.equal(line.audience, 'partners');
      assert.equal(line.clientAddress, '127.0.0.1');
      assert.equal(typeof line.durationMs, 'number');
    }
    assert.equal(accessLines[1]!.requestId, 'lane-test-0001');
    const metrics = await (await fetch(`${lane.url}/metrics`)).text();
    assert.match(metrics, /trailwire_http_requests_total\{method="POST",route="\/api\/v1\/telemetry\/intake\/:VIN",status="202"\} 2/);
  });

  it('answers what it refuses as the edge layer answers any refusal: problem+json with the request id, counted and logged under the route', async () => {
    const before = lane.contexts();
    const invalid = await post({ 'x-request-id': 'lane-test-0002' }, JSON.stringify({ timestamp: 'soon' }));
    assert.equal(invalid.status, 400);
    assert.equal(invalid.headers.get('content-type'), 'application/problem+json');
    assert.equal(invalid.headers.get('x-request-id'), 'lane-test-0002');
    assert.equal(invalid.headers.get('cache-control'), 'no-store');
    const problem = await invalid.json();
    assert.equal(problem.requestId, 'lane-test-0002');
    assert.match(problem.detail, /gps-basic schema/);
    assert.ok(problem.errors.length > 0);

    const notJson = await post({}, '{"timestamp": ');
    assert.equal(notJson.status, 400);
    assert.match((await notJson.json()).detail, /not valid JSON/);
    assert.equal(lane.contexts(), before, 'the lane took both (and had the edge layer answer them)');
    const line = lines.find((entry) => entry.requestId === 'lane-test-0002')!;
    assert.equal(line.status, 400);
    assert.equal(line.route, '/api/v1/telemetry/intake/:VIN');
    assert.equal(line.principalId, partner.id);
  });

  it('refuses over the budget with 429, Retry-After and Connection: close, before the body is read', async () => {
    let answer: Response;
    do answer = await post();
    while (answer.status === 202);
    assert.equal(answer.status, 429);
    assert.equal(answer.headers.get('connection'), 'close');
    assert.match(answer.headers.get('retry-after') ?? '', /^\d+$/);
    assert.equal(answer.headers.get('ratelimit-remaining'), '0');
    assert.equal((await answer.json()).type, 'https://trailwire.dev/problems/rate-limited');
    assert.ok(lines.some((line) => line.event === 'limit.hit' && line.route === '/api/v1/telemetry/intake/:VIN'), 'the limit hit is audited');
  });
});

describe('what the intake lane leaves to Koa', () => {
  it('an unseen token, a browser, an encoded path, a customer token, another media type: each answered by Koa as before', async () => {
    const app = await startTestApp();
    const lane = await countingServer(app, logLines().stream);
    try {
      const partner = await partnerWithToken(app, 'gps-basic');
      const customer = await customerWithToken(app);
      const body = JSON.stringify(fix(Math.floor(Date.UTC(2026, 5, 1, 11, 0, 0) / 1000)));
      const send = (path: string, headers: Record<string, string>) => fetch(lane.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
      const cases: Array<[string, string, Record<string, string>, number]> = [
        ['a customer token', `/api/v1/telemetry/intake/${VIN}`, { authorization: `Bearer ${customer.token}` }, 403],
        ['no token', `/api/v1/telemetry/intake/${VIN}`, {}, 401],
        ['a token never verified', `/api/v1/telemetry/intake/${VIN}`, { authorization: 'Bearer not.a.token' }, 401],
        ['another media type', `/api/v1/telemetry/intake/${VIN}`, { authorization: `Bearer ${partner.token}`, 'content-type': 'text/plain' }, 415],
        ['an encoded path', `/api/v1/telemetry/intake/${VIN.slice(0, 16)}%${VIN.charCodeAt(16).toString(16)}`, { authorization: `Bearer ${partner.token}` }, 202],
        ['a path below the VIN', `/api/v1/telemetry/intake/${VIN}/more`, { authorization: `Bearer ${partner.token}` }, 404],
        ['a browser', `/api/v1/telemetry/intake/${VIN}`, { authorization: `Bearer ${partner.token}`, origin: 'https://app.example.com' }, 202],
      ];
      for (const [name, path, headers, status] of cases) {
        const before = lane.contexts();
        const answer = await send(path, headers);
        assert.equal(answer.status, status, name);
        assert.equal(lane.contexts(), before + 1, `${name}: answered by Koa`);
        if (status >= 400) assert.equal(answer.headers.get('content-type'), 'application/problem+json', name);
        if (name === 'a browser') assert.equal(answer.headers.get('vary'), 'Origin', 'as the CORS layer answers any request with an Origin');
      }
    } finally {
      lane.server.closeAllConnections();
      await new Promise((resolve) => lane.server.close(resolve));
      await app.close();
    }
  });
});

describe('a failure inside the intake lane', () => {
  it('is logged and its connection closed; the process goes on', async () => {
    const { lines, stream } = logLines();
    const claims = { sub: 'partner-1', aud: 'partners' } as unknown as AccessClaims;
    const lane = createIntakeLane({
      prefix: '',
      tokens: { cachedClaims: () => claims, assertNotRevoked: async () => {} } as unknown as TokenService,
      takePost: async () => ({ headers: [], body: { id: 'intake-1', status: 'queued' } }),
      metrics: {
        observe: () => {
          throw new Error('a bug after the answer was written');
        },
      } as unknown as HttpMetrics,
      accessLog: { record: () => {} } as unknown as AccessLog,
      clientAddressOf: undefined,
      answerRefusal: () => assert.fail('nothing was refused'),
      logger: pino({ level: 'info' }, stream),
    });
    const server = createServer((req, res) => lane(req, res) ?? res.writeHead(404).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const answer = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1/telemetry/intake/${VIN}`, {
        method: 'POST',
        headers: { authorization: 'Bearer any', 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(answer.status, 202, 'the answer was written before the failure');
      await until(() => lines.some((line) => line.msg === 'intake answer failed'), 'the failure logged');
      const line = lines.find((entry) => entry.msg === 'intake answer failed')!;
      assert.equal(line.level, 50);
      assert.equal(line.route, '/api/v1/telemetry/intake/:VIN');
      assert.match(JSON.stringify(line.err), /a bug after the answer was written/);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
