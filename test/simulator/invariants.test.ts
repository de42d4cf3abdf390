import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkHeartbeats,
  checkInvariants,
  checkLiveDelivery,
  checkProcessing,
  checkRotations,
  checkStatuses,
  checkWindowGroups,
  checkWebhookDelivery,
  checkWindowLimits,
  violationsOf,
} from '../../simulator/invariants.ts';
import type { SendRecord } from '../../simulator/run-record.ts';
import { cleanRecord, hookedRecord, T0, VIN_A } from './support/run-records.ts';

describe('invariant checks', () => {
  it('find nothing wrong in a clean run', () => {
    assert.deepEqual(violationsOf(checkInvariants(cleanRecord())), []);
  });

  it('catch a 5xx and a request without an answer', () => {
    const record = cleanRecord();
    record.sends[3]!.status = 500;
    record.sends[4]!.status = 0;
    const { violations } = checkStatuses(record);
    assert.equal(violations.length, 2);
    assert.match(violations[0]!, /1 intake request\(s\) answered 5xx \(1×500\)/);
    assert.match(violations[1]!, /got no answer/);
  });

  it('catch more accepted in a window than the limit (a server with a bigger limit)', () => {
    const record = cleanRecord();
    record.sends[3]!.status = 202;
    record.sends[3]!.id = 'extra';
    record.outcomes.extra = { status: 'processed', receivedAt: record.sends[3]!.sentAt, processedAt: record.sends[3]!.sentAt + 20 };
    assert.match(checkWindowLimits(record).violations[0]!, /gps-basic VIN 1HGCM82633A004352: 4 accepted in the window starting 2026-06-01T12:00:00.000Z, over its limit of 3/);
    assert.match(checkWindowGroups(record).violations[0]!, /4 of 5 accepted, expected exactly the limit of 3/);
  });

  it('count accepted payloads in the window the server received them in', () => {
    const record = cleanRecord();
    // The third accepted payload arrived in the next window: two windows of at most 3 each.
    record.outcomes[record.sends[2]!.id!]!.receivedAt = T0 + 2001;
    record.sends[3]!.status = 202;
    record.sends[3]!.id = 'next';
    record.outcomes.next = { status: 'processed', receivedAt: T0 + 1500, processedAt: T0 + 1520 };
    assert.deepEqual(checkWindowLimits(record).violations, []);
  });

  it('catch fewer accepted than the limit in a window planned over it (a server with a smaller limit)', () => {
    const record = cleanRecord();
    record.sends[2]!.status = 429;
    assert.match(checkWindowGroups(record).violations[0]!, /2 of 5 accepted, expected exactly the limit of 3/);
  });

  it('catch a 429 in a window planned within the limit (quotas not separate, a noisy neighbour)', () => {
    const record = cleanRecord();
    record.sends[6]!.status = 429;
    assert.match(checkWindowGroups(record).violations[0]!, /1 of 2 limited though 2 is within its limit of 3/);
  });

  it('leave a group that crossed a window edge unjudged rather than guess', () => {
    const record = cleanRecord();
    record.sends[6]!.status = 429;
    record.sends[6]!.answeredAt = T0 + 2001;
    const result = checkWindowGroups(record);
    assert.deepEqual(result.violations, []);
    assert.match(result.judged, /1 window groups \(1 crossing a window edge, sharing it or cut short, not judged\)/);
  });

  it('leave a group unjudged when a late request of the window before may have counted in its window', () => {
    const record = cleanRecord();
    // VIN A's group now sits in the next window, and it got one 202 fewer: a request of the window
    // before, answered only after the edge (a loaded server), may have taken that place.
    const next = { ...record.groups[0]!, windowStart: T0 + 2000, windowEnd: T0 + 4000 };
    record.groups.push(next);
    for (const send of record.sends.filter((s) => s.group === 0)) {
      send.group = 2;
      send.sentAt += 2000;
      send.answeredAt += 2000;
    }
    record.sends[2]!.status = 429;
    const late: SendRecord = { product: 'gps-basic', vin: VIN_A, group: 0, plannedAt: T0 + 1900, sentAt: T0 + 1900, answeredAt: T0 + 2100, status: 202, id: 'late' };
    record.sends.push(late);
    record.outcomes.late = { status: 'processed', receivedAt: T0 + 2050, processedAt: T0 + 2060 };
    const result = checkWindowGroups(record);
    assert.deepEqual(result.violations, []);
    assert.match(result.judged, /sharing it/);
    // Without the late request the same group is judged, and its missing 202 caught.
    record.sends.pop();
    assert.match(checkWindowGroups(record).violations[0]!, /2 of 5 accepted, expected exactly the limit of 3/);
  });

  it('catch an accepted payload that is not processed, or failed', () => {
    const record = cleanRecord();
    record.outcomes[record.sends[0]!.id!] = { status: 'queued', receivedAt: T0 };
    record.outcomes[record.sends[1]!.id!] = { status: 'failed', receivedAt: T0, error: 'boom' };
    const { violations } = checkProcessing(record);
    assert.match(violations[0]!, /1 accepted payload\(s\) failed processing; first: .* \(boom\)/);
    assert.match(violations[1]!, /1 accepted payload\(s\) not processed within 1.0 s .*\(1 queued\)/);
  });

  it("catch an update delivered to another customer's subscriber", () => {
    const record = cleanRecord();
    record.subscribers[1]!.updates.push({ ...record.subscribers[0]!.updates[0]! });
    assert.match(checkLiveDelivery(record).violations[0]!, /subscriber 1 \(customer 1\) received 1 update\(s\) of trailers that are not its customer's; first: VIN 1HGCM82633A004352 of customer 0/);
  });

  it('catch an update that never reached a subscriber of its customer', () => {
    const record = cleanRecord();
    record.subscribers[0]!.updates.splice(2, 1); // the trailer's latest
    assert.match(checkLiveDelivery(record).violations[0]!, /subscriber 0 \(customer 0\) missed 1 of 3 update\(s\)/);
  });

  it('accept an update superseded by a later one of the same trailer (coalesced by the server)', () => {
    const record = cleanRecord();
    record.subscribers[0]!.updates.splice(1, 1);
    assert.deepEqual(checkLiveDelivery(record).violations, []);
  });

  it('accept two updates of a trailer made in the same millisecond, the first coalesced into the second', () => {
    const record = cleanRecord();
    const [first, second] = record.sends.filter((s) => s.vin === VIN_A && s.status === 202);
    record.outcomes[second!.id!]!.processedAt = record.outcomes[first!.id!]!.processedAt;
    const updates = record.subscribers[0]!.updates;
    updates[1]!.ts = updates[0]!.ts;
    updates.splice(0, 1); // one of the two same-time updates arrived
    assert.deepEqual(checkLiveDelivery(record).violations, []);
    // Neither of them arrived, nor anything later of the trailer: a breach.
    updates.splice(0);
    assert.match(checkLiveDelivery(record).violations[0]!, /subscriber 0 \(customer 0\) missed 3 of 3 update\(s\)/);
  });

  it('expect no update made while a subscriber was not connected', () => {
    const record = cleanRecord();
    const connection = record.subscribers[0]!.connections[0]!;
    connection.endedAt = T0 + 215; // ended before the first payload was processed (T0 + 220)
    connection.endCode = 16;
    connection.heartbeats = connection.heartbeats.filter((at) => at <= T0 + 215);
    record.subscribers[0]!.updates = [];
    assert.deepEqual(checkLiveDelivery(record).violations, []);
  });

  it('hold a slow subscriber to the latest update of each trailer only', () => {
    const record = cleanRecord();
    const slow = record.subscribers[0]!;
    slow.slow = true;
    slow.updates = slow.updates.slice(-1); // coalesced to the latest
    assert.deepEqual(checkLiveDelivery(record).violations, []);
    slow.updates = slow.updates.slice(0, 0);
    assert.match(checkLiveDelivery(record).violations[0]!, /\(slow\) never got the latest update of 1 of 1 trailer/);
  });

  it('catch updates of one trailer arriving out of order', () => {
    const record = cleanRecord();
    record.subscribers[0]!.updates.reverse();
    assert.match(checkLiveDelivery(record).violations[0]!, /older than one it already had/);
  });

  it('catch heartbeats further apart than the interval plus slack (a server beating slower than assumed)', () => {
    const record = cleanRecord();
    record.subscribers[0]!.connections[0]!.heartbeats = [T0, T0 + 100, T0 + 300, T0 + 400];
    const { violations } = checkHeartbeats(record);
    assert.match(violations[0]!, /subscriber 0: 1650 ms without a heartbeat/);
    record.subscribers[0]!.connections[0]!.heartbeats = Array.from({ length: 21 }, (_, i) => T0 + 60 + i * 100);
    assert.match(checkHeartbeats(record).violations[0]!, /the first heartbeat came 65 ms after subscribing/);
  });

  it('catch an old token or key still working after a rotation', () => {
    const record = cleanRecord();
    record.rotations = [{ audience: 'partners', subject: 'gps-basic', rotatedAt: T0 + 250, oldTokenStatus: 202, oldKeyStatus: 401 }];
    assert.match(checkRotations(record).violations[0]!, /a token of partner gps-basic minted before its rotation answered 202, expected 401/);
    record.rotations = [{ audience: 'partners', subject: 'gps-basic', rotatedAt: T0 + 250, oldTokenStatus: 401, oldKeyStatus: 401 }];
    assert.deepEqual(checkRotations(record).violations, []);
    for (const send of record.sends) if (send.sentAt > T0 + 250) send.status = 401;
    assert.match(checkRotations(record).violations[0]!, /did not recover after the rotation/);
  });

  it('report the first few breaches of a check and count the rest', () => {
    const record = cleanRecord();
    for (let i = 0; i < 8; i++)
      record.subscribers.push({ ...structuredClone(record.subscribers[0]!), index: 2 + i, updates: [] });
    const { violations } = checkLiveDelivery(record);
    assert.equal(violations.length, 6);
    assert.equal(violations[5], '… and 3 more subscribers with delivery problems');
  });
});

describe('the webhook check', () => {
  it('finds nothing wrong when every update arrived once, signed, in order; redeliveries under the same webhook-id are allowed', () => {
    const record = hookedRecord();
    const [first] = record.webhooks!.endpoints[0]!.deliveries;
    record.webhooks!.endpoints[0]!.deliveries.push({ ...structuredClone(first!), receivedAt: first!.receivedAt + 5000 });
    const result = checkWebhookDelivery(record);
    assert.deepEqual(result.violations, []);
    assert.equal(result.judged, '5 expected events at 2 endpoints in 6 deliveries');
    assert.deepEqual(violationsOf(checkInvariants(record)), []);
    // Without endpoints the check is not run at all: a run without --webhooks reports as before.
    assert.ok(!checkInvariants(cleanRecord()).some((check) => check.name.includes('webhook')));
  });

  it('catches a missing update, an event again under another webhook-id, a redelivery with other events, and an endpoint left behind', () => {
    const record = hookedRecord();
    const endpoint = record.webhooks!.endpoints[0]!;
    const [first, second, third] = endpoint.deliveries;
    endpoint.deliveries = [first!, { ...structuredClone(first!), webhookId: 'msg_again' }, { ...second!, events: [] }, third!, { ...third!, events: [...third!.events, ...second!.events] }];
    endpoint.deleted = false;
    endpoint.deleteError = '503 Service Unavailable';
    const violations = checkWebhookDelivery(record).violations.join('\n');
    assert.match(violations, /webhook endpoint 1 \(customer 0\) received 1 event\(s\) again under another webhook-id \(a redelivery keeps its id\); first: trailer.updated of VIN 1HGCM82633A004352/);
    assert.match(violations, /webhook endpoint 1 \(customer 0\): 1 redelivery\(ies\) carried other events than the first delivery of their webhook-id; first: msg_1HGCM82633A004352_2/);
    assert.match(violations, /webhook endpoint 1 \(customer 0\) never received 1 of 3 update\(s\) of its customer's trailers as a trailer.updated event; first: VIN 1HGCM82633A004352 at 2026-06-01T12:00:00.320Z/);
    assert.match(violations, /webhook endpoint 1 \(customer 0\): the simulator could not delete it at the end of the run \(503 Service Unavailable\); delete w0 by hand/);
  });

  it("catches a bad signature, a trailer's events out of order, and another customer's trailer", () => {
    const record = hookedRecord();
    const endpoint = record.webhooks!.endpoints[0]!;
    endpoint.deliveries.reverse();
    endpoint.deliveries[0]!.invalid = 'no v1 signature in webhook-signature matches the body';
    record.webhooks!.endpoints[1]!.deliveries[0]!.events[0]!.vin = VIN_A;
    const violations = checkWebhookDelivery(record).violations.join('\n');
    assert.match(violations, /webhook endpoint 1 \(customer 0\): 1 of 3 deliveries would be refused by a Standard Webhooks receiver; first: msg_1HGCM82633A004352_2: no v1 signature/);
    // Its updates count as not arrived, as a receiver refusing them would have them.
    assert.match(violations, /webhook endpoint 1 \(customer 0\) never received 1 of 3 update/);
    assert.match(violations, /webhook endpoint 1 \(customer 0\) received 1 event\(s\) older than one it already had for the same trailer; first: trailer.updated of VIN 1HGCM82633A004352 at 2026-06-01T12:00:00.220Z/);
    assert.match(violations, /webhook endpoint 2 \(customer 1\) received 1 event\(s\) of trailers that are not its customer's; first: VIN 1HGCM82633A004352/);
  });

  it('expects at an endpoint only the updates made after it was registered', () => {
    const record = hookedRecord();
    const endpoint = record.webhooks!.endpoints[0]!;
    endpoint.registeredAt = T0 + 250;
    endpoint.deliveries = endpoint.deliveries.slice(1);
    assert.deepEqual(checkWebhookDelivery(record).violations, []);
  });
});
