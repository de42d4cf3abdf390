/**
 * The simulator's read-back of accepted payloads: a hundred ids of one partner a request (the bulk
 * status read, one read each against the partner's limit), not one request a payload.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IntakeStatus, IntakeStatuses } from '../../simulator/client/http-client.ts';
import { readBackOutcomes } from '../../simulator/read-back.ts';
import type { SendRecord } from '../../simulator/run-record.ts';

const RECEIVED = '2026-06-01T12:00:00.000Z';
const PROCESSED = '2026-06-01T12:00:00.250Z';

function send(product: string, id: string | undefined, status = 202): SendRecord {
  return { product, vin: '1HGCM82633A004352', group: 0, plannedAt: 0, sentAt: 0, answeredAt: 1, status, ...(id === undefined ? {} : { id }) };
}

/** A partner's client whose bulk status reads are recorded; `answer` says each id's state (undefined: not found). */
function partner(answer: (id: string) => IntakeStatus['status'] | undefined) {
  const reads: string[][] = [];
  const client = {
    async intakeStatuses(ids: readonly string[]) {
      reads.push([...ids]);
      const body: IntakeStatuses = { data: [], notFound: [] };
      for (const id of ids) {
        const status = answer(id);
        if (status === undefined) body.notFound.push(id);
        else body.data.push({ id, vin: '1HGCM82633A004352', product: 'x', status, receivedAt: RECEIVED, processedAt: status === 'processed' ? PROCESSED : null, attempts: 1, error: null });
      }
      return { status: 200, headers: new Headers(), body };
    },
  };
  return { client, reads };
}

describe('the read-back of accepted payloads', () => {
  it('reads 1,050 payloads of two partners in 12 requests of at most 100 ids, each id once, and reads again only those not settled', async () => {
    const gpsIds = Array.from({ length: 700 }, (_, i) => `gps-${i}`);
    const tpmsIds = Array.from({ length: 350 }, (_, i) => `tpms-${i}`);
    const firstAsked = new Set<string>();
    // The first read of the last 50 tpms payloads finds them queued; the next, processed.
    const gps = partner(() => 'processed');
    const tpms = partner((id) => (Number(id.slice(5)) >= 300 && !firstAsked.has(id) ? (firstAsked.add(id), 'queued') : 'processed'));
    const sends = [
      ...gpsIds.map((id) => send('gps-basic', id)),
      ...tpmsIds.map((id) => send('tpms', id)),
      send('gps-basic', gpsIds[0]), // the same id twice is asked once
      send('gps-basic', undefined, 429), // not accepted: not read
    ];
    const progress = { settled: 0, accepted: 0 };
    const outcomes = await readBackOutcomes(sends, new Map([['gps-basic', gps.client], ['tpms', tpms.client]]), 10_000, progress);

    assert.deepEqual(gps.reads.map((ids) => ids.length), [100, 100, 100, 100, 100, 100, 100]);
    assert.deepEqual(tpms.reads.map((ids) => ids.length), [100, 100, 100, 50, 50], 'the 50 still queued are read again, together');
    assert.deepEqual(gps.reads.flat().sort(), [...gpsIds].sort(), 'each gps id asked once');
    assert.deepEqual(tpms.reads.at(-1), tpmsIds.slice(300));
    assert.deepEqual(progress, { settled: 1050, accepted: 1050 });
    assert.equal(Object.keys(outcomes).length, 1050);
    assert.deepEqual(outcomes['tpms-349'], { status: 'processed', receivedAt: Date.parse(RECEIVED), processedAt: Date.parse(PROCESSED), error: null });
  });

  it('keeps an id the server does not know, or whose read failed, as unknown with the reason', async () => {
    const known = partner((id) => (id === 'lost' ? undefined : 'failed'));
    const failing = {
      async intakeStatuses(): Promise<never> {
        throw new Error('503 Service Unavailable: store down');
      },
    };
    const progress = { settled: 0, accepted: 0 };
    const outcomes = await readBackOutcomes([send('gps-basic', 'lost'), send('gps-basic', 'dead'), send('tpms', 't-1')], new Map([['gps-basic', known.client], ['tpms', failing]]), 0, progress);
    assert.equal(outcomes.lost?.status, 'unknown');
    assert.match(outcomes.lost?.error ?? '', /does not know this intake id/);
    assert.equal(outcomes.dead?.status, 'failed');
    assert.deepEqual(outcomes['t-1'], { status: 'unknown', error: '503 Service Unavailable: store down' });
    assert.deepEqual(progress, { settled: 1, accepted: 3 }, 'one pass when the wait is over');
    assert.equal(known.reads.length, 1);
  });
});
