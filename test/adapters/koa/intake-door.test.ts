/**
 * The intake door (`intake-door.ts`): an app Trailwire owns serves the intake POST with the same layers
 * as Koa's stack, without Koa's routing. What a partner relies on is that the door answers exactly as
 * the stack does — status, problem, headers, `Location` — for every spelling of the path, every refusal
 * and every kind of body, and that a request the door does not take still gets the router's answer.
 * Each case is sent to an app Trailwire owns (`createTrailwireApp(...).callback()`, the door) and to
 * the same app served by Koa's own handler (`Koa.prototype.callback`, the whole stack and no door),
 * both over one core, and the answers compared.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Koa from 'koa';
import { pino } from 'pino';
import { createTrailwireApp } from '../../../adapters/koa/app.ts';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { openSqliteIntakeQueue } from '../../../adapters/sqlite/intake-queue.ts';
import { createTrailwire, type Trailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { logLines } from '../../support/log-lines.ts';

const PREFIX = '/fleet-api';
const fix = (n: number) => ({ timestamp: 1780315200 + n, position: { latitude: 41.5, longitude: -87.25 }, speedKph: 100, bearingDeg: 90 });

interface Answer {
  status: number;
  headers: Record<string, string | null>;
  body: unknown;
}

/** The headers a partner reads, by name; the request id and the payload id differ by nature and are compared by shape. */
const COMPARED_HEADERS = ['content-type', 'cache-control', 'x-content-type-options', 'ratelimit-limit', 'www-authenticate', 'retry-after', 'allow', 'connection'];

async function send(url: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const response = await fetch(url + path, { method, headers, body });
  const text = await response.text();
  const type = response.headers.get('content-type') ?? '';
  const parsed = type.includes('json') && text ? JSON.parse(text) : text;
  const kept: Record<string, string | null> = {};
  for (const name of COMPARED_HEADERS) kept[name] = response.headers.get(name);
  // The payload id and request id are fresh each time: kept by their shape.
  kept['location'] = response.headers.get('location')?.replace(/[0-9a-f-]{36}$/, '<id>') ?? null;
  kept['x-request-id'] = response.headers.get('x-request-id') === null ? null : '<present>';
  if (parsed && typeof parsed === 'object') {
    const record = parsed as Record<string, unknown>;
    if (typeof record.id === 'string') record.id = '<id>';
    if (typeof record.requestId === 'string') record.requestId = '<id>';
  }
  return { status: response.status, headers: kept, body: parsed };
}

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('the intake door', () => {
  let dir: string;
  let trailwire: Trailwire;
  let door: { url: string; server: Server };
  let stack: { url: string; server: Server };
  const doorLog = logLines();
  const stackLog = logLines();
  let partnerToken: string;
  let customerToken: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-door-'));
    const store = await openSqliteStore({ file: join(dir, 'door.db') });
    trailwire = await createTrailwire({
      store,
      products: builtInProducts,
      intakeQueue: openSqliteIntakeQueue(store.db),
      productLimits: { 'gps-basic': { requests: 1000, windowSeconds: 60 } },
    });
    const options = { prefix: PREFIX, intakeRefusalDelayMs: 0, intakeBodyLimitBytes: 4096 };
    door = await listen(createTrailwireApp(trailwire, { ...options, logger: pino({ level: 'info' }, doorLog.stream) }).callback());
    stack = await listen(Koa.prototype.callback.call(createTrailwireApp(trailwire, { ...options, logger: pino({ level: 'info' }, stackLog.stream) })));
    const partner = await trailwire.auth.createPartner({ name: 'GPS', product: 'gps-basic' });
    partnerToken = (await trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;
    const customer = await trailwire.auth.createCustomer({ name: 'Reader' });
    customerToken = (await trailwire.auth.authenticate('customers', customer.apiKey, 'test')).token.accessToken;
  });
  after(async () => {
    door.server.close();
    stack.server.close();
    await trailwire.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Sends the same request to both apps (a fresh VIN, where the path has one) and answers both. */
  async function both(method: string, path: (vin: string) => string, headers: Record<string, string>, body?: string): Promise<[Answer, Answer]> {
    const target = path(uniqueVin());
    return [await send(door.url, method, target, headers, body), await send(stack.url, method, target, headers, body)];
  }
  const json = { 'content-type': 'application/json' };
  const partner = () => ({ ...json, authorization: `Bearer ${partnerToken}` });

  const cases: Array<[string, string, (vin: string) => string, () => Record<string, string>, string | undefined, number]> = [
    ['the usual POST', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, partner, JSON.stringify(fix(1)), 202],
    ['a query string', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}?source=x`, partner, JSON.stringify(fix(2)), 202],
    ['a trailing slash', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}/`, partner, JSON.stringify(fix(3)), 202],
    ['another case', 'POST', (vin) => `${PREFIX.toUpperCase()}/API/V1/Telemetry/Intake/${vin}`, partner, JSON.stringify(fix(4)), 202],
    ['a percent-encoded VIN', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${encodeURIComponent(vin).replace(/^./, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`, partner, JSON.stringify(fix(5)), 202],
    ['broken percent-encoding', 'POST', () => `${PREFIX}/api/v1/telemetry/intake/%E0%A4%A`, partner, JSON.stringify(fix(6)), 400],
    ['no VIN', 'POST', () => `${PREFIX}/api/v1/telemetry/intake/`, partner, JSON.stringify(fix(7)), 404],
    ['two segments', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}/more`, partner, JSON.stringify(fix(8)), 404],
    ['GET on the POST route', 'GET', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, partner, undefined, 405],
    ['no token', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, () => json, JSON.stringify(fix(9)), 401],
    ['a token that is no JWT', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, () => ({ ...json, authorization: 'Bearer nope' }), JSON.stringify(fix(10)), 401],
    ['a customer token', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, () => ({ ...json, authorization: `Bearer ${customerToken}` }), JSON.stringify(fix(11)), 403],
    ['a body that is not JSON', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, () => ({ ...partner(), 'content-type': 'text/plain' }), 'hello', 415],
    ['JSON in an unusual spelling', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, () => ({ ...partner(), 'content-type': 'Application/JSON ;charset=UTF-8' }), JSON.stringify(fix(12)), 202],
    ['invalid JSON', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, partner, '{"timestamp":', 400],
    ['a payload its product refuses', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, partner, JSON.stringify({ timestamp: 'soon' }), 400],
    ['a body over the limit', 'POST', (vin) => `${PREFIX}/api/v1/telemetry/intake/${vin}`, partner, JSON.stringify({ ...fix(13), pad: 'x'.repeat(5000) }), 413],
    ['an invalid VIN', 'POST', () => `${PREFIX}/api/v1/telemetry/intake/NOT-A-VIN`, partner, JSON.stringify(fix(14)), 400],
  ];
  for (const [name, method, path, headers, body, status] of cases) {
    it(`answers ${name} as the stack does (${status})`, async () => {
      const [fromDoor, fromStack] = await both(method, path, headers(), body);
      assert.equal(fromDoor.status, status, JSON.stringify(fromDoor.body));
      assert.deepEqual(fromDoor, fromStack);
    });
  }

  it('counts and logs the request as the stack does: the route, the status, the partner', async () => {
    const seen = doorLog.lines.length;
    await send(door.url, 'POST', `${PREFIX}/api/v1/telemetry/intake/${uniqueVin()}`, partner(), JSON.stringify(fix(20)));
    const line = doorLog.lines.slice(seen).find((entry) => entry.access === 'http');
    assert.ok(line, 'an access line for the 202');
    assert.equal(line.route, `${PREFIX}/api/v1/telemetry/intake/:VIN`);
    assert.equal(line.status, 202);
    assert.equal(line.audience, 'partners');
    const metrics = await (await fetch(`${door.url}${PREFIX}/metrics`)).text();
    assert.match(metrics, new RegExp(`trailwire_http_requests_total\\{method="POST",route="${PREFIX}/api/v1/telemetry/intake/:VIN",status="202"\\} [1-9]`));
  });
});
