/**
 * The invariants a simulation run checks, over its `RunRecord`. Each check answers human-readable
 * violations (empty when the invariant held): no 5xx (nor any answer but 202 and 429); never more
 * accepted per (product, VIN, window) than the limit, exactly the limit in a window planned over it,
 * nothing limited in a window planned under it; every accepted payload processed; every update
 * reaching every subscriber of its customer and no other; heartbeats no further apart than the
 * interval plus slack; rotated keys and tokens refused while the clients recover; and, when the run
 * registered webhook endpoints, every update delivered to each of its customer's, validly signed and
 * in order. A check that finds many breaches reports the first few and counts the rest.
 */
import { expectedUpdates, updateKey } from './expected-updates.ts';
import type { RunRecord, SendRecord, SubscriberRecord, UpdateRecord, WebhookDeliveryRecord } from './run-record.ts';

export interface CheckResult {
  name: string;
  /** What the check judged, e.g. "4,500 responses". */
  judged: string;
  violations: string[];
}

const SHOWN_PER_CHECK = 5;

/** Runs every check. */
export function checkInvariants(record: RunRecord): CheckResult[] {
  return [
    checkStatuses(record),
    checkWindowLimits(record),
    checkWindowGroups(record),
    checkProcessing(record),
    checkLiveDelivery(record),
    checkHeartbeats(record),
    checkRotations(record),
    // Judged only when the run registered endpoints, so a run without webhooks reports as before.
    ...(record.webhooks ? [checkWebhookDelivery(record)] : []),
  ];
}

/** Every violation of every check, in check order. */
export function violationsOf(results: CheckResult[]): string[] {
  return results.flatMap((result) => result.violations);
}

/** No 5xx, no request without an answer, nothing but 202 and 429 from intake. */
export function checkStatuses(record: RunRecord): CheckResult {
  const planned = record.sends.filter((send) => send.group !== null);
  const serverErrors = planned.filter((send) => send.status >= 500);
  const unanswered = planned.filter((send) => send.status === 0);
  const unexpected = planned.filter((send) => send.status !== 0 && send.status < 500 && send.status !== 202 && send.status !== 429);
  const violations: string[] = [];
  if (serverErrors.length > 0)
    violations.push(`${serverErrors.length} intake request(s) answered 5xx (${describeStatuses(serverErrors)}); first: ${describeSend(serverErrors[0]!)}`);
  if (unanswered.length > 0) violations.push(`${unanswered.length} intake request(s) got no answer; first: ${describeSend(unanswered[0]!)}`);
  if (unexpected.length > 0)
    violations.push(`${unexpected.length} intake request(s) answered neither 202 nor 429 (${describeStatuses(unexpected)}); first: ${describeSend(unexpected[0]!)}`);
  return { name: 'no 5xx', judged: `${planned.length} responses`, violations };
}

/** Never more accepted in one (product, VIN, window) than the limit, by the server's own receive time. */
export function checkWindowLimits(record: RunRecord): CheckResult {
  const counts = new Map<string, { product: string; vin: string; windowStart: number; accepted: number; limit: number }>();
  for (const send of record.sends) {
    if (send.status !== 202) continue;
    const limit = record.limits[send.product];
    if (!limit) continue;
    const windowMs = limit.windowSeconds * 1000;
    const receivedAt = (send.id && record.outcomes[send.id]?.receivedAt) || send.sentAt + record.clockOffsetMs;
    const windowStart = Math.floor(receivedAt / windowMs) * windowMs;
    const key = `${send.product}|${send.vin}|${windowStart}`;
    const entry = counts.get(key) ?? { product: send.product, vin: send.vin, windowStart, accepted: 0, limit: limit.requests };
    entry.accepted++;
    counts.set(key, entry);
  }
  const over = [...counts.values()].filter((entry) => entry.accepted > entry.limit);
  return {
    name: 'never more accepted than the limit',
    judged: `${counts.size} (product, VIN, window) buckets`,
    violations: capped(
      over.map((e) => `${e.product} VIN ${e.vin}: ${e.accepted} accepted in the window starting ${iso(e.windowStart)}, over its limit of ${e.limit}`),
      'more windows over their limit',
    ),
  };
}

/**
 * Each planned window group whose requests all went out and came back inside the window: over the
 * limit, exactly the limit accepted and the rest limited; under or at it, nothing limited.
 */
export function checkWindowGroups(record: RunRecord): CheckResult {
  const byGroup = new Map<number, SendRecord[]>();
  for (const send of record.sends) if (send.group !== null) byGroup.set(send.group, [...(byGroup.get(send.group) ?? []), send]);
  const violations: string[] = [];
  let judged = 0;
  let unjudged = 0;
  record.groups.forEach((group, index) => {
    const sends = byGroup.get(index) ?? [];
    const offset = record.clockOffsetMs;
    const inside = sends.every((s) => s.sentAt + offset >= group.windowStart && s.answeredAt + offset < group.windowEnd);
    const answered = sends.every((s) => s.status === 202 || s.status === 429);
    // Another request of the same product and VIN that may have reached the server inside this
    // window (a late one of the window before, under heavy load) counts there too.
    const vin = sends[0]?.vin;
    const others = record.sends.filter(
      (s) =>
        s.group !== index &&
        s.product === group.product &&
        s.vin === vin &&
        s.sentAt + offset < group.windowEnd &&
        s.answeredAt + offset >= group.windowStart,
    );
    // A group cut short, whose requests crossed a window edge or shared the window with others,
    // says nothing exact about one window.
    if (sends.length !== group.planned || !inside || !answered || others.length > 0) {
      unjudged++;
      return;
    }
    judged++;
    const accepted = sends.filter((s) => s.status === 202).length;
    const limited = sends.length - accepted;
    const where = `${group.product} VIN ${vin} in the window starting ${iso(group.windowStart)}`;
    if (group.planned > group.limit) {
      if (accepted !== group.limit)
        violations.push(`${where}: ${accepted} of ${group.planned} accepted, expected exactly the limit of ${group.limit} (the rest 429)`);
    } else if (limited > 0) {
      violations.push(`${where}: ${limited} of ${group.planned} limited though ${group.planned} is within its limit of ${group.limit}`);
    }
  });
  return {
    name: 'exactly the limit when over it, nothing limited under it',
    judged: `${judged} window groups${unjudged > 0 ? ` (${unjudged} crossing a window edge, sharing it or cut short, not judged)` : ''}`,
    violations: capped(violations, 'more window groups'),
  };
}

/** Every accepted payload ends `processed`. */
export function checkProcessing(record: RunRecord): CheckResult {
  const accepted = record.sends.filter((send) => send.status === 202 && send.id);
  const byState = new Map<string, SendRecord[]>();
  for (const send of accepted) {
    const state = record.outcomes[send.id!]?.status ?? 'unknown';
    byState.set(state, [...(byState.get(state) ?? []), send]);
  }
  const violations: string[] = [];
  const failed = byState.get('failed') ?? [];
  if (failed.length > 0)
    violations.push(`${failed.length} accepted payload(s) failed processing; first: ${failed[0]!.id} (${record.outcomes[failed[0]!.id!]?.error ?? 'no reason'})`);
  const pending = [...(byState.get('queued') ?? []), ...(byState.get('processing') ?? []), ...(byState.get('unknown') ?? [])];
  if (pending.length > 0)
    violations.push(
      `${pending.length} accepted payload(s) not processed within ${(record.processingWaitMs / 1000).toFixed(1)} s after the traffic stopped ` +
        `(${[...byState].filter(([state]) => state !== 'processed' && state !== 'failed').map(([state, list]) => `${list.length} ${state}`).join(', ')}); first: ${pending[0]!.id}`,
    );
  return { name: 'every accepted payload processed', judged: `${accepted.length} accepted payloads`, violations };
}

/** The server-clock spans during which a subscriber was certainly subscribed. */
function listeningSpans(record: RunRecord, subscriber: SubscriberRecord): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  for (const connection of subscriber.connections) {
    // The server subscribes before it writes the first heartbeat, so from that heartbeat on it listens.
    const first = connection.heartbeats[0];
    if (first === undefined) continue;
    const end = connection.endedAt ?? record.endedAt;
    spans.push([first + record.clockOffsetMs + record.liveMarginMs, end + record.clockOffsetMs - record.liveMarginMs]);
  }
  return spans;
}

/**
 * Every update reaches every subscriber of its customer that was listening — itself, or, where the
 * server coalesced what the stream could not take at that moment, a later update of the same trailer
 * (a slow subscriber is held to the latest update of each trailer) — none reaches another customer's
 * subscriber, and updates of one trailer never arrive out of order. SSE subscribers are held to the
 * same, by the update time each update event carries (`updatedAt`, the LiveFeed's `ts`).
 */
export function checkLiveDelivery(record: RunRecord): CheckResult {
  const expected = expectedUpdates(record);
  const violations: string[] = [];
  let judgedUpdates = 0;
  for (const subscriber of record.subscribers) {
    const who = `${subscriberName(subscriber)} (${record.customers[subscriber.customer]?.label ?? `customer ${subscriber.customer}`})`;
    const foreign = subscriber.updates.filter((update) => record.ownership[update.vin] !== subscriber.customer);
    if (foreign.length > 0) {
      const first = foreign[0]!;
      const owner = record.ownership[first.vin];
      violations.push(
        `${who} received ${foreign.length} update(s) of trailers that are not its customer's; first: VIN ${first.vin} of ${owner === undefined ? 'no known customer' : (record.customers[owner]?.label ?? `customer ${owner}`)}`,
      );
    }
    const outOfOrder = outOfOrderUpdates(subscriber.updates);
    if (outOfOrder.length > 0) violations.push(`${who} received ${outOfOrder.length} update(s) older than one it already had for the same trailer; first: VIN ${outOfOrder[0]!.vin}`);

    const spans = listeningSpans(record, subscriber);
    const mine = expected.filter((update) => update.owner === subscriber.customer && spans.some(([from, to]) => update.ts >= from && update.ts <= to));
    const received = new Map<string, number>();
    for (const update of subscriber.updates) received.set(updateKey(update.vin, update.ts), (received.get(updateKey(update.vin, update.ts)) ?? 0) + 1);
    const latestReceived = new Map<string, number>();
    for (const update of subscriber.updates) latestReceived.set(update.vin, Math.max(latestReceived.get(update.vin) ?? -Infinity, update.ts));
    if (subscriber.slow) {
      // Coalescing keeps the latest state of each trailer: that one must arrive.
      const latest = new Map<string, (typeof mine)[number]>();
      for (const update of mine) if ((latest.get(update.vin)?.ts ?? -Infinity) <= update.ts) latest.set(update.vin, update);
      const missing = [...latest.values()].filter((update) => !received.has(update.key));
      judgedUpdates += latest.size;
      if (missing.length > 0)
        violations.push(`${who} (slow) never got the latest update of ${missing.length} of ${latest.size} trailer(s); first: VIN ${missing[0]!.vin} at ${iso(missing[0]!.ts)}`);
    } else {
      judgedUpdates += mine.length;
      const remaining = new Map(received);
      // The server coalesces what a stream cannot take right now (each update carries the trailer's
      // full state, so a later one supersedes it): a missing update is a breach only when no later
      // update of the same trailer arrived on that subscriber. "Later" includes the same time: two
      // payloads of a trailer processed in the same millisecond make two updates with one `ts`, and
      // when the second replaces the first the subscriber still holds the trailer's latest state.
      const missing = mine.filter((update) => {
        const left = remaining.get(update.key) ?? 0;
        if (left > 0) {
          remaining.set(update.key, left - 1);
          return false;
        }
        return !((latestReceived.get(update.vin) ?? -Infinity) >= update.ts);
      });
      if (missing.length > 0)
        violations.push(`${who} missed ${missing.length} of ${mine.length} update(s) of its customer's trailers; first: VIN ${missing[0]!.vin} at ${iso(missing[0]!.ts)}`);
    }
    if (subscriber.gaveUp) violations.push(`${who} gave up reconnecting: ${subscriber.gaveUp}`);
  }
  return {
    name: "every update reaches every subscriber of its customer and no other's",
    judged: `${judgedUpdates} expected deliveries to ${record.subscribers.length} subscribers`,
    violations: capped(violations, 'more subscribers with delivery problems'),
  };
}

function outOfOrderUpdates(updates: UpdateRecord[]): UpdateRecord[] {
  const latest = new Map<string, number>();
  const late: UpdateRecord[] = [];
  for (const update of updates) {
    const key = `${update.connection}|${update.vin}`;
    if ((latest.get(key) ?? -Infinity) > update.ts) late.push(update);
    else latest.set(key, update.ts);
  }
  return late;
}

/**
 * The first heartbeat within the slack of subscribing, then one at least every interval plus slack
 * until the stream ends. Slow subscribers are left out: their receive times say when they read, and
 * the server rightly skips heartbeats to a stream that is not reading.
 */
export function checkHeartbeats(record: RunRecord): CheckResult {
  const limit = record.heartbeatIntervalMs + record.heartbeatSlackMs;
  const violations: string[] = [];
  let gaps = 0;
  for (const subscriber of record.subscribers) {
    if (subscriber.slow) continue;
    subscriber.connections.forEach((connection, index) => {
      const who = `${subscriberName(subscriber)}${subscriber.connections.length > 1 ? ` connection ${index + 1}` : ''}`;
      const end = connection.endedAt ?? record.endedAt;
      const [first] = connection.heartbeats;
      if (first === undefined) {
        // A stream the server refused or ended at once has no heartbeat to judge.
        if (end - connection.startedAt > record.heartbeatSlackMs && connection.endCode === undefined)
          violations.push(`${who}: no heartbeat in ${end - connection.startedAt} ms`);
        return;
      }
      if (first - connection.startedAt > record.heartbeatSlackMs)
        violations.push(`${who}: the first heartbeat came ${first - connection.startedAt} ms after subscribing (expected at once, slack ${record.heartbeatSlackMs} ms)`);
      const beats = [...connection.heartbeats];
      // A stream that the simulator closed must have kept beating until then; one the server ended stops.
      if (connection.endCode === undefined || connection.endCode === 1) beats.push(end);
      let worst = 0;
      let worstAt = 0;
      for (let i = 1; i < beats.length; i++) {
        gaps++;
        const gap = beats[i]! - beats[i - 1]!;
        if (gap > worst) {
          worst = gap;
          worstAt = beats[i - 1]!;
        }
      }
      if (worst > limit)
        violations.push(`${who}: ${worst} ms without a heartbeat from ${iso(worstAt)} (interval ${record.heartbeatIntervalMs} ms + slack ${record.heartbeatSlackMs} ms)`);
    });
  }
  return {
    name: 'heartbeats no further apart than the interval plus slack',
    judged: `${gaps} heartbeat gaps`,
    violations: capped(violations, 'more connections with late heartbeats'),
  };
}

/** A rotated key and the tokens minted before it are refused, and the clients carry on with the new key. */
export function checkRotations(record: RunRecord): CheckResult {
  const violations: string[] = [];
  for (const rotation of record.rotations) {
    const what = `${rotation.audience === 'partners' ? 'partner' : 'customer'} ${rotation.subject}`;
    if (rotation.error) {
      violations.push(`rotating the key of ${what} failed: ${rotation.error}`);
      continue;
    }
    if (rotation.oldTokenStatus !== 401) violations.push(`a token of ${what} minted before its rotation answered ${rotation.oldTokenStatus ?? 'nothing'}, expected 401`);
    if (rotation.oldKeyStatus !== 401) violations.push(`the rotated key of ${what} still authenticated (${rotation.oldKeyStatus ?? 'no answer'}), expected 401`);
    if (rotation.audience === 'partners') {
      const after = record.sends.filter((send) => send.group !== null && send.product === rotation.subject && send.sentAt > rotation.rotatedAt);
      if (after.length > 0 && !after.some((send) => send.status === 202 || send.status === 429))
        violations.push(`the ${what} client did not recover after the rotation: none of its ${after.length} later requests was answered 202 or 429`);
    } else {
      for (const subscriber of record.subscribers.filter((s) => s.customer === rotation.customer)) {
        const later = subscriber.connections.filter((c) => c.startedAt >= rotation.rotatedAt - 5_000 && c.heartbeats.some((at) => at > rotation.rotatedAt));
        if (later.length === 0) violations.push(`${subscriberName(subscriber)} of ${what} did not resubscribe with the new key after the rotation`);
        const ended = subscriber.connections.some((c) => c.endCode === 16 && (c.endedAt ?? 0) >= rotation.rotatedAt - 5_000);
        if (!ended) violations.push(`${subscriberName(subscriber)} of ${what}: its stream did not end with UNAUTHENTICATED when the key was rotated`);
      }
    }
  }
  return { name: 'rotated keys and old tokens refused, clients recover', judged: `${record.rotations.length} rotations`, violations };
}

/**
 * Every webhook endpoint the run registered (contract 14) received, in deliveries whose Standard
 * Webhooks signature holds, the `trailer.updated` event of every payload of its customer processed
 * since it was registered — at least once: an event twice is allowed only as a redelivery, under the
 * same `webhook-id` with the same events — none of another customer's trailers, each trailer's events
 * in the order they happened; and the simulator deleted every endpoint at the end.
 */
export function checkWebhookDelivery(record: RunRecord): CheckResult {
  const { endpoints } = record.webhooks ?? { endpoints: [] };
  const expected = expectedUpdates(record);
  const violations: string[] = [];
  let judged = 0;
  let deliveries = 0;
  for (const endpoint of endpoints) {
    const who = `webhook endpoint ${endpoint.index + 1} (${record.customers[endpoint.customer]?.label ?? `customer ${endpoint.customer}`})`;
    deliveries += endpoint.deliveries.length;
    const invalid = endpoint.deliveries.filter((delivery) => delivery.invalid !== undefined);
    if (invalid.length > 0)
      violations.push(`${who}: ${invalid.length} of ${endpoint.deliveries.length} deliveries would be refused by a Standard Webhooks receiver; first: ${invalid[0]!.webhookId || 'no webhook-id'}: ${invalid[0]!.invalid}`);
    // A redelivery (the same webhook-id again) must repeat its events; only the first of each id counts.
    const firstOfId = new Map<string, WebhookDeliveryRecord>();
    const changed: string[] = [];
    for (const delivery of endpoint.deliveries) {
      if (delivery.invalid !== undefined) continue;
      const first = firstOfId.get(delivery.webhookId);
      if (!first) firstOfId.set(delivery.webhookId, delivery);
      else if (eventsDigest(first) !== eventsDigest(delivery)) changed.push(delivery.webhookId);
    }
    if (changed.length > 0) violations.push(`${who}: ${changed.length} redelivery(ies) carried other events than the first delivery of their webhook-id; first: ${changed[0]}`);
    const events = [...firstOfId.values()].flatMap((delivery) => delivery.events.map((event) => ({ ...event, webhookId: delivery.webhookId })));

    const foreign = events.filter((event) => record.ownership[event.vin] !== endpoint.customer);
    if (foreign.length > 0) violations.push(`${who} received ${foreign.length} event(s) of trailers that are not its customer's; first: VIN ${foreign[0]!.vin || '(none)'}`);

    const idOfEvent = new Map<string, string>();
    const duplicated = events.filter((event) => {
      const key = `${event.type}|${event.vin}|${event.ts}|${event.digest}`;
      const seenIn = idOfEvent.get(key);
      idOfEvent.set(key, event.webhookId);
      return seenIn !== undefined;
    });
    if (duplicated.length > 0)
      violations.push(`${who} received ${duplicated.length} event(s) again under another webhook-id (a redelivery keeps its id); first: ${duplicated[0]!.type} of VIN ${duplicated[0]!.vin} at ${iso(duplicated[0]!.ts)}`);

    const latest = new Map<string, number>();
    const outOfOrder = events.filter((event) => {
      const late = (latest.get(event.vin) ?? -Infinity) > event.ts;
      if (!late) latest.set(event.vin, event.ts);
      return late;
    });
    if (outOfOrder.length > 0)
      violations.push(`${who} received ${outOfOrder.length} event(s) older than one it already had for the same trailer; first: ${outOfOrder[0]!.type} of VIN ${outOfOrder[0]!.vin} at ${iso(outOfOrder[0]!.ts)}`);

    const arrived = new Set(events.filter((event) => event.type === 'trailer.updated').map((event) => updateKey(event.vin, event.ts)));
    // Updates made before the endpoint existed are not its to receive.
    const mine = expected.filter((update) => update.owner === endpoint.customer && update.ts >= endpoint.registeredAt + record.clockOffsetMs);
    judged += mine.length;
    const missing = mine.filter((update) => !arrived.has(update.key));
    if (missing.length > 0)
      violations.push(`${who} never received ${missing.length} of ${mine.length} update(s) of its customer's trailers as a trailer.updated event; first: VIN ${missing[0]!.vin} at ${iso(missing[0]!.ts)}`);

    if (!endpoint.deleted) violations.push(`${who}: the simulator could not delete it at the end of the run (${endpoint.deleteError ?? 'not tried'}); delete ${endpoint.id} by hand`);
  }
  return {
    name: 'every update reaches every webhook endpoint of its customer, signed, in order, and the endpoints are deleted',
    judged: `${judged} expected events at ${endpoints.length} endpoints in ${deliveries} deliveries`,
    violations: capped(violations, 'more webhook endpoint problems'),
  };
}

function eventsDigest(delivery: WebhookDeliveryRecord): string {
  return delivery.events.map((event) => event.digest).join(',');
}

/** `subscriber 3`, or `SSE subscriber 5` for a `GET /api/v1/live` one. */
function subscriberName(subscriber: SubscriberRecord): string {
  return `${subscriber.transport === 'sse' ? 'SSE ' : ''}subscriber ${subscriber.index}`;
}

function describeSend(send: SendRecord): string {
  return `${send.status || 'no answer'} for ${send.product} VIN ${send.vin} at ${iso(send.sentAt)}${send.error ? ` (${send.error})` : ''}`;
}

function describeStatuses(sends: SendRecord[]): string {
  const counts = new Map<number, number>();
  for (const send of sends) counts.set(send.status, (counts.get(send.status) ?? 0) + 1);
  return [...counts].map(([status, count]) => `${count}×${status}`).join(', ');
}

function capped(violations: string[], rest: string): string[] {
  if (violations.length <= SHOWN_PER_CHECK) return violations;
  return [...violations.slice(0, SHOWN_PER_CHECK), `… and ${violations.length - SHOWN_PER_CHECK} ${rest}`];
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
