/**
 * What a telemetry write tells webhooks (contract 14): for each trailer it touched that is in a
 * fleet, a `trailer.updated` event whose data is the trailer's JSON exactly as the SSE `update`
 * event carries it (`trailerView`), and a `trailer.status_changed` event when the write moved the
 * trailer's status name (as it stands after the whole write: a status that changed and changed back
 * within one batch did not change). The stores call this inside the write's transaction and put each event in the
 * outbox of every endpoint of the trailer's customer that asks for it (`TelemetryWriteStore`).
 */
import type { AppliedTelemetry, WebhookEventType } from './store.ts';
import { rfc3339, trailerView } from './views.ts';

/** One event for the outbox, before it is matched to endpoints. */
export interface WebhookOutboxEvent {
  customerId: string;
  fleetId: number;
  trailerId: string;
  type: WebhookEventType;
  /** The event as a delivery's `events` array holds it: `{"type", "timestamp", "data"}`, as JSON text. */
  json: string;
}

/** The events of a write processed at `at` (epoch ms) that left the trailer as `applied` says; none for an unassigned trailer. */
export function webhookEventsOf(applied: Pick<AppliedTelemetry, 'trailer' | 'fleet' | 'statusChanged'>, at: number): WebhookOutboxEvent[] {
  const { trailer, fleet } = applied;
  if (fleet === null) return [];
  const data = JSON.stringify(trailerView(trailer));
  const timestamp = JSON.stringify(rfc3339(at));
  const event = (type: WebhookEventType): WebhookOutboxEvent => ({
    customerId: fleet.customerId,
    fleetId: fleet.id,
    trailerId: trailer.id,
    type,
    json: `{"type":"${type}","timestamp":${timestamp},"data":${data}}`,
  });
  return applied.statusChanged ? [event('trailer.updated'), event('trailer.status_changed')] : [event('trailer.updated')];
}

/** The body of a delivery: its events' JSON in an `events` array. */
export function webhookBody(eventsJson: readonly string[]): string {
  return `{"events":[${eventsJson.join(',')}]}`;
}
