/**
 * The access log and the audit trail of a whole server (issue 17), read back from its log output:
 * one access line per HTTP request and two per LiveFeed stream, with request id, route pattern (never
 * the VIN of the path), method, status, duration and principal; audit lines (`audit: true`) for
 * authenticate ok and failed with the client address, an API-key rotation, a signing-key rotation,
 * and limit hits sampled to one line however many 429s; and never an API key, a token or a payload in
 * any line: the flow's output is searched for `twp_`, `twc_` and `eyJ`.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { pino } from 'pino';
import { PROTO_ROOT } from '../../../adapters/grpc/proto.ts';
import { startServer, type RunningServer } from '../../../adapters/server/index.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { until } from '../../support/until.ts';

const livefeed = (
  grpc.loadPackageDefinition(protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, includeDirs: [PROTO_ROOT] })) as any
).livefeed.v1;

type Line = Record<string, any>;

describe('access log and audit trail', () => {
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-audit-'));
  const output: string[] = [];
  const lines = (): Line[] => output.join('').trim().split('\n').map((text) => JSON.parse(text));
  let server: RunningServer;
  const vin = uniqueVin();
  let requests = 0;
  const call = async (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) => {
    requests += 1;
    const response = await fetch(server.url + path, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: await response.json().catch(() => null) };
  };

  before(async () => {
    const sink = new Writable({ write: (chunk, _encoding, done) => (output.push(String(chunk)), done()) });
    server = await startServer({
      db: join(directory, 'trailwire.db'),
      port: 0,
      grpcPort: 0,
      host: '127.0.0.1',
      heartbeatIntervalMs: 50,
      logger: pino({ level: 'info' }, sink),
      core: { limits: { read: { requests: 3, windowSeconds: 3600 } } },
    });
    const { trailwire } = server;
    const partner = await trailwire.auth.createPartner({ name: 'GPS Co', product: 'gps-basic' });
    const customer = await trailwire.auth.createCustomer({ name: 'Acme' });

    const partnerToken = (await call('POST', '/api/v1/partners/authenticate', { 'x-api-key': partner.apiKey })).body.access_token;
    const customerToken = (await call('POST', '/api/v1/customers/authenticate', { 'x-api-key': customer.apiKey })).body.access_token;
    assert.equal((await call('POST', '/api/v1/customers/authenticate', { 'x-api-key': 'twc_not-a-real-key' })).status, 401);
    const now = Math.floor(Date.now() / 1000);
    const fix = { timestamp: now, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 };
    assert.equal((await call('POST', `/api/v1/telemetry/intake/${vin}`, { authorization: `Bearer ${partnerToken}` }, fix)).status, 202);

    // A LiveFeed stream, opened and closed by the client.
    const client = new livefeed.LiveFeed(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${customerToken}`);
    metadata.set('x-request-id', 'stream-1');
    const stream = client.Subscribe({}, metadata);
    stream.on('error', () => {});
    await new Promise((resolve) => stream.once('data', resolve));
    stream.cancel();
    client.close();

    // Reads up to the limit and past it: 3 answered, then 429s.
    const bearer = { authorization: `Bearer ${customerToken}` };
    for (let i = 0; i < 6; i++) await call('GET', '/api/v1/fleets', bearer);
    const rotated = await call('PUT', '/api/v1/customers/rotate', bearer);
    assert.equal(rotated.status, 200);
    assert.equal((await call('PUT', '/api/v1/customers/rotate', bearer)).status, 401, 'the rotated token is refused');
    await trailwire.keys.rotate();
    // The stream's close line is written when the server sees the cancel.
    await until(() => lines().some((line) => line.event === 'stream.close'), "the stream's close line", 15_000);
  });

  after(async () => {
    await server.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it('never logs an API key, a token or a payload', () => {
    const text = output.join('');
    assert.ok(text.length > 0);
    for (const secret of ['twp_', 'twc_', 'eyJ', '41.88']) assert.ok(!text.includes(secret), `the log contains ${secret}`);
  });

  it('writes one access line per HTTP request, with the route pattern rather than the path', () => {
    const access = lines().filter((line) => line.access === 'http');
    assert.equal(access.length, requests);
    const intake = access.find((line) => line.method === 'POST' && line.status === 202)!;
    assert.equal(intake.route, '/api/v1/telemetry/intake/:VIN');
    assert.ok(!output.join('').includes(vin), 'the VIN of the path is not logged');
    assert.equal(intake.audience, 'partners');
    assert.equal(typeof intake.principalId, 'string');
    assert.match(intake.requestId, /^[0-9a-f-]{36}$/);
    assert.equal(typeof intake.durationMs, 'number');
    assert.equal(intake.level, 30);
    assert.deepEqual(
      access.filter((line) => line.route === '/api/v1/fleets').map((line) => line.status),
      [200, 200, 200, 429, 429, 429],
    );
  });

  it('writes an open and a close line per LiveFeed stream', () => {
    const stream = lines().filter((line) => line.access === 'grpc');
    assert.deepEqual(stream.map((line) => line.event), ['stream.open', 'stream.close']);
    for (const line of stream) {
      assert.equal(line.requestId, 'stream-1');
      assert.equal(line.route, '/livefeed.v1.LiveFeed/Subscribe');
      assert.equal(typeof line.principalId, 'string');
    }
    assert.equal(stream[1]!.status, 'CANCELLED');
    assert.equal(typeof stream[1]!.durationMs, 'number');
  });

  it('marks the audit events: authenticate ok and failed with the client address, rotations, one line for a flood of limit hits', () => {
    const audit = lines().filter((line) => line.audit === true);
    const authenticate = audit.filter((line) => line.event === 'authenticate');
    assert.deepEqual(authenticate.map((line) => `${line.audience}:${line.outcome}`), ['partners:ok', 'customers:ok', 'customers:failed']);
    for (const line of authenticate) assert.equal(line.clientAddress, '127.0.0.1');
    assert.equal(authenticate[2]!.reason, 'invalid_api_key');
    assert.equal(audit.filter((line) => line.event === 'api-key.rotated').length, 1);
    assert.equal(audit.filter((line) => line.event === 'signing-keys.changed').length, 1);
    const limitHits = audit.filter((line) => line.event === 'limit.hit');
    assert.equal(limitHits.length, 1, 'three 429s of one principal and route: one line');
    assert.equal(limitHits[0]!.route, '/api/v1/fleets');
  });
});
