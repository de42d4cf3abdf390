/**
 * The property-based bad-input suite (fast-check): every endpoint (of the webhooks', all but DELETE
 * and the test, which sends a request out) × generated malformed ids, query
 * strings, headers, paging tokens, time ranges and bodies. Asserted for every case: never a 5xx;
 * every 4xx is `application/problem+json` with `status` equal to the HTTP status, one the OpenAPI
 * document lists for that operation; a 200 never carries another tenant's record; and the process
 * is healthy after the run. A fixed seed keeps CI reproducible (and under a minute);
 * `TRAILWIRE_FUZZ_RUNS=<n>` runs longer, `TRAILWIRE_FUZZ_SEED=<n>` another sequence. The counts are
 * printed at the end (cases, statuses seen, 5xx).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { applyTelemetry, tpmsReading, cargosafeReading, gpsFix, uniqueVin, mintToken } from '../support/fixtures.ts';
import { customerWithToken, partnerWithToken, startTestApp, type TestApp } from '../support/test-app.ts';

const RUNS = Number(process.env.TRAILWIRE_FUZZ_RUNS ?? 300);
const SEED = Number(process.env.TRAILWIRE_FUZZ_SEED ?? 1414);

interface Endpoint {
  method: 'GET' | 'POST' | 'PUT';
  /** The OpenAPI path template. */
  template: string;
  path: (id: string) => string;
  auth: 'customer' | 'partner' | 'apiKey-customer' | 'apiKey-partner';
}

const ENDPOINTS: Endpoint[] = [
  { method: 'GET', template: '/api/v1/fleets', path: () => '/api/v1/fleets', auth: 'customer' },
  { method: 'GET', template: '/api/v1/fleets/{fleet}', path: (id) => `/api/v1/fleets/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/trailers/{fleetOrTrailer}', path: (id) => `/api/v1/trailers/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/trailers/telemetry/gps/{trailer}', path: (id) => `/api/v1/trailers/telemetry/gps/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/devices/{trailer}', path: (id) => `/api/v1/devices/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/devices/details/{device}', path: (id) => `/api/v1/devices/details/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/devices/telemetry/{device}', path: (id) => `/api/v1/devices/telemetry/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/cargosafe', path: () => '/api/v1/cargosafe', auth: 'customer' },
  { method: 'GET', template: '/api/v1/cargosafe/{id}', path: (id) => `/api/v1/cargosafe/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/cargosafe/telemetry/{id}', path: (id) => `/api/v1/cargosafe/telemetry/${id}`, auth: 'customer' },
  { method: 'POST', template: '/api/v1/webhooks', path: () => '/api/v1/webhooks', auth: 'customer' },
  { method: 'GET', template: '/api/v1/webhooks', path: () => '/api/v1/webhooks', auth: 'customer' },
  { method: 'GET', template: '/api/v1/webhooks/{id}', path: (id) => `/api/v1/webhooks/${id}`, auth: 'customer' },
  { method: 'GET', template: '/api/v1/webhooks/{id}/deliveries', path: (id) => `/api/v1/webhooks/${id}/deliveries`, auth: 'customer' },
  { method: 'POST', template: '/api/v1/telemetry/intake/{VIN}', path: (id) => `/api/v1/telemetry/intake/${id}`, auth: 'partner' },
  { method: 'GET', template: '/api/v1/telemetry/intake/status/{id}', path: (id) => `/api/v1/telemetry/intake/status/${id}`, auth: 'partner' },
  { method: 'POST', template: '/api/v1/customers/authenticate', path: () => '/api/v1/customers/authenticate', auth: 'apiKey-customer' },
  { method: 'POST', template: '/api/v1/partners/authenticate', path: () => '/api/v1/partners/authenticate', auth: 'apiKey-partner' },
];

/** Strings a careless or hostile client sends. */
const nasty = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('', '0', '-1', '2147483648', '99999999999999999999', '1e3', 'NaN', 'null', '%00', '..%2F..%2Fetc', "' OR 1=1 --", '<script>', 'true', '[]', '{}'),
  fc.integer().map(String),
  fc.uuid(),
  fc.string({ unit: 'binary', maxLength: 20 }),
);
const timestamp = fc.oneof(
  nasty,
  fc.date({ min: new Date(-8_640_000_000_000), max: new Date(8_640_000_000_000), noInvalidDate: true }).map((date) => date.toISOString()),
  fc.constantFrom('2026-02-30T00:00:00Z', '2026-05-01T25:00:00Z', '1970-01-01T00:00:00Z', '9999-12-31T23:59:59Z', '2026-05-01T00:00:00+99:00'),
);
const query = fc.record(
  {
    take: nasty,
    activeOnly: nasty,
    from: timestamp,
    to: timestamp,
    next: fc.oneof(nasty, fc.base64String({ maxLength: 60 }).map((text) => `${text}.${text.slice(0, 22)}`)),
    extra: nasty,
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
  fc.string({ maxLength: 200 }),
  fc.constantFrom('', '{', '{"timestamp":1e400}', '{"timestamp":"x","position":{}}', '[]', 'null', `{"readAt":"2026-01-01T00:00:00Z","sensors":${JSON.stringify(Array(40).fill({}))}}`),
);
const header = fc.oneof(nasty, fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-16', 'multipart/form-data'));
// Mostly valid tokens, so that most cases get past authentication to the parameters.
const authorization = fc.oneof(
  { arbitrary: fc.constant('good'), weight: 6 },
  { arbitrary: fc.constant('other-tenant'), weight: 2 },
  { arbitrary: fc.constant('none'), weight: 1 },
  { arbitrary: nasty.map((text) => `Bearer ${text}`), weight: 1 },
  { arbitrary: nasty, weight: 1 },
);

function headerSafe(text: string): string {
  // fetch refuses header values with control characters or non-Latin-1; what a socket can carry is kept.
  return text.replace(/[^\x20-\x7e]/g, '');
}

describe('bad input, generated: every endpoint answers with a documented problem, never a 5xx', () => {
  let app: TestApp;
  let openapi: { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
  let customer: { id: string; apiKey: string; token: string };
  let partner: { id: string; apiKey: string; token: string };
  let rivalToken: string;
  const ownIds = new Set<string>();
  const rivalIds = new Set<string>();
  const statuses = new Map<number, number>();
  let cases = 0;
  let serverErrors = 0;

  before(async () => {
    app = await startTestApp({ core: { limits: { read: { requests: 1_000_000, windowSeconds: 60 }, authenticate: { requests: 1_000_000, windowSeconds: 300 }, failedAuthenticatePerAddress: { requests: 1_000_000, windowSeconds: 300 } } } });
    openapi = (await app.call('GET', '/openapi.json')).body;
    customer = await customerWithToken(app, 'Fuzzed Co');
    partner = await partnerWithToken(app, 'gps-basic', 'Fuzz Partner');
    const rival = await app.trailwire.auth.createCustomer({ name: 'Rival Co' });
    rivalToken = await mintToken(app.trailwire, 'customers', rival.principal.id);
    for (const [owner, ids] of [[customer.id, ownIds], [rival.principal.id, rivalIds]] as const) {
      const fleet = await app.trailwire.admin.createFleet({ customerId: owner, name: 'F' });
      const vin = uniqueVin();
      const trailer = await app.trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
      const now = app.clock.now();
      await applyTelemetry(app.trailwire, vin, { gps: [gpsFix(now - 60_000)], devices: [tpmsReading('S', now - 60_000)], cargosafe: [cargosafeReading('C', now - 60_000)] });
      ids.add(String(fleet.id)).add(trailer.id);
      // A public literal: registered without a DNS lookup.
      ids.add((await app.trailwire.webhooks.service.create(owner, { url: 'https://203.0.114.9/hook' })).id);
    }
  });
  after(() => app.close());

  it('holds for generated requests (fixed seed)', { timeout: 120_000 }, async () => {
    const rivalSegments = [...rivalIds];
    const id = fc.oneof(nasty.map((text) => encodeURIComponent(text)), fc.constantFrom(...rivalSegments), fc.constantFrom(...ownIds));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ENDPOINTS), id, query, authorization, header, body, header, async (endpoint, segment, params, auth, contentType, payload, idempotencyKey) => {
        const search = new URLSearchParams(Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined)).toString();
        const headers: Record<string, string> = { 'content-type': headerSafe(contentType), 'idempotency-key': headerSafe(idempotencyKey) };
        const token = endpoint.auth === 'partner' ? partner.token : customer.token;
        if (endpoint.auth.startsWith('apiKey')) headers['x-api-key'] = auth === 'good' ? (endpoint.auth === 'apiKey-customer' ? customer.apiKey : partner.apiKey) : headerSafe(auth);
        else if (auth === 'good') headers.authorization = `Bearer ${token}`;
        else if (auth === 'other-tenant') headers.authorization = `Bearer ${endpoint.auth === 'partner' ? customer.token : rivalToken}`;
        else if (auth !== 'none') headers.authorization = headerSafe(auth);
        const path = `${endpoint.path(segment)}${search ? `?${search}` : ''}`;
        const response = await app.call(endpoint.method, path, { headers, body: endpoint.method === 'GET' ? undefined : payload });
        cases++;
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        if (response.status >= 500) serverErrors++;
        assert.ok(response.status < 500, `${endpoint.method} ${path}: ${response.status} ${JSON.stringify(response.body)}`);
        if (response.status >= 400) {
          assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/, `${endpoint.method} ${path}`);
          assert.equal(response.body.status, response.status);
          assert.equal(typeof response.body.type, 'string');
          assert.equal(typeof response.body.title, 'string');
          const documented = Object.keys(openapi.paths[endpoint.template]?.[endpoint.method.toLowerCase()]?.responses ?? {});
          // An empty id makes the path another route's, or none (`.../intake/status/` is the intake
          // POST route with VIN "status"; `.../intake/` is no route): 404 or 405 with Allow, the
          // documented answers of such paths (`not_found`, `method_not_allowed`).
          const otherRoute = ['', '.', '..'].includes(segment) && (response.status === 404 || (response.status === 405 && response.headers.get('allow') !== null));
          assert.ok(otherRoute || documented.includes(String(response.status)),
            `${endpoint.method} ${endpoint.template}: ${response.status} is not documented (${documented})`);
        } else if (endpoint.auth === 'customer') {
          // Never a record of another tenant: no id of the other customer's appears in the answer.
          const foreign = auth === 'other-tenant' ? ownIds : rivalIds;
          const text = JSON.stringify(response.body);
          for (const foreignId of foreign) {
            const leaked = /^\d+$/.test(foreignId)
              ? new RegExp(`"fleetId":${foreignId}[,}]`).test(text) || (endpoint.template.startsWith('/api/v1/fleets') && new RegExp(`"id":${foreignId}[,}]`).test(text))
              : text.includes(foreignId);
            assert.ok(!leaked, `${path} leaked ${foreignId}`);
          }
        }
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true, includeErrorInReport: true },
    );
    // The process is healthy after the run.
    assert.equal((await app.call('GET', '/healthz')).status, 200);
    assert.equal((await app.call('GET', '/readyz')).status, 200);
    assert.equal((await app.call('GET', '/api/v1/fleets', { token: customer.token })).status, 200);
    const seen = Object.fromEntries([...statuses].sort(([a], [b]) => a - b));
    console.log(`fuzz: seed ${SEED}, ${cases} cases, statuses ${JSON.stringify(seen)}, 5xx ${serverErrors}`);
    assert.equal(serverErrors, 0);
  });
});
