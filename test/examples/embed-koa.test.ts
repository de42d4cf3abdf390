/**
 * examples/embed-koa runs as its README says: the host app keeps its own route, header, auth, body
 * parsing and error format; Trailwire answers under /fleet-api with its own keys, tokens and
 * problem+json; onboarding through the host's admin routes, a partner's intake under the prefix and
 * a customer's read of the processed fix work end to end; the LiveFeed answers on the printed port.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { call, eventually, firstHeartbeat, startExample } from './run-example.ts';

const DISPATCH_KEY = 'test-dispatch-key';
const VIN = '1HGCM82633A004352';

it('examples/embed-koa serves the host app and Trailwire under /fleet-api, as its README says', { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-embed-'));
  const example = await startExample(
    'embed-koa',
    { TRAILWIRE_DB: join(dir, 'dispatch.db'), DISPATCH_KEY, LOG_LEVEL: 'warn', PORT: '0', GRPC_PORT: '0' },
    /^\s+livefeed\s/,
  );
  try {
    assert.equal(example.lines[0], 'Dispatch is running');
    const base = /^\s+http\s+(http:\/\/127\.0\.0\.1:\d+)\s+\(Trailwire under \/fleet-api\)$/.exec(example.lines[1] ?? '')?.[1];
    const livefeed = /^\s+livefeed\s+(127\.0\.0\.1:\d+)$/.exec(example.lines[2] ?? '')?.[1];
    assert.ok(base && livefeed, example.lines.join('\n'));
    const fleetApi = `${base}/fleet-api`;

    // The host app, as before: its route, its header, its auth and error format.
    const health = await call(`${base}/health`);
    assert.deepEqual(health.body, { status: 'ok' });
    assert.match(health.headers.get('x-response-time') ?? '', /^\d+\.\dms$/);
    const refused = await call(`${base}/dispatch/customers`, { method: 'POST', json: { name: 'Acme' } });
    assert.equal(refused.status, 401);
    assert.deepEqual(refused.body, { error: 'X-Dispatch-Key required' });

    // Onboarding through the host's admin routes, which call the core's services.
    const admin = (path: string, json: unknown) => call(`${base}/dispatch/${path}`, { method: 'POST', headers: { 'x-dispatch-key': DISPATCH_KEY }, json });
    const customer = await admin('customers', { name: 'Acme Freight' });
    assert.equal(customer.status, 201);
    assert.match(customer.body.apiKey, /^twc_/);
    const fleet = await admin('fleets', { customerId: customer.body.id, name: 'Reefers' });
    assert.equal(fleet.status, 201);
    assert.equal(typeof fleet.body.id, 'number');
    const trailer = await admin('trailers', { fleetId: fleet.body.id, vin: VIN });
    assert.equal(trailer.status, 201);
    const partner = await admin('partners', { name: 'Tracker Co', product: 'gps-basic' });
    assert.match(partner.body.apiKey, /^twp_/);
    const unknown = await admin('fleets', { customerId: 'nope', name: 'X' });
    assert.equal(unknown.status, 404, 'a core error in a host route, in the host’s own format');
    assert.deepEqual(unknown.body, { error: 'No customer nope.' });
    assert.deepEqual((await admin('customers', {})).body, { error: 'name is required' });

    // Trailwire under /fleet-api: a partner's intake, processed, read by the customer.
    const partnerToken = (await call(`${fleetApi}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': partner.body.apiKey } })).body.access_token;
    const accepted = await call(`${fleetApi}/api/v1/telemetry/intake/${VIN}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${partnerToken}` },
      json: { timestamp: 1780315200, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 },
    });
    assert.equal(accepted.status, 202);
    assert.match(accepted.headers.get('x-response-time') ?? '', /ms$/, 'the host middleware above the mount wraps Trailwire too');
    const location = accepted.headers.get('location') ?? '';
    assert.equal(location, `/fleet-api/api/v1/telemetry/intake/status/${accepted.body.id}`);
    await eventually(async () => {
      const status = await call(base + location, { headers: { authorization: `Bearer ${partnerToken}` } });
      assert.notEqual(status.body.status, 'failed', status.body.error);
      return status.body.status === 'processed' ? true : undefined;
    });

    const customerToken = (await call(`${fleetApi}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': customer.body.apiKey } })).body.access_token;
    const read = await call(`${fleetApi}/api/v1/trailers/${trailer.body.id}`, { headers: { authorization: `Bearer ${customerToken}` } });
    assert.equal(read.status, 200);
    assert.equal(read.body.vin, VIN);
    assert.deepEqual(read.body.telemetry, { timestamp: '2026-06-01T12:00:00.000Z', lat: 41.88, long: -87.63, speed: 55, heading: 'W' });

    assert.deepEqual((await call(`${fleetApi}/healthz`)).body, { status: 'ok' });
    assert.deepEqual((await call(`${fleetApi}/openapi.json`)).body.servers.map((s: { url: string }) => s.url), ['/fleet-api']);
    const missing = await call(`${fleetApi}/nothing-here`);
    assert.equal(missing.status, 404);
    assert.match(missing.headers.get('content-type') ?? '', /^application\/problem\+json/);
    const outside = await call(`${base}/api/v1/fleets`);
    assert.equal(outside.status, 404, 'Trailwire answers only under its prefix');
    assert.doesNotMatch(outside.headers.get('content-type') ?? '', /problem/);

    // The LiveFeed on the printed port: a heartbeat at once for the customer's token.
    await firstHeartbeat(livefeed, customerToken);

    // The live events under the prefix; SIGTERM ends the open stream with a final event, and does not wait for it.
    const live = await fetch(`${fleetApi}/api/v1/live`, { headers: { authorization: `Bearer ${customerToken}` } });
    assert.equal(live.status, 200);
    assert.match(live.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = live.text();
    assert.equal(await example.stop('SIGTERM'), 0, example.stderr());
    // The heartbeat carries the stream's position (`id:`) since the live feed can resume (issue 32).
    assert.match(await events, /^(id: \S+\n)?event: heartbeat\n[\s\S]*event: error\ndata: \{[^\n]*"status":503/);
  } finally {
    await example.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
