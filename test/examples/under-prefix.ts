/**
 * What every host example must serve under its prefix, one set of checks for them all: a partner's
 * intake answered 202 with a `Location` under the prefix that reads back `processed`, the customer's
 * read of the processed fix, the live events stream, the OpenAPI document naming the prefix as its
 * server, the live map whose assets load from under the prefix, and a problem+json 404 for an
 * unknown path there. Answers the customer's token for the host's own further checks.
 */
import assert from 'node:assert/strict';
import { call, eventually } from './run-example.ts';

export interface Onboarded {
  customerKey: string;
  partnerKey: string;
  trailerId: string;
}

export async function assertTrailwireUnderPrefix(base: string, prefix: string, vin: string, keys: Onboarded): Promise<{ customerToken: string }> {
  const api = base + prefix;
  const partnerToken = (await call(`${api}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': keys.partnerKey } })).body.access_token;
  assert.ok(partnerToken, 'the partner authenticates under the prefix');
  const accepted = await call(`${api}/api/v1/telemetry/intake/${vin}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${partnerToken}` },
    json: { timestamp: 1780315200, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 },
  });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const location = accepted.headers.get('location') ?? '';
  assert.equal(location, `${prefix}/api/v1/telemetry/intake/status/${accepted.body.id}`);
  await eventually(async () => {
    const status = await call(base + location, { headers: { authorization: `Bearer ${partnerToken}` } });
    assert.equal(status.status, 200, JSON.stringify(status.body));
    assert.notEqual(status.body.status, 'failed', status.body.error);
    return status.body.status === 'processed' ? true : undefined;
  });

  const customerToken = (await call(`${api}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': keys.customerKey } })).body.access_token;
  const read = await call(`${api}/api/v1/trailers/${keys.trailerId}`, { headers: { authorization: `Bearer ${customerToken}` } });
  assert.equal(read.status, 200);
  assert.deepEqual(read.body.telemetry, { timestamp: '2026-06-01T12:00:00.000Z', lat: 41.88, long: -87.63, speed: 55, heading: 'W' });

  const live = new AbortController();
  const stream = await fetch(`${api}/api/v1/live`, { headers: { authorization: `Bearer ${customerToken}` }, signal: live.signal });
  assert.equal(stream.status, 200);
  assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
  const first = await stream.body!.getReader().read();
  assert.match(new TextDecoder().decode(first.value), /event: heartbeat/);
  live.abort();

  assert.deepEqual((await call(`${api}/openapi.json`)).body.servers.map((server: { url: string }) => server.url), [prefix]);
  const page = await call(`${api}/`);
  assert.equal(page.status, 200);
  // Every link of the page to this server (its scripts, styles and the docs page) is under the prefix.
  const links = [...String(page.body).matchAll(/(?:src|href)="(\/[^"]*)"/g)].map((match) => match[1]!);
  assert.ok(links.some((link) => link.startsWith(`${prefix}/assets/`)), links.join(', '));
  for (const link of links) assert.equal((await fetch(base + link)).status, 200, link);

  const missing = await call(`${api}/nothing-here`);
  assert.equal(missing.status, 404);
  assert.match(missing.headers.get('content-type') ?? '', /^application\/problem\+json/);
  return { customerToken };
}
