/**
 * The customers' webhook endpoints (contract 14), independent of HTTP: registering one (its URL
 * checked against the address rules, its fleets against the customer's, a cap per customer), the
 * `whsec_` secret shown once, listing, deleting, the deliveries list, and a test delivery — which,
 * answered with a 2xx, also resumes a `failing` endpoint. A customer sees only its own endpoints;
 * anything else is `not_found`.
 */
import type { Clock, IdGenerator } from './clock.ts';
import { invalidField, TrailwireError, type FieldError } from './errors.ts';
import type { CursorCodec, Page } from './paging.ts';
import { toPage } from './paging.ts';
import { idPageOf, type QueryParams } from './read-service.ts';
import { type FleetReadStore, WEBHOOK_EVENT_TYPES, type WebhookDelivery, type WebhookEndpoint, type WebhookEventType, type WebhookStore } from './store.ts';
import { rfc3339 } from './views.ts';
import { checkWebhookUrl, DEFAULT_WEBHOOK_ADDRESS_RULES, type WebhookAddressRules } from './webhook-address.ts';
import { webhookBody } from './webhook-events.ts';
import type { WebhookPost, WebhookPostResult } from './webhook-sender.ts';
import { newWebhookSecret } from './webhook-signature.ts';

export interface WebhookServiceOptions {
  /** Where deliveries may go. Default: https only, public addresses only. */
  rules?: WebhookAddressRules;
  /** Endpoints a customer may have. Default 10. */
  maxEndpointsPerCustomer?: number;
}

export const DEFAULT_MAX_WEBHOOK_ENDPOINTS = 10;

/** The `webhook-id` prefix of deliveries: Standard Webhooks' `msg_`. */
export const WEBHOOK_ID_PREFIX = 'msg_';

const BODY_FIELDS = new Set(['url', 'events', 'fleetIds']);
const INT32_MAX = 2_147_483_647;

/** An endpoint as the API shows it. */
export function webhookEndpointView(endpoint: WebhookEndpoint) {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: endpoint.events,
    fleetIds: endpoint.fleetIds,
    status: endpoint.status,
    createdAt: rfc3339(endpoint.createdAt),
    failingSince: endpoint.failingSince === null ? null : rfc3339(endpoint.failingSince),
  };
}

/** A delivery as the API shows it. */
export function webhookDeliveryView(delivery: WebhookDelivery) {
  const time = (ms: number | null) => (ms === null ? null : rfc3339(ms));
  return {
    id: delivery.id,
    createdAt: rfc3339(delivery.createdAt),
    events: delivery.eventCount,
    state: delivery.state,
    attempts: delivery.attempts,
    nextAttemptAt: time(delivery.nextAttemptAt),
    lastAttemptAt: time(delivery.lastAttemptAt),
    lastStatus: delivery.lastStatus,
    lastError: delivery.lastError,
    deliveredAt: time(delivery.deliveredAt),
  };
}

export class WebhookService {
  private readonly rules: WebhookAddressRules;
  private readonly cap: number;

  constructor(
    private readonly store: { readonly webhooks: WebhookStore } & Pick<FleetReadStore, 'getFleet'>,
    private readonly cursors: CursorCodec,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
    private readonly sender: { post(delivery: WebhookPost): Promise<WebhookPostResult> },
    options: WebhookServiceOptions = {},
  ) {
    this.rules = options.rules ?? DEFAULT_WEBHOOK_ADDRESS_RULES;
    this.cap = options.maxEndpointsPerCustomer ?? DEFAULT_MAX_WEBHOOK_ENDPOINTS;
    if (!Number.isSafeInteger(this.cap) || this.cap < 1) throw new TypeError(`WebhookService: \`maxEndpointsPerCustomer\` must be a positive integer, got ${this.cap}`);
  }

  get addressRules(): WebhookAddressRules {
    return this.rules;
  }

  /** Registers an endpoint; the answer is the only place its secret is ever shown. */
  async create(customerId: string, body: unknown) {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidField('', 'the body must be a JSON object with `url`');
    const fields = body as Record<string, unknown>;
    const unknown = Object.keys(fields).filter((key) => !BODY_FIELDS.has(key));
    if (unknown.length > 0)
      throw new TrailwireError('validation_failed', `unknown field ${unknown[0]}`, { errors: unknown.map((key) => ({ path: `/${key}`, message: 'is not a field of a webhook (url, events, fleetIds)' })) });
    const url = await checkWebhookUrl(fields.url, this.rules);
    const events = parseEvents(fields.events);
    const fleetIds = await this.ownedFleetIds(customerId, fields.fleetIds);
    const secret = newWebhookSecret();
    const endpoint = await this.store.webhooks.createWebhookEndpoint(
      { id: this.ids(), customerId, url: url.href, events, fleetIds, secret, createdAt: this.clock.now() },
      this.cap,
    );
    if (endpoint === null) throw new TrailwireError('conflict', `This customer has ${this.cap} webhooks already, the most it may have; delete one first.`);
    return { ...webhookEndpointView(endpoint), secret };
  }

  async list(customerId: string, query: QueryParams): Promise<Page<ReturnType<typeof webhookEndpointView>>> {
    const scope = `webhooks:${customerId}`;
    const { afterId, take } = idPageOf(this.cursors, query, scope, 'string', false);
    const rows = await this.store.webhooks.listWebhookEndpoints(customerId, { afterId, limit: take + 1 });
    return toPage(rows, take, webhookEndpointView, (last) => this.cursors.encode(scope, { kind: 'id', afterId: last.id, take }));
  }

  async get(customerId: string, endpointId: string) {
    return webhookEndpointView(await this.owned(customerId, endpointId));
  }

  async delete(customerId: string, endpointId: string): Promise<void> {
    if (!(await this.store.webhooks.deleteWebhookEndpoint(customerId, endpointId))) throw notFound(endpointId);
  }

  async deliveries(customerId: string, endpointId: string, query: QueryParams): Promise<Page<ReturnType<typeof webhookDeliveryView>>> {
    await this.owned(customerId, endpointId);
    const scope = `webhook-deliveries:${endpointId}`;
    const { afterId, take } = idPageOf(this.cursors, query, scope, 'string', false);
    const rows = await this.store.webhooks.listWebhookDeliveries(customerId, endpointId, { afterId, limit: take + 1 });
    return toPage(rows, take, webhookDeliveryView, (last) => this.cursors.encode(scope, { kind: 'id', afterId: last.id, take }));
  }

  /**
   * Sends a `webhook.test` event to the endpoint now and answers how it went. A 2xx resumes a
   * failing endpoint: its pending delivery is sent at once, with a new retry period.
   */
  async test(customerId: string, endpointId: string) {
    const target = await this.store.webhooks.getWebhookTarget(customerId, endpointId);
    if (target === null) throw notFound(endpointId);
    const at = this.clock.now();
    const id = WEBHOOK_ID_PREFIX + this.ids();
    const event = JSON.stringify({ type: 'webhook.test', timestamp: rfc3339(at), data: { webhookId: endpointId } });
    const result = await this.sender.post({ url: target.url, secret: target.secret, id, body: webhookBody([event]), at });
    const endpoint = result.delivered ? await this.store.webhooks.resumeWebhookEndpoint(customerId, endpointId, this.clock.now()) : await this.store.webhooks.getWebhookEndpoint(customerId, endpointId);
    if (endpoint === null) throw notFound(endpointId);
    return {
      webhookId: id,
      delivered: result.delivered,
      status: result.status,
      error: result.delivered ? null : result.error,
      webhook: webhookEndpointView(endpoint),
    };
  }

  private async owned(customerId: string, endpointId: string): Promise<WebhookEndpoint> {
    const endpoint = await this.store.webhooks.getWebhookEndpoint(customerId, endpointId);
    if (endpoint === null) throw notFound(endpointId);
    return endpoint;
  }

  /** `fleetIds`: absent or null for every fleet, else distinct fleets of this customer. */
  private async ownedFleetIds(customerId: string, raw: unknown): Promise<number[] | null> {
    if (raw === undefined || raw === null) return null;
    if (!Array.isArray(raw) || raw.length === 0 || raw.length > 100) throw invalidField('/fleetIds', 'must be a list of 1 to 100 fleet ids, or left out for every fleet');
    const errors: FieldError[] = [];
    const ids = new Set<number>();
    for (const [index, value] of raw.entries()) {
      if (!Number.isSafeInteger(value) || value < 1 || value > INT32_MAX) errors.push({ path: `/fleetIds/${index}`, message: 'must be a fleet id (a positive integer)' });
      else if (ids.has(value)) errors.push({ path: `/fleetIds/${index}`, message: 'is listed twice' });
      else if ((await this.store.getFleet(customerId, value)) === null) errors.push({ path: `/fleetIds/${index}`, message: 'is not a fleet of this customer' });
      ids.add(value);
    }
    if (errors.length > 0) throw new TrailwireError('validation_failed', `fleetIds: ${errors[0]!.message}`, { errors });
    return [...ids].sort((a, b) => a - b);
  }
}

/** `events`: absent for every event type, else distinct known types. */
function parseEvents(raw: unknown): WebhookEventType[] {
  if (raw === undefined || raw === null) return [...WEBHOOK_EVENT_TYPES];
  const known = new Set<string>(WEBHOOK_EVENT_TYPES);
  if (!Array.isArray(raw) || raw.length === 0) throw invalidField('/events', `must be a list of event types (${WEBHOOK_EVENT_TYPES.join(', ')}), or left out for all`);
  const errors: FieldError[] = [];
  for (const [index, value] of raw.entries())
    if (typeof value !== 'string' || !known.has(value)) errors.push({ path: `/events/${index}`, message: `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}` });
  if (errors.length > 0) throw new TrailwireError('validation_failed', `events: ${errors[0]!.message}`, { errors });
  return WEBHOOK_EVENT_TYPES.filter((type) => raw.includes(type));
}

function notFound(id: string): TrailwireError {
  return new TrailwireError('not_found', `No webhook ${JSON.stringify(id.slice(0, 100))} is visible to this customer.`);
}
