/**
 * The OpenAPI 3.1 document served at `/openapi.json`: every REST endpoint the app mounts, with its
 * parameters, bodies, headers and problem responses. It is built from the same tables the app uses
 * (error codes and descriptions, paging bounds), so it cannot drift from them; a test walks the
 * router and checks that every mounted route is documented.
 */
import { ERROR_CODES, ERROR_DESCRIPTIONS, HTTP_STATUS_BY_CODE, problemType } from '../../core/errors.ts';
import { INTAKE_ID_PATTERN, MAX_STATUS_IDS } from '../../core/intake-service.ts';
import { HEADINGS } from '../../core/model.ts';
import { TAKE_DEFAULT, TAKE_MAX } from '../../core/paging.ts';
import { EXPORT_MAX_RANGE_MS } from '../../core/telemetry-export.ts';
import type { Product } from '../../core/products.ts';
import { packageVersion } from './package-version.ts';
import { WEBHOOK_EVENT_TYPES } from '../../core/store.ts';
import { WEBHOOK_URL_MAX_LENGTH } from '../../core/webhook-address.ts';

type Json = Record<string, unknown>;

export interface OpenApiOptions {
  /** Which APIs the app mounts. */
  auth: boolean;
  data: boolean;
  /** Extra path items (for example the intake endpoints), merged in. */
  extraPaths?: Record<string, Json>;
  /** Extra component schemas, merged in. */
  extraSchemas?: Record<string, Json>;
  /** `info.version`. Default: the version of the `trailwire` package. */
  version?: string;
  /** Where the paths are served, when not at the root: a path prefix such as `/fleet-api`, published as `servers[0].url`. */
  serverUrl?: string;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const timestamp = { type: 'string', format: 'date-time', description: 'RFC 3339, UTC.' };
const nullable = (schema: Json) => ({ oneOf: [schema, { type: 'null' }] });

const rateLimitHeaders = {
  'RateLimit-Limit': { description: 'Requests allowed in the current window.', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' } },
};

/** A problem+json response for the given statuses. */
function problems(...statuses: number[]): Record<string, Json> {
  const responses: Record<string, Json> = {};
  for (const status of statuses) {
    const codes = ERROR_CODES.filter((code) => HTTP_STATUS_BY_CODE[code].status === status);
    responses[String(status)] = {
      description: codes.map((code) => `\`${code}\`: ${ERROR_DESCRIPTIONS[code]}`).join(' '),
      content: { 'application/problem+json': { schema: ref('Problem') } },
      ...(status === 429
        ? { headers: { ...rateLimitHeaders, 'Retry-After': { description: 'Seconds until the window ends.', required: true, schema: { type: 'integer' } } } }
        : {}),
      ...(status === 503 ? { headers: { 'Retry-After': { description: 'Seconds to wait before trying again.', required: true, schema: { type: 'integer' } } } } : {}),
    };
  }
  return responses;
}

/**
 * What any operation may answer besides its own statuses: 405 for another method on its path (the
 * `Allow` header lists the path's methods) and 500 for a bug. Shared responses, so each is written once.
 */
const anyOperationResponses = {
  405: { $ref: '#/components/responses/MethodNotAllowed' },
  500: { $ref: '#/components/responses/InternalError' },
};

const sharedResponses: Record<string, Json> = {
  MethodNotAllowed: {
    description: '`method_not_allowed`: the path exists, but not with this method; `Allow` lists the methods it takes.',
    headers: { Allow: { description: 'The methods of this path, comma-separated.', required: true, schema: { type: 'string' } } },
    content: { 'application/problem+json': { schema: ref('Problem') } },
  },
  InternalError: {
    description:
      "`internal`: a bug. The body reveals nothing; quote its `requestId` (also the `X-Request-Id` header) to the operator. `body_already_read`: the server that mounts Trailwire read the request body first (a body parser above the mount); mount Trailwire above the parser.",
    content: { 'application/problem+json': { schema: ref('Problem') } },
  },
};

/** The tags the operations use, each with what it groups. */
const TAGS = [
  { name: 'Authentication API', description: 'API keys for access tokens (JWT, 1800 s), key rotation, and the public keys that verify the tokens.' },
  { name: 'Customer read API', description: "A customer's fleets, trailers, devices and cargosafe units, their telemetry in time ranges, and live updates. Customer token." },
  { name: 'Webhooks', description: "The customer's webhook endpoints: trailer events pushed to them, signed as Standard Webhooks specifies (docs/webhooks.md). Customer token." },
  { name: 'Partner intake', description: "Telemetry from a partner's product integration, queued durably, and each payload's processing state. Partner token." },
  { name: 'Operations', description: 'Liveness, readiness, Prometheus metrics and this document. No authentication.' },
] as const;

const pathParam = (name: string, description: string, schema: Json = { type: 'string' }) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema,
});

const pagingParams = [
  {
    name: 'take',
    in: 'query',
    description: `Page size, ${TAKE_DEFAULT} by default.`,
    schema: { type: 'integer', minimum: 1, maximum: TAKE_MAX, default: TAKE_DEFAULT },
  },
  { name: 'next', in: 'query', description: 'The `next` token of the previous page, passed back unchanged. It carries the page size, `activeOnly` and the time range of its list, so it may be sent alone; a parameter beside it that contradicts it is a 400.', schema: { type: 'string' } },
];
const activeOnlyParam = {
  name: 'activeOnly',
  in: 'query',
  description: 'Only active records: trailers not deactivated by the operator; devices not deactivated and reporting within the staleness period (7 days by default).',
  schema: { type: 'boolean', default: false },
};
const timeParams = [
  { name: 'from', in: 'query', description: `Start of the range, inclusive (RFC 3339). Default: \`to\` minus 24 hours. At most ${EXPORT_MAX_RANGE_MS / 86_400_000} days before \`to\` in an export.`, schema: timestamp },
  { name: 'to', in: 'query', description: 'End of the range, exclusive (RFC 3339). Default: now.', schema: timestamp },
  ...pagingParams,
];

function pageOf(item: string): Json {
  return {
    type: 'object',
    required: ['data'],
    properties: {
      data: { type: 'array', items: ref(item) },
      next: { type: 'string', description: 'Present only when more data is available.' },
    },
  };
}

/** What every read operation shares, after its own first sentence. */
const READ_RULES = 'Customer token. Anything the customer does not own is a 404, whether or not it exists. Counts against the read limit (600 per minute per customer by default).';
const PAGE_RULES = 'A page: `take` records (50 by default, at most 500) ordered by id, and `next` while more exist; pass `next` back alone for the following page.';
const RANGE_RULES = 'Ascending by timestamp over `[from, to)` (the last 24 hours by default), a page at a time; `next` carries the range, so later pages read the same range as time moves on.';
const EXPORT_DAYS = EXPORT_MAX_RANGE_MS / (24 * 60 * 60 * 1000);
const EXPORT_RULES =
  `Export: with \`Accept: text/csv\` (a header row, then one row a record, RFC 4180; a text cell starting with =, +, -, @, tab or CR is prefixed with an apostrophe and quoted, so no spreadsheet runs it as a formula) or \`Accept: application/x-ndjson\` (one JSON record a line, as in \`data\`), the answer is the whole \`[from, to)\` range in one streamed response: no \`take\` or \`next\` (either is a 400), at most ${EXPORT_DAYS} days (a longer range is a 400). An export counts as one read. A failure after the first byte cuts the transfer off (no clean end), so a partial export is never mistaken for a whole one. Any other Accept gets the JSON page.`;

/**
 * A telemetry list: a JSON page of `item`s, or the export of its whole range as CSV or NDJSON
 * (`read-routes.ts`), the NDJSON lines each an `item`.
 */
function telemetryOperation(operationId: string, summary: string, description: string, parameters: Json[], item: string): Json {
  const operation = readOperation(operationId, summary, `${description} ${EXPORT_RULES}`, parameters, pageOf(item));
  const ok = (operation.get as Json).responses as Record<string, Json>;
  ok[200] = {
    ...ok[200],
    description: "OK: a JSON page; or the export as CSV (the header row naming the record's fields) or as NDJSON (each line one record).",
    headers: { ...rateLimitHeaders, Vary: { description: '`Accept`: the answer depends on it.', schema: { type: 'string' } } },
    content: {
      ...(ok[200]!.content as Json),
      'text/csv': { schema: { type: 'string' } },
      'application/x-ndjson': { schema: ref(item) },
    },
  };
  return operation;
}

function readOperation(operationId: string, summary: string, description: string, parameters: Json[], schema: Json): Json {
  return {
    get: {
      operationId,
      tags: ['Customer read API'],
      summary,
      description: `${description} ${READ_RULES}`,
      security: [{ customerToken: [] }],
      parameters,
      responses: {
        200: { description: 'OK', headers: rateLimitHeaders, content: { 'application/json': { schema } } },
        ...problems(400, 401, 403, 404, 429, 503),
        ...anyOperationResponses,
      },
    },
  };
}

function authPaths(): Record<string, Json> {
  const paths: Record<string, Json> = {};
  for (const audience of ['partners', 'customers'] as const) {
    const singular = audience.slice(0, -1);
    const Singular = singular[0]!.toUpperCase() + singular.slice(1);
    paths[`/api/v1/${audience}/authenticate`] = {
      post: {
        operationId: `authenticate${Singular}`,
        tags: ['Authentication API'],
        summary: `Exchange a ${singular} API key for an access token`,
        description: `No body. Limited to 10 requests per 5 minutes per API key presented; failed attempts are also limited per client address.`,
        security: [{ [`${singular}ApiKey`]: [] }],
        responses: {
          200: { description: 'A token valid for 1800 seconds.', headers: rateLimitHeaders, content: { 'application/json': { schema: ref('AccessToken') } } },
          ...problems(401, 429, 503),
          ...anyOperationResponses,
        },
      },
    };
    paths[`/api/v1/${audience}/rotate`] = {
      put: {
        operationId: `rotate${Singular}Key`,
        tags: ['Authentication API'],
        summary: `Rotate the ${singular} API key`,
        description: 'No body needed. The new key is shown once. From that moment the old key no longer authenticates and every token minted before is rejected. Limited to 3 per hour.',
        security: [{ [`${singular}Token`]: [] }],
        responses: {
          200: { description: 'The new key.', headers: rateLimitHeaders, content: { 'application/json': { schema: ref('RotatedKey') } } },
          ...problems(401, 403, 429, 503),
          ...anyOperationResponses,
        },
      },
    };
  }
  paths['/.well-known/jwks.json'] = {
    get: {
      operationId: 'getJwks',
      tags: ['Authentication API'],
      summary: 'The public keys that verify access tokens (JWKS, RFC 7517)',
      description: 'No authentication. Every signing key still trusted, each under the `kid` its tokens carry: the current one, and after a rotation the previous one until it is revoked. Verify a token with the key of its `kid`, for that key\'s own algorithm (`alg`).',
      security: [],
      responses: { 200: { description: 'JWKS', content: { 'application/json': { schema: { type: 'object' } } } }, ...anyOperationResponses },
    },
  };
  return paths;
}

function readPaths(): Record<string, Json> {
  const trailer = pathParam('trailer', 'Trailer id (opaque, never all digits).');
  const fleet = pathParam('fleet', 'Fleet id (positive int32).', { type: 'integer', minimum: 1, maximum: 2147483647 });
  return {
    '/api/v1/fleets': readOperation('listFleets', 'The customer\'s fleets', `Every fleet of the customer. ${PAGE_RULES}`, pagingParams, pageOf('Fleet')),
    '/api/v1/fleets/{fleet}': readOperation('getFleet', 'One fleet', 'One fleet of the customer, by its id.', [fleet], ref('Fleet')),
    '/api/v1/trailers/{fleetOrTrailer}': readOperation(
      'getTrailerOrFleetTrailers',
      'All digits: the trailers of a fleet (a page). Anything else: one trailer.',
      `One path for two answers: an all-digits id names a fleet, and the answer is a page of its trailers (${PAGE_RULES}); any other id names one trailer, and the answer is that trailer with its status and latest GPS fix (\`telemetry\`, null before the first fix). Trailer status is \`Faulted\` when any device is faulted, else \`Warning\` when any warns, else \`OK\`.`,
      [
        pathParam('fleetOrTrailer', 'A fleet id (all digits) or a trailer id.'),
        ...pagingParams.map((p) => ({ ...p, description: `${p.description} Fleet lists only.` })),
        { ...activeOnlyParam, description: `${activeOnlyParam.description} Fleet lists only.` },
      ],
      { oneOf: [pageOf('Trailer'), ref('Trailer')] },
    ),
    '/api/v1/fleets/{fleet}/telemetry/gps': telemetryOperation(
      'listFleetGpsFixes',
      'GPS fixes of every trailer of a fleet in a time range',
      "The fixes of every trailer now in the fleet, trailer by trailer (ordered by trailer id), each trailer's ascending by timestamp over `[from, to)` (the last 24 hours by default); each record names its trailer (`trailerId`, `vin`, `unitId`). A page at a time; `next` carries the range.",
      [fleet, ...timeParams],
      'FleetGpsFix',
    ),
    '/api/v1/trailers/telemetry/gps/{trailer}': telemetryOperation('listTrailerGpsFixes', 'GPS fixes of a trailer in a time range', `The trailer's GPS fixes (position, speed in mph, cardinal heading). ${RANGE_RULES}`, [trailer, ...timeParams], 'GpsFix'),
    '/api/v1/devices/{trailer}': readOperation('listTrailerDevices', 'Devices of a trailer', `The trailer's devices (tire sensors and other sensors), each with its status and when it was last seen. ${PAGE_RULES}`, [trailer, ...pagingParams, activeOnlyParam], pageOf('Device')),
    '/api/v1/devices/details/{device}': readOperation('getDevice', 'One device', 'One device of one of the customer\'s trailers, by its id: its kind, serial, position, status and when it was last seen.', [pathParam('device', 'Device id.')], ref('Device')),
    '/api/v1/devices/telemetry/{device}': telemetryOperation('listDeviceReadings', 'Readings of a device in a time range', `The device's readings (metrics and the status each gave). ${RANGE_RULES} In CSV, \`metrics\` is one cell holding its JSON object and the status is \`status.name\`, \`status.isWarning\`, \`status.isFault\`.`, [pathParam('device', 'Device id.'), ...timeParams], 'DeviceReading'),
    '/api/v1/cargosafe': readOperation('listCargosafeUnits', 'The customer\'s cargosafe units', `Every cargosafe unit on the customer\'s trailers, each with its latest reading. ${PAGE_RULES}`, pagingParams, pageOf('CargosafeUnit')),
    '/api/v1/cargosafe/{id}': readOperation('getCargosafeUnit', 'One cargosafe unit', 'One cargosafe unit, by its id, with its latest reading.', [pathParam('id', 'Cargosafe unit id.')], ref('CargosafeUnit')),
    '/api/v1/cargosafe/telemetry/{id}': telemetryOperation('listCargosafeReadings', 'Readings of a cargosafe unit in a time range', `The unit's readings (door, load, temperature, humidity). ${RANGE_RULES}`, [pathParam('id', 'Cargosafe unit id.'), ...timeParams], 'CargosafeReading'),
    '/api/v1/live': liveEventsOperation(),
  };
}

/** `GET /api/v1/live` (`live-events-route.ts`): the LiveFeed as Server-Sent Events. */
function liveEventsOperation(): Json {
  const { 429: _windowed, ...refusals } = problems(401, 403, 429, 503);
  return {
    get: {
      operationId: 'streamLiveUpdates',
      tags: ['Customer read API'],
      summary: 'Live trailer updates of the customer\'s fleets, as Server-Sent Events',
      description: [
        'A stream that stays open (`curl -N`, or `fetch` reading the body: browsers cannot send `Authorization` with `EventSource`).',
        'Events: `update` (`id: <position>`, its place in the replay window; `data`: the trailer JSON exactly as `GET /api/v1/trailers/{trailer}` answers it, and `updatedAt`: when the server made the update, RFC 3339 in milliseconds, the LiveFeed\'s `ts`; one per change of a trailer of the customer\'s fleets);',
        '`heartbeat` at once and then every heartbeat interval (`data: {"timestamp": "<RFC 3339>"}`, default every 15 s; `id: <position>`: the stream\'s own position, the last update or snapshot end it was sent, once nothing waits to be written);',
        'with `snapshot=true`: `snapshot` per trailer (the same JSON, no `id`), then `snapshot-end` (`id: <position>`), before any update;',
        '`resume-reset`: the position resumed from has left the replay window (`--live-replay-seconds`, default 300 s), updates may have been missed, and a snapshot follows;',
        'and a final `error` whose `data` is a problem (`invalid_token`: the token expired or its key was rotated, authenticate and reconnect;',
        '`unavailable`: the server is shutting down; `rate_limited`: the client fell too far behind), after which the response ends.',
        'A reader that falls behind gets each trailer\'s latest state (intermediate updates of a trailer are coalesced).',
        'Resume: `Last-Event-ID` (sent by `EventSource` itself) or `resumeAfter` names the last position received; the updates missed since are sent first, in order, exactly once (across processes too, with Redis).',
        'Not counted against the read limit; connects counted per customer (together with the gRPC LiveFeed) and per client address in windows, and open streams capped per customer (`--max-streams-per-customer`).',
      ].join(' '),
      security: [{ customerToken: [] }],
      parameters: [
        { name: 'snapshot', in: 'query', description: 'Send the current state of every trailer the stream may see first (`snapshot` events, then `snapshot-end`).', schema: { type: 'boolean', default: false } },
        { name: 'fleetIds', in: 'query', description: 'Only trailers of these fleets (comma-separated, or repeated), together with those of `trailerIds`.', schema: { type: 'string' }, example: '12,14' },
        { name: 'trailerIds', in: 'query', description: 'Only these trailers (comma-separated, or repeated), together with those of `fleetIds`.', schema: { type: 'string' } },
        { name: 'resumeAfter', in: 'query', description: 'Resume after this position (`<ms>-<seq>`, the `id` of the last event received); wins over `Last-Event-ID`. Not a position: 400.', schema: { type: 'string', pattern: '^\\d+-\\d+$' } },
        { name: 'Last-Event-ID', in: 'header', description: 'As `resumeAfter`, as `EventSource` sends it on reconnecting; an id that is no position is answered with `resume-reset` and a snapshot.', schema: { type: 'string' } },
      ],
      responses: {
        200: {
          description: 'The event stream.',
          headers: { 'Cache-Control': { description: '`no-cache`.', schema: { type: 'string' } }, ...rateLimitHeaders },
          content: { 'text/event-stream': { schema: { type: 'string' }, example: 'event: heartbeat\ndata: {"timestamp":"2026-06-01T12:00:00.000Z"}\n\n' } },
        },
        ...refusals,
        ...problems(400),
        429: {
          description:
            '`rate_limited`: the customer (LiveFeed and this endpoint together) or the client address opened the most live streams allowed in the current window (`--live-connect-limit`, `--live-connect-address-limit`; default 120 per 60 s each), `Retry-After` being the seconds until the window ends; or the customer already holds the most live streams allowed in this process (`--max-streams-per-customer`): a slot frees when a stream ends, and `Retry-After` advises a few seconds.',
          headers: { ...rateLimitHeaders, 'Retry-After': { description: 'Seconds to wait before trying again.', required: true, schema: { type: 'integer' } } },
          content: { 'application/problem+json': { schema: ref('Problem') } },
        },
        ...anyOperationResponses,
      },
    },
  };
}

/** What every webhook operation shares, after its own first sentence. */
const WEBHOOK_RULES = 'Customer token. A webhook of another customer is a 404, whether or not it exists. Counts against the read limit.';

function webhookOperation(method: string, operationId: string, summary: string, description: string, parameters: Json[], answer: Json, statuses: number[], extra: Json = {}): Json {
  return {
    [method]: {
      operationId,
      tags: ['Webhooks'],
      summary,
      description: `${description} ${WEBHOOK_RULES}`,
      security: [{ customerToken: [] }],
      parameters,
      ...extra,
      responses: { ...answer, ...problems(...statuses), ...anyOperationResponses },
    },
  };
}

function webhookPaths(): Record<string, Json> {
  const id = pathParam('id', 'Webhook id.');
  const ok = (description: string, schema: Json) => ({ 200: { description, headers: rateLimitHeaders, content: { 'application/json': { schema } } } });
  return {
    '/api/v1/webhooks': {
      ...webhookOperation(
        'post',
        'createWebhook',
        'Register a webhook endpoint',
        'Registers a URL to receive trailer events (`trailer.updated`: the trailer JSON of every change, as the SSE `update` event carries it; `trailer.status_changed`: the same JSON when its status changed), of every fleet or of `fleetIds`. The URL must be https and resolve to public addresses only, unless the operator allows otherwise (`--webhook-allow-http`, `--webhook-allow-private`); a customer has at most 10 endpoints by default (409 beyond). The answer holds the signing secret (`whsec_...`), shown only here.',
        [],
        { 201: { description: 'Registered; `secret` is shown only in this answer.', headers: { ...rateLimitHeaders, Location: { description: 'The webhook\'s URL.', schema: { type: 'string' } } }, content: { 'application/json': { schema: ref('WebhookCreated') } } } },
        [400, 401, 403, 409, 413, 415, 429, 503],
        { requestBody: { required: true, content: { 'application/json': { schema: ref('NewWebhook') } } } },
      ),
      ...webhookOperation('get', 'listWebhooks', "The customer's webhook endpoints", PAGE_RULES, pagingParams, ok('OK', pageOf('Webhook')), [400, 401, 403, 429, 503]),
    },
    '/api/v1/webhooks/{id}': {
      ...webhookOperation('get', 'getWebhook', 'One webhook endpoint', 'The endpoint, with its `status`: `active`, or `failing` once a delivery has been refused for the whole retry period (about 24 h); a test delivery answered with a 2xx resumes it.', [id], ok('OK', ref('Webhook')), [401, 403, 404, 429, 503]),
      ...webhookOperation('delete', 'deleteWebhook', 'Delete a webhook endpoint', 'Deletes the endpoint with what it had still to deliver.', [id], { 204: { description: 'Deleted.', headers: rateLimitHeaders } }, [401, 403, 404, 429, 503]),
    },
    '/api/v1/webhooks/{id}/deliveries': webhookOperation(
      'get',
      'listWebhookDeliveries',
      'Deliveries to a webhook endpoint',
      `Each POST of up to 100 events, with its attempts and outcome, oldest first; delivered ones are listed for 7 days. ${PAGE_RULES}`,
      [id, ...pagingParams],
      ok('OK', pageOf('WebhookDelivery')),
      [400, 401, 403, 404, 429, 503],
    ),
    '/api/v1/webhooks/{id}/test': webhookOperation(
      'post',
      'testWebhook',
      'Send a test event to a webhook endpoint',
      'Sends one `webhook.test` event now, signed like every delivery, and answers how the endpoint answered (within 10 s). A 2xx resumes a `failing` endpoint: its pending delivery is sent again at once.',
      [id],
      ok('How the endpoint answered.', ref('WebhookTestResult')),
      [401, 403, 404, 429, 503],
    ),
  };
}

/** What Trailwire sends to a webhook endpoint (OpenAPI 3.1 `webhooks`). */
function webhookDeliveries(): Record<string, Json> {
  const header = (name: string, description: string) => ({ name, in: 'header', required: true, description, schema: { type: 'string' } });
  return {
    trailerEvents: {
      post: {
        operationId: 'receiveTrailerEvents',
        security: [],
        tags: ['Webhooks'],
        summary: 'A delivery to your endpoint: up to 100 trailer events',
        description:
          'Sent at once when nothing is in flight to the endpoint; events that come while a delivery is in flight go together in the next, up to 100. Answer 2xx within 10 s; anything else (a redirect included, never followed) is retried with exponential backoff and jitter for about 24 h, with the same `webhook-id` and body. Events of one trailer arrive in order. Verify the signature with a Standard Webhooks library (docs/webhooks.md).',
        parameters: [
          header('webhook-id', 'The delivery id (`msg_...`): the same on every retry; deduplicate on it.'),
          header('webhook-timestamp', 'Unix seconds of this attempt.'),
          header('webhook-signature', '`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the base64-decoded part of the secret after `whsec_`.'),
        ],
        requestBody: { required: true, content: { 'application/json': { schema: ref('WebhookPayload') } } },
        responses: { '2XX': { description: 'Delivered.' } },
      },
    },
  };
}

function opsPaths(): Record<string, Json> {
  // Public: `security: []` says so, rather than leaving a reader to guess.
  const plain = (operationId: string, summary: string, description: string, content: Json, extra: Json = {}) => ({
    get: { operationId, tags: ['Operations'], summary, description: `${description} No authentication.`, security: [], responses: { 200: { description: 'OK', content }, ...extra, ...anyOperationResponses } },
  });
  return {
    '/healthz': plain('getHealth', 'Liveness: the process is up', 'Answers 200 while the process runs, whatever its dependencies do: for a liveness probe, which restarts a process that stops answering.', { 'application/json': { schema: { type: 'object' } } }),
    '/readyz': plain('getReadiness', 'Readiness: the store is reachable and the queue running', 'Answers 200 when every check passes, else 503 with `Retry-After` and the failing checks named: for a readiness probe, which sends no traffic to a process that cannot serve it.', { 'application/json': { schema: { type: 'object' } } }, problems(503)),
    '/metrics': plain('getMetrics', 'Prometheus metrics', 'Prometheus text exposition: request counts and latency by route, the depth of the intake queue, whether each dependency answers, process metrics.', { 'text/plain': { schema: { type: 'string' } } }),
    '/openapi.json': plain('getOpenApiDocument', 'This document', 'The OpenAPI 3.1 description of this server\'s API, with the products it has installed.', { 'application/json': { schema: { type: 'object' } } }),
  };
}

const status = {
  type: 'object',
  required: ['name', 'isWarning', 'isFault'],
  properties: {
    name: { type: 'string', enum: ['OK', 'Warning', 'Faulted'] },
    isWarning: { type: 'boolean' },
    isFault: { type: 'boolean' },
  },
};

const schemas: Record<string, Json> = {
  Problem: {
    type: 'object',
    description: 'RFC 9457 problem details. `type` is one of the documented problem URIs.',
    required: ['type', 'title', 'status', 'detail'],
    properties: {
      type: { type: 'string', format: 'uri', enum: ERROR_CODES.map(problemType) },
      title: { type: 'string' },
      status: { type: 'integer' },
      detail: { type: 'string' },
      requestId: { type: 'string', description: 'Also in the X-Request-Id header.' },
      errors: {
        type: 'array',
        description: 'On 400: each invalid field, as a JSON pointer into the request (`/take`, `/sensors/0/pressurePsi`).',
        items: { type: 'object', required: ['path', 'message'], properties: { path: { type: 'string' }, message: { type: 'string' } } },
      },
    },
  },
  AccessToken: {
    type: 'object',
    required: ['access_token', 'token_type', 'expires_in'],
    properties: {
      access_token: { type: 'string', description: 'A JWT (RS256 with `kid`; verify with /.well-known/jwks.json).' },
      token_type: { const: 'Bearer' },
      expires_in: { type: 'integer', description: 'Seconds (1800).' },
    },
  },
  RotatedKey: {
    type: 'object',
    required: ['api_key', 'rotated_at'],
    properties: { api_key: { type: 'string', description: 'The new key; shown only here.' }, rotated_at: timestamp },
  },
  Fleet: {
    type: 'object',
    required: ['id', 'name', 'createdAt'],
    properties: { id: { type: 'integer' }, name: { type: 'string' }, createdAt: timestamp },
  },
  GpsFix: {
    type: 'object',
    required: ['timestamp', 'lat', 'long', 'speed', 'heading'],
    properties: {
      timestamp,
      lat: { type: 'number' },
      long: { type: 'number' },
      speed: { type: 'number', description: 'mph' },
      heading: { type: 'string', enum: [...HEADINGS] },
    },
  },
  FleetGpsFix: {
    type: 'object',
    description: 'A GPS fix on a fleet-wide list: its trailer, then the fix as `GpsFix` has it.',
    required: ['trailerId', 'vin', 'unitId', 'timestamp', 'lat', 'long', 'speed', 'heading'],
    properties: {
      trailerId: { type: 'string' },
      vin: { type: 'string' },
      unitId: nullable({ type: 'string' }),
      timestamp,
      lat: { type: 'number' },
      long: { type: 'number' },
      speed: { type: 'number', description: 'mph' },
      heading: { type: 'string', enum: [...HEADINGS] },
    },
  },
  Status: status,
  Trailer: {
    type: 'object',
    required: ['id', 'fleetId', 'unitId', 'vin', 'active', 'status', 'statusDate', 'faultedDevices', 'warningDevices', 'telemetry'],
    properties: {
      id: { type: 'string' },
      fleetId: { type: 'integer' },
      unitId: nullable({ type: 'string' }),
      vin: { type: 'string' },
      active: { type: 'boolean' },
      status: ref('Status'),
      statusDate: timestamp,
      faultedDevices: { type: 'integer' },
      warningDevices: { type: 'integer' },
      telemetry: nullable(ref('GpsFix')),
    },
  },
  Device: {
    type: 'object',
    required: ['id', 'trailerId', 'kind', 'serial', 'position', 'active', 'status', 'lastSeen'],
    properties: {
      id: { type: 'string' },
      trailerId: { type: 'string' },
      kind: { type: 'string', description: 'For example `tpms`.' },
      serial: { type: 'string' },
      position: nullable({ type: 'string' }),
      active: { type: 'boolean' },
      status: ref('Status'),
      lastSeen: nullable(timestamp),
    },
  },
  DeviceReading: {
    type: 'object',
    required: ['timestamp', 'metrics', 'status'],
    properties: { timestamp, metrics: { type: 'object', additionalProperties: { type: 'number' } }, status: ref('Status') },
  },
  CargosafeReading: {
    type: 'object',
    required: ['timestamp', 'doorOpen', 'loadPercent', 'temperatureC', 'humidityPercent'],
    properties: {
      timestamp,
      doorOpen: { type: 'boolean' },
      loadPercent: { type: 'number' },
      temperatureC: { type: 'number' },
      humidityPercent: { type: 'number' },
    },
  },
  CargosafeUnit: {
    type: 'object',
    required: ['id', 'trailerId', 'serial', 'active', 'lastSeen', 'latest'],
    properties: {
      id: { type: 'string' },
      trailerId: { type: 'string' },
      serial: { type: 'string' },
      active: { type: 'boolean' },
      lastSeen: nullable(timestamp),
      latest: nullable(ref('CargosafeReading')),
    },
  },
};

const webhookEventTypes = { type: 'array', items: { type: 'string', enum: [...WEBHOOK_EVENT_TYPES] }, minItems: 1, uniqueItems: true };
const webhookFleetIds = { type: 'array', items: { type: 'integer', minimum: 1, maximum: 2147483647 }, minItems: 1, maxItems: 100, uniqueItems: true };
const webhookProperties = {
  id: { type: 'string' },
  url: { type: 'string', format: 'uri' },
  events: webhookEventTypes,
  fleetIds: { ...nullable(webhookFleetIds), description: 'Null: every fleet of the customer.' },
  status: { type: 'string', enum: ['active', 'failing'] },
  createdAt: timestamp,
  failingSince: nullable(timestamp),
};
schemas.NewWebhook = {
  type: 'object',
  required: ['url'],
  additionalProperties: false,
  properties: {
    url: { type: 'string', format: 'uri', maxLength: WEBHOOK_URL_MAX_LENGTH, description: 'https (http only where the operator allows it), public addresses only unless the operator allows private ones.' },
    events: { ...webhookEventTypes, description: 'Default: every event type.' },
    fleetIds: { ...webhookFleetIds, description: "Default: every fleet of the customer's." },
  },
};
schemas.Webhook = { type: 'object', required: Object.keys(webhookProperties), properties: webhookProperties };
schemas.WebhookCreated = {
  type: 'object',
  required: [...Object.keys(webhookProperties), 'secret'],
  properties: { ...webhookProperties, secret: { type: 'string', description: 'The signing secret, `whsec_` and base64: shown only here.' } },
};
schemas.WebhookDelivery = {
  type: 'object',
  required: ['id', 'createdAt', 'events', 'state', 'attempts', 'nextAttemptAt', 'lastAttemptAt', 'lastStatus', 'lastError', 'deliveredAt'],
  properties: {
    id: { type: 'string', description: 'The `webhook-id` header of every attempt.' },
    createdAt: timestamp,
    events: { type: 'integer', description: 'Events in the body.' },
    state: { type: 'string', enum: ['pending', 'delivered'] },
    attempts: { type: 'integer' },
    nextAttemptAt: { ...nullable(timestamp), description: 'Null once delivered, or while the endpoint is failing.' },
    lastAttemptAt: nullable(timestamp),
    lastStatus: { ...nullable({ type: 'integer' }), description: 'The HTTP status of the last attempt; null when it got none (refused, timed out).' },
    lastError: nullable({ type: 'string' }),
    deliveredAt: nullable(timestamp),
  },
};
schemas.WebhookTestResult = {
  type: 'object',
  required: ['webhookId', 'delivered', 'status', 'error', 'webhook'],
  properties: {
    webhookId: { type: 'string', description: 'The `webhook-id` of the test delivery.' },
    delivered: { type: 'boolean', description: 'Answered with a 2xx within the timeout.' },
    status: nullable({ type: 'integer' }),
    error: nullable({ type: 'string' }),
    webhook: ref('Webhook'),
  },
};
schemas.WebhookPayload = {
  type: 'object',
  required: ['events'],
  properties: {
    events: {
      type: 'array',
      maxItems: 100,
      items: {
        type: 'object',
        required: ['type', 'timestamp', 'data'],
        properties: {
          type: { type: 'string', enum: [...WEBHOOK_EVENT_TYPES, 'webhook.test'] },
          timestamp: { ...timestamp, description: 'When the change was processed.' },
          data: { description: 'The trailer, as `GET /api/v1/trailers/{trailer}` answers it (for `webhook.test`: `{"webhookId"}`).', anyOf: [ref('Trailer'), { type: 'object' }] },
        },
      },
    },
  },
};

/**
 * The intake endpoints, with each installed product's payload schema (draft 2020-12, the dialect of
 * OpenAPI 3.1, so the schemas are published exactly as they are enforced).
 */
export function intakeOpenApi(products: readonly Product<any>[]): Pick<OpenApiOptions, 'extraPaths' | 'extraSchemas'> {
  const schemaName = (product: Product<any>) => `Payload_${product.name.replace(/-/g, '_')}`;
  const extraSchemas: Record<string, Json> = {
    IntakeAccepted: {
      type: 'object',
      required: ['id', 'status'],
      properties: { id: { type: 'string' }, status: { const: 'queued' } },
    },
    IntakeStatus: {
      type: 'object',
      required: ['id', 'vin', 'product', 'status', 'receivedAt', 'processedAt', 'attempts', 'error'],
      properties: {
        id: { type: 'string' },
        vin: { type: 'string' },
        product: { type: 'string' },
        status: { type: 'string', enum: ['queued', 'processing', 'processed', 'failed'] },
        receivedAt: timestamp,
        processedAt: nullable(timestamp),
        attempts: { type: 'integer' },
        error: nullable({ type: 'string' }),
      },
    },
    IntakeStatuses: {
      type: 'object',
      required: ['data', 'notFound'],
      properties: {
        data: { type: 'array', items: ref('IntakeStatus'), description: 'Your payloads among the ids asked, in the order asked.' },
        notFound: { type: 'array', items: { type: 'string' }, description: 'The ids asked that name none of your payloads (unknown, purged, or another partner\'s), in the order asked.' },
      },
    },
  };
  for (const product of products) {
    const { $schema: _dialect, ...schema } = product.schema as Json;
    extraSchemas[schemaName(product)] = {
      ...schema,
      description: `${product.description} Limit: ${product.limit.requests} per ${product.limit.windowSeconds} s per VIN (default).`,
      examples: product.examples,
    };
  }
  const describeProducts = products.map((p) => `\`${p.name}\` (${p.limit.requests}/${p.limit.windowSeconds} s per VIN)`).join(', ');
  return {
    extraSchemas,
    extraPaths: {
      '/api/v1/telemetry/intake/{VIN}': {
        post: {
          operationId: 'sendTelemetry',
          tags: ['Partner intake'],
          summary: 'Send one telemetry payload for a vehicle',
          description: `The payload's schema is the one of the product in the partner token (\`scope: product:<name>\`). Installed: ${describeProducts || 'none'}. 202 means durably queued, not processed; follow \`Location\`. A payload dated more than 5 minutes after the server's clock is a 400 naming its time field (every product that declares its time fields, the built-in ones included). Limited per product and per VIN in fixed windows, and per partner: a budget of intake requests per window (every request counts, refusals included, before its body is read) and a cap of new VINs (ones the service does not know yet) per UTC day; over either, 429 with the RateLimit headers and \`Retry-After\`. The 202's RateLimit headers describe whichever of the partner's budget and the VIN's window has fewer requests left. A VIN registered to a customer that takes intake only from the partners it granted is 403 \`partner_not_granted\` for any other partner; nothing is enqueued.`,
          security: [{ partnerToken: [] }],
          parameters: [
            pathParam('VIN', '17 characters of the VIN alphabet, check digit verified; lower case is upper-cased.'),
            {
              name: 'Idempotency-Key',
              in: 'header',
              description:
                'A repeat of the same key by the same partner within 24 hours, with the same VIN and body, answers the original 202 again (`Idempotent-Replayed: true`) and enqueues nothing; with another VIN or body it is 422 `idempotency_key_reused`.',
              schema: { type: 'string', maxLength: 255 },
            },
          ],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { oneOf: products.map((product) => ref(schemaName(product))) } } },
          },
          responses: {
            202: {
              description: 'Durably queued.',
              headers: { ...rateLimitHeaders, Location: { description: 'The status URL of this payload.', schema: { type: 'string' } } },
              content: { 'application/json': { schema: ref('IntakeAccepted') } },
            },
            ...problems(400, 401, 403, 413, 415, 422, 429, 503),
            ...anyOperationResponses,
          },
        },
      },
      '/api/v1/telemetry/intake/status': {
        get: {
          operationId: 'getIntakeStatuses',
          tags: ['Partner intake'],
          summary: 'The processing state of up to 100 of your payloads at once',
          description:
            'As `getIntakeStatus`, for 1 to 100 intake ids in one request, which counts as **one** read against the partner\'s read limit: the way to check thousands of payloads (the simulator\'s read-back). An id that names no payload of yours (unknown, purged, or another partner\'s) is listed in `notFound`, never shown. 400 without ids, with more than 100, with one that cannot be an intake id, or with one repeated (`errors` names each, e.g. `/ids/3`).',
          security: [{ partnerToken: [] }],
          parameters: [
            {
              name: 'ids',
              in: 'query',
              required: true,
              description: 'Intake ids of 202s, comma-separated: 1 to 100, none twice.',
              style: 'form',
              explode: false,
              schema: { type: 'array', items: { type: 'string', pattern: INTAKE_ID_PATTERN.source }, minItems: 1, maxItems: MAX_STATUS_IDS, uniqueItems: true },
            },
          ],
          responses: {
            200: { description: 'OK', headers: rateLimitHeaders, content: { 'application/json': { schema: ref('IntakeStatuses') } } },
            ...problems(400, 401, 403, 429, 503),
            ...anyOperationResponses,
          },
        },
      },
      '/api/v1/telemetry/intake/status/{id}': {
        get: {
          operationId: 'getIntakeStatus',
          tags: ['Partner intake'],
          summary: 'The processing state of one of your payloads',
          description: 'The sending partner only (any other gets 404). `queued`, `processing`, `processed` or `failed` (a dead letter, with its `error`); a processed payload\'s status is kept for 24 hours, then this is a 404. Counts against the partner\'s read limit; `getIntakeStatuses` reads up to 100 as one read.',
          security: [{ partnerToken: [] }],
          parameters: [pathParam('id', 'The intake id of the 202.')],
          responses: {
            200: { description: 'OK', headers: rateLimitHeaders, content: { 'application/json': { schema: ref('IntakeStatus') } } },
            ...problems(401, 403, 404, 429, 503),
            ...anyOperationResponses,
          },
        },
      },
    },
  };
}

/** The OpenAPI 3.1 document of an app mounting the given APIs. */
export function buildOpenApiDocument(options: OpenApiOptions): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Trailwire',
      version: options.version ?? packageVersion(),
      description: 'Trailer-fleet telemetry: partner intake, customer read API and key-to-token authentication. Every 4xx/5xx is application/problem+json (RFC 9457).',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    // Relative: the server that serves this document serves the API, at its root or under its prefix.
    servers: [
      options.serverUrl
        ? { url: options.serverUrl, description: 'Trailwire is mounted under this path prefix.' }
        : { url: '/', description: 'The server that serves this document.' },
    ],
    tags: TAGS.map((tag) => ({ ...tag })),
    paths: {
      ...(options.auth ? authPaths() : {}),
      ...(options.data ? readPaths() : {}),
      ...(options.data ? webhookPaths() : {}),
      ...options.extraPaths,
      ...opsPaths(),
    },
    ...(options.data ? { webhooks: webhookDeliveries() } : {}),
    components: {
      schemas: { ...schemas, ...options.extraSchemas },
      responses: sharedResponses,
      securitySchemes: {
        partnerApiKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY', description: 'A partner API key (`twp_...`), issued by `trailwire partners create`.' },
        customerApiKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY', description: 'A customer API key (`twc_...`), issued by `trailwire customers create`.' },
        partnerToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A partner token from `POST /api/v1/partners/authenticate`; its `scope` claim, `product:{name}`, names the product whose payloads it sends.' },
        customerToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A customer token from `POST /api/v1/customers/authenticate`.' },
      },
    },
  };
}
