/**
 * The webhook tables' rows as both SQL stores read them, and the encoding of an endpoint's filters:
 * its event types and fleet ids as delimited text (`,trailer.updated,`, `,3,7,`), so that one
 * `instr`/`position` test in the outbox insert matches an event to the endpoints that ask for it, the
 * same way in SQLite and PostgreSQL.
 */
import { WEBHOOK_EVENT_TYPES, type WebhookDelivery, type WebhookEndpoint, type WebhookEndpointStatus, type WebhookEventType, type WebhookSend } from '../../core/store.ts';

export interface WebhookEndpointRow {
  id: string;
  customer_id: string;
  url: string;
  events: string;
  fleet_ids: string | null;
  status: WebhookEndpointStatus;
  failing_since: number | null;
  created_at: number;
}

export const WEBHOOK_ENDPOINT_COLUMNS = 'id, customer_id, url, events, fleet_ids, status, failing_since, created_at';

export interface WebhookDeliveryRow {
  id: string;
  endpoint_id: string;
  created_at: number;
  event_count: number;
  state: 'pending' | 'delivered';
  attempts: number;
  next_attempt_at: number | null;
  last_attempt_at: number | null;
  last_status: number | null;
  last_error: string | null;
  delivered_at: number | null;
}

export const WEBHOOK_DELIVERY_COLUMNS =
  'id, endpoint_id, created_at, event_count, state, attempts, next_attempt_at, last_attempt_at, last_status, last_error, delivered_at';

/** A pending delivery as the deliverer reads it. */
export interface WebhookSendRow {
  id: string;
  body: string;
  event_count: number;
  attempts: number;
  retry_from: number;
  next_attempt_at: number | null;
}

/** A list as delimited text: `,a,b,` (so `,a,` finds `a` and only `a`). */
export function delimited(values: readonly (string | number)[]): string {
  return `,${values.join(',')},`;
}

/** The needle that finds `value` in `delimited` text. */
export function delimitedNeedle(value: string | number): string {
  return `,${value},`;
}

function undelimited(text: string): string[] {
  return text.split(',').filter((part) => part !== '');
}

export function toWebhookEndpoint(row: WebhookEndpointRow): WebhookEndpoint {
  const events = new Set(undelimited(row.events));
  return {
    id: row.id,
    customerId: row.customer_id,
    url: row.url,
    events: WEBHOOK_EVENT_TYPES.filter((type): type is WebhookEventType => events.has(type)),
    fleetIds: row.fleet_ids === null ? null : undelimited(row.fleet_ids).map(Number),
    status: row.status,
    createdAt: Number(row.created_at),
    failingSince: row.failing_since === null ? null : Number(row.failing_since),
  };
}

export function toWebhookDelivery(row: WebhookDeliveryRow): WebhookDelivery {
  const time = (ms: number | null) => (ms === null ? null : Number(ms));
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    createdAt: Number(row.created_at),
    eventCount: row.event_count,
    state: row.state,
    attempts: row.attempts,
    nextAttemptAt: time(row.next_attempt_at),
    lastAttemptAt: time(row.last_attempt_at),
    lastStatus: row.last_status,
    lastError: row.last_error,
    deliveredAt: time(row.delivered_at),
  };
}

export function toWebhookSend(row: WebhookSendRow): WebhookSend {
  return { id: row.id, body: row.body, eventCount: row.event_count, attempts: row.attempts, createdAt: Number(row.retry_from) };
}
