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
  checkWindowLimits,
  violationsOf,
} from '../../simulator/invariants.ts';
import type { RunRecord, SendRecord } from '../../simulator/run-record.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0); // a window boundary
const VIN_A = '1HGCM82633A004352';
const VIN_B = '2FTRX18W1XCA01212';

/**
 * A clean record: gps-basic limited to 3 per 2 s; VIN A (customer 0) sends 5 in one window (3
 * accepted, 2 limited), VIN B (customer 1) sends 2 (both accepted); every accepted payload processed
 * and delivered to its customer's subscriber; heartbeats every 100 ms.
 */
function cleanRecord(): RunRecord {
  const sends: SendRecord[] = [];
  const outcomes: RunRecord['outcomes'] = {};
  const send = (vin: string, group: number, k: number, status: number) => {
    const sentAt = T0 + 200 + k * 100;
    const record: SendRecord = { product: 'gps-basic', vin, group, plannedAt: sentAt, sentAt, answeredAt: sentAt + 5, status };
    if (status === 202) {
      record.id = `${vin}-${k}`;
      outcomes[record.id] = { status: 'processed', receivedAt: sentAt + 2, processedAt: sentAt + 20 };
    }
    sends.push(record);
  };
  [202, 202, 202, 429, 429].forEach((status, k) => send(VIN_A, 0, k, status));
  [202, 202].forEach((status, k) => send(VIN_B, 1, k, status));
  const heartbeats = Array.from({ length: 21 }, (_, i) => T0 + i * 100);
  const updatesOf = (vin: string) =>
    sends.filter((s) => s.vin === vin && s.status === 202).map((s) => ({ vin, trailerId: `t-${vin}`, fleetId: 1, ts: outcomes[s.id!]!.processedAt!, receivedAt: outcomes[s.id!]!.processedAt! + 3, connection: 0 }));
  return {
    scenario: 'burst',
    mode: 'embedded',
    seed: 7,
    limits: { 'gps-basic': { requests: 3, windowSeconds: 2 } },
    groups: [
      { product: 'gps-basic', vinIndex: 0, windowStart: T0, windowEnd: T0 + 2000, intent: 'over', planned: 5, limit: 3 },
      { product: 'gps-basic', vinIndex: 1, windowStart: T0, windowEnd: T0 + 2000, intent: 'under', planned: 2, limit: 3 },
    ],
    sends,
    outcomes,
    processingWaitMs: 1000,
    customers: [{ label: 'customer 0' }, { label: 'customer 1' }],
    ownership: { [VIN_A]: 0, [VIN_B]: 1 },
    subscribers: [
      { index: 0, transport: 'grpc', customer: 0, slow: false, connections: [{ startedAt: T0 - 5, heartbeats: [...heartbeats], endedAt: T0 + 2050, endCode: 1 }], updates: updatesOf(VIN_A) },
      { index: 1, transport: 'grpc', customer: 1, slow: false, connections: [{ startedAt: T0 - 5, heartbeats: [...heartbeats], endedAt: T0 + 2050, endCode: 1 }], updates: updatesOf(VIN_B) },
    ],
    heartbeatIntervalMs: 100,
    heartbeatSlackMs: 50,
    liveMarginMs: 10,
    clockOffsetMs: 0,
    rotations: [],
    startedAt: T0,
    trafficEndedAt: T0 + 1000,
    endedAt: T0 + 2050,
  };
}

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
