/**
 * `simulate merge` with webhooks: each shard's endpoints are kept (numbered after the ones before)
 * and held, like its subscribers, to the updates of every shard's trailers of their customer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ArrivalSchedule } from '../../simulator/arrival-schedule.ts';
import { checkWebhookDelivery } from '../../simulator/invariants.ts';
import { mergeRecords, recordFileOf } from '../../simulator/merge-runs.ts';
import type { RunRecord } from '../../simulator/run-record.ts';
import { hookedRecord, VIN_A, VIN_B } from './support/run-records.ts';

/** Shard `index` of 2 drove `vin` only; its endpoints (one per customer) received every shard's updates. */
function shard(index: number, vin: string, change?: (record: RunRecord) => void) {
  const record = hookedRecord();
  record.sends = record.sends.filter((send) => send.vin === vin);
  record.webhooks!.stray = index;
  change?.(record);
  return { name: `shard-${index}.json`, content: recordFileOf(record, ArrivalSchedule.constant(10, 1000), [], { index, count: 2 }) };
}

describe('merging the records of shards with webhooks', () => {
  it("keeps every shard's endpoints and judges each against the whole run's updates of its customer", () => {
    const { record } = mergeRecords([shard(1, VIN_A), shard(2, VIN_B)]);
    assert.deepEqual(record.webhooks!.endpoints.map((endpoint) => [endpoint.index, endpoint.customer]), [[0, 0], [1, 1], [2, 0], [3, 1]]);
    assert.equal(record.webhooks!.stray, 3);
    const check = checkWebhookDelivery(record);
    assert.deepEqual(check.violations, []);
    // Customer 0's 3 updates (shard 1's) at its 2 endpoints, customer 1's 2 (shard 2's) at its 2.
    assert.match(check.judged, /^10 expected events at 4 endpoints/);
  });

  it("catches an update of one shard missing at another shard's endpoint", () => {
    const { record } = mergeRecords([shard(1, VIN_A), shard(2, VIN_B, (own) => own.webhooks!.endpoints[0]!.deliveries.pop())]);
    assert.match(checkWebhookDelivery(record).violations.join('\n'), /webhook endpoint 3 \(customer 0\) never received 1 of 3 update/);
  });
});
