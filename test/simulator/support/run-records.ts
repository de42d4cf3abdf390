/**
 * Test support: made-up run records for the checks and the merge — a clean run of two VINs of two
 * customers, and the same with a webhook endpoint per customer that received everything.
 */
import type { RunRecord, SendRecord, WebhookDeliveryRecord } from '../../../simulator/run-record.ts';

export const T0 = Date.UTC(2026, 5, 1, 12, 0, 0); // a window boundary
export const VIN_A = '1HGCM82633A004352';
export const VIN_B = '2FTRX18W1XCA01212';

/**
 * A clean record: gps-basic limited to 3 per 2 s; VIN A (customer 0) sends 5 in one window (3
 * accepted, 2 limited), VIN B (customer 1) sends 2 (both accepted); every accepted payload processed
 * and delivered to its customer's subscriber; heartbeats every 100 ms.
 */
export function cleanRecord(): RunRecord {
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

/**
 * The clean record with a webhook endpoint per customer, registered before the traffic, each
 * receiving its customer's updates in one delivery per update, signed (no `invalid`), then deleted.
 */
export function hookedRecord(): RunRecord {
  const record = cleanRecord();
  const deliveriesOf = (vin: string): WebhookDeliveryRecord[] =>
    record.sends
      .filter((send) => send.vin === vin && send.status === 202)
      .map((send, k) => {
        const ts = record.outcomes[send.id!]!.processedAt!;
        return { webhookId: `msg_${vin}_${k}`, receivedAt: ts + 1000, events: [{ type: 'trailer.updated', vin, ts, digest: `${vin}-${ts}` }] };
      });
  record.webhooks = {
    endpoints: [
      { index: 0, customer: 0, id: 'w0', url: 'http://127.0.0.1:1/r/1', registeredAt: T0 - 100, deliveries: deliveriesOf(VIN_A), deleted: true },
      { index: 1, customer: 1, id: 'w1', url: 'http://127.0.0.1:1/r/2', registeredAt: T0 - 100, deliveries: deliveriesOf(VIN_B), deleted: true },
    ],
    stray: 0,
  };
  return record;
}

