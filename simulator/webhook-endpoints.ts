/**
 * The webhook endpoints of a run (`--webhooks N`): starts the receiver (`webhook-receiver.ts`),
 * registers N endpoints through the API with the customers' own tokens — spread over the customers
 * as the subscribers are, endpoint i to customer i modulo their number — each at its own path under
 * the receiver's URL, and records every request that reaches one: its `webhook-id`, whether its
 * signature holds for that endpoint's secret (`webhook-signature-check.ts`), and its events. After
 * the traffic it waits, bounded, until every endpoint has the update of every payload of its
 * customer processed since it was registered (or the deliveries have stopped), and at the end it
 * deletes what it registered, so a run against a deployment leaves nothing behind.
 *
 * The secrets stay here: the record says only what each endpoint received.
 */
import { createHash, randomBytes } from 'node:crypto';
import { TrailwireError } from '../core/errors.ts';
import { type ExpectedUpdate, updateKey } from './expected-updates.ts';
import { type TrailwireClient, TrailwireHttpError } from './client/http-client.ts';
import type { WebhookDeliveryRecord, WebhookEndpointRecord, WebhookEventRecord, WebhookRecord } from './run-record.ts';
import { parseListenAddress, type ReceivedRequest, type RunningReceiver, startWebhookReceiver } from './webhook-receiver.ts';
import { webhookSignatureProblem } from './webhook-signature-check.ts';

export interface WebhookEndpointsOptions {
  /** Endpoints to register, spread over the customers. */
  endpoints: number;
  /** `host:port` the receiver listens on. Default `127.0.0.1:0` (a free port of this machine). */
  listen?: string;
  /**
   * The URL the server is to call, reaching the receiver (through a proxy, from another machine);
   * each endpoint is a path under it. Default: `http://` and the listen address.
   */
  url?: string;
  /** Server clock minus client clock, ms: a delivery's timestamp is judged in the server's time. */
  clockOffsetMs: number;
  onStage?: (text: string) => void;
}

/**
 * After the traffic, the deliveries have settled once nothing arrived for this long: more than a
 * first retry's 2.5–5 s, and than the longest linger a server may be set to hold events (1 s).
 */
const QUIET_MS = 5_000;

/**
 * A serving process learns that the first endpoint exists within a second of another process
 * registering it, and writes no events until then (docs/webhooks.md, "Several processes"): the
 * traffic starts no sooner, so that no update of it is lost by design.
 */
const REGISTRATION_SPREAD_MS = 1_000;

export interface WebhookEndpoints {
  /** When every serving process of the deployment has seen the endpoints (client epoch ms): the traffic starts no sooner. */
  readonly readyAt: number;
  /** Waits until every endpoint has every update expected of it, or nothing arrived for a while, for `boundMs` at most. */
  settle(expected: readonly ExpectedUpdate[], boundMs: number): Promise<void>;
  /** Deletes the endpoints, stops the receiver, and answers what was received (the same answer when called again). */
  close(): Promise<WebhookRecord>;
}

/** Starts the receiver and registers the endpoints with the `customers`' clients (the run's own, which follow a key rotation). */
export async function openWebhookEndpoints(customers: readonly TrailwireClient[], options: WebhookEndpointsOptions): Promise<WebhookEndpoints> {
  if (customers.length === 0) throw new TypeError('Webhook endpoints need at least one customer key');
  const listen = parseListenAddress('--webhook-listen', options.listen ?? '127.0.0.1:0');
  // A path of its own per run: an endpoint that an earlier run left registered is not taken for one of these.
  const runPath = `simulator-${randomBytes(4).toString('hex')}`;
  const endpoints: Array<WebhookEndpointRecord & { secret: string; arrived: Set<string> }> = [];
  let stray = 0;
  let lastArrivalAt = 0;
  const endpointPath = new RegExp(`/${runPath}/(\\d+)$`);
  const receive = (request: ReceivedRequest) => {
    const match = endpointPath.exec(request.path);
    const endpoint = match ? endpoints[Number(match[1]) - 1] : undefined;
    if (!endpoint || request.method !== 'POST') {
      stray++;
      return;
    }
    lastArrivalAt = request.receivedAt;
    const delivery = deliveryOf(endpoint.secret, request, options.clockOffsetMs);
    endpoint.deliveries.push(delivery);
    if (delivery.invalid === undefined)
      for (const event of delivery.events) if (event.type === 'trailer.updated') endpoint.arrived.add(updateKey(event.vin, event.ts));
  };
  const receiver = await startWebhookReceiver(listen, receive);
  const base = new URL(options.url ?? `http://${urlHost(receiver.host)}:${receiver.port}`);
  const urlOf = (index: number) => {
    const url = new URL(base);
    url.pathname = `${url.pathname.replace(/\/$/, '')}/${runPath}/${index + 1}`;
    return url.href;
  };

  let closing: Promise<WebhookRecord> | undefined;
  const close = () =>
    (closing ??= (async () => {
      for (const endpoint of endpoints) {
        try {
          await customers[endpoint.customer]!.request('DELETE', `/api/v1/webhooks/${encodeURIComponent(endpoint.id)}`);
          endpoint.deleted = true;
        } catch (error) {
          endpoint.deleteError = (error as Error).message;
        }
      }
      await receiver.close();
      return { endpoints: endpoints.map(({ secret: _secret, arrived: _arrived, ...endpoint }) => endpoint), stray };
    })());

  options.onStage?.(`registering ${options.endpoints} webhook endpoint${options.endpoints === 1 ? '' : 's'} at ${urlOf(0).replace(/\/1$/, '/…')} (receiver on ${receiver.host}:${receiver.port})`);
  try {
    for (let index = 0; index < options.endpoints; index++) {
      const customer = index % customers.length;
      const url = urlOf(index);
      const created = await register(customers[customer]!, url, customer);
      endpoints.push({ index, customer, id: created.id, url, registeredAt: Date.now(), deliveries: [], deleted: false, secret: created.secret, arrived: new Set() });
    }
  } catch (error) {
    await close();
    throw error;
  }

  return {
    readyAt: Date.now() + REGISTRATION_SPREAD_MS,
    close,
    async settle(expected, boundMs) {
      const pending = endpoints.map((endpoint) =>
        expected.filter((update) => update.owner === endpoint.customer && update.ts >= endpoint.registeredAt + options.clockOffsetMs).map((update) => update.key),
      );
      const startedAt = Date.now();
      const deadline = startedAt + boundMs;
      const settled = () => endpoints.every((endpoint, i) => pending[i]!.every((key) => endpoint.arrived.has(key))) || Date.now() - Math.max(startedAt, lastArrivalAt) >= QUIET_MS;
      while (!settled() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    },
  };
}

/** Registers one endpoint; a refusal says what the server said and what to change. */
async function register(client: TrailwireClient, url: string, customer: number): Promise<{ id: string; secret: string }> {
  try {
    return (await client.request<{ id: string; secret: string }>('POST', '/api/v1/webhooks', { body: { url } })).body;
  } catch (error) {
    if (!(error instanceof TrailwireHttpError)) throw error;
    const said = error.problem?.errors?.map((entry) => `${entry.path} ${entry.message}`).join('; ') || error.problem?.detail || error.message;
    if (error.status === 400)
      throw new TrailwireError(
        'validation_failed',
        `The server refused the webhook URL ${url}: ${said}. A receiver on this machine or in a private network is refused unless the server allows it: ` +
          'start it with `trailwire serve --webhook-allow-http --webhook-allow-private` (or TRAILWIRE_WEBHOOK_ALLOW_HTTP=true and TRAILWIRE_WEBHOOK_ALLOW_PRIVATE=true), ' +
          'or give --webhook-url a public https URL that reaches --webhook-listen.',
        { cause: error },
      );
    if (error.status === 409)
      throw new TrailwireError('conflict', `Customer ${customer + 1} may register no more webhook endpoints (${said}): give fewer --webhooks, or delete some of its endpoints.`, { cause: error });
    throw error;
  }
}

/** One request at an endpoint's path, judged: its signature against the endpoint's secret, and its body as a delivery of events. */
function deliveryOf(secret: string, request: ReceivedRequest, clockOffsetMs: number): WebhookDeliveryRecord {
  const problems: string[] = [];
  if (request.tooLarge) problems.push('the body is over 8 MiB');
  const signature = webhookSignatureProblem(secret, request.headers, request.body, request.receivedAt + clockOffsetMs);
  if (signature !== null) problems.push(signature);
  let events: WebhookEventRecord[] = [];
  try {
    events = eventsOf(JSON.parse(request.body));
  } catch {
    problems.push('the body is not {"events": [...]} of events with a type, a timestamp and data');
  }
  return { webhookId: request.headers.id ?? '', receivedAt: request.receivedAt, ...(problems.length > 0 ? { invalid: problems.join('; ') } : {}), events };
}

function eventsOf(body: unknown): WebhookEventRecord[] {
  const events = (body as { events?: unknown }).events;
  if (!Array.isArray(events)) throw new TypeError('no events');
  return events.map((event: { type?: unknown; timestamp?: unknown; data?: { vin?: unknown } }) => {
    const ts = typeof event.timestamp === 'string' ? Date.parse(event.timestamp) : NaN;
    if (typeof event.type !== 'string' || Number.isNaN(ts) || typeof event.data !== 'object' || event.data === null) throw new TypeError('not an event');
    return {
      type: event.type,
      vin: typeof event.data.vin === 'string' ? event.data.vin : '',
      ts,
      digest: createHash('sha256').update(JSON.stringify(event)).digest('hex').slice(0, 16),
    };
  });
}

/** The listen host as a URL's host: a wildcard address is reached on loopback, an IPv6 literal in brackets. */
function urlHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
