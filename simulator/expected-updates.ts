/**
 * The updates a run expects the server to have made: one per processed payload, named by its VIN and
 * its processed time — the time the LiveFeed's `ts`, the SSE event's `updatedAt` and a webhook
 * event's `timestamp` all carry, so one key matches a payload to what each transport delivered.
 * The live checks, the webhook checks and the settling wait read them from here.
 */
import type { RunRecord } from './run-record.ts';

export interface ExpectedUpdate {
  key: string;
  vin: string;
  /** The payload's processed time (server epoch ms). */
  ts: number;
  /** The customer owning the VIN; undefined for a VIN in no customer's fleet. */
  owner: number | undefined;
  /** When the intake request was answered 202 (client epoch ms). */
  acceptedAt: number;
}

/** The key of an update: its trailer's VIN and its time. */
export function updateKey(vin: string, ts: number): string {
  return `${vin}|${ts}`;
}

/** One expected update per processed payload of `record.sends`, in send order. */
export function expectedUpdates(record: Pick<RunRecord, 'sends' | 'outcomes' | 'ownership'>): ExpectedUpdate[] {
  const expected: ExpectedUpdate[] = [];
  for (const send of record.sends) {
    if (send.status !== 202 || !send.id) continue;
    const outcome = record.outcomes[send.id];
    if (outcome?.status !== 'processed' || outcome.processedAt === undefined) continue;
    expected.push({ key: updateKey(send.vin, outcome.processedAt), vin: send.vin, ts: outcome.processedAt, owner: record.ownership[send.vin], acceptedAt: send.answeredAt });
  }
  return expected;
}
