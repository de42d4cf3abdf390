/** The store's live snapshot (`core/live-snapshot.ts`): what it reads for a filter, counted by the store calls it makes. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../core/clock.ts';
import { checkLiveStreamRequest, MAX_FILTER_IDS } from '../../core/live-streams.ts';
import { SharedSnapshots, storeLiveSnapshot } from '../../core/live-snapshot.ts';
import { MemoryLiveBus } from '../../core/live-bus.ts';
import { sampleEvent } from '../conformance/live-bus.ts';
import type { Trailer } from '../../core/model.ts';
import { isTrailwireError } from '../../core/errors.ts';

const trailer = (id: string, fleetId: number): Trailer => ({ ...sampleEvent(0).trailer, id, fleetId });

/** A store of one customer with fleets 1 and 2 (two trailers each), counting the calls made to it. */
function countingStore() {
  const calls: string[] = [];
  const fleets = [{ id: 1, name: 'One' }, { id: 2, name: 'Two' }];
  const trailers = [trailer('t1', 1), trailer('t2', 1), trailer('t3', 2), trailer('t4', 2)];
  const store = {
    async listFleets(customerId: string, page: { afterId?: number; limit: number }) {
      calls.push('listFleets');
      return customerId === 'mine' ? fleets.filter((fleet) => fleet.id > (page.afterId ?? 0)).slice(0, page.limit) : [];
    },
    async listTrailers(customerId: string, fleetId: number, page: { afterId?: string; limit: number }) {
      calls.push('listTrailers');
      if (customerId !== 'mine') return [];
      return trailers.filter((t) => t.fleetId === fleetId && t.id > (page.afterId ?? '')).slice(0, page.limit);
    },
    async getTrailer(customerId: string, id: string) {
      calls.push('getTrailer');
      return customerId === 'mine' ? (trailers.find((t) => t.id === id) ?? null) : null;
    },
  };
  return { store: store as unknown as Parameters<typeof storeLiveSnapshot>[0], calls };
}

describe('storeLiveSnapshot', () => {
  it('reads every trailer of the customer, and for a filter only what it names', async () => {
    const { store } = countingStore();
    const read = storeLiveSnapshot(store, new ManualClock(0));
    assert.deepEqual((await read('mine', undefined)).map((event) => event.trailer.id), ['t1', 't2', 't3', 't4']);
    assert.deepEqual((await read('mine', { fleetIds: [2], trailerIds: ['t1', 't3'] })).map((event) => event.trailer.id), ['t3', 't4', 't1']);
    assert.deepEqual(await read('theirs', { fleetIds: [1], trailerIds: ['t1'] }), [], "never another customer's");
  });

  it('costs no query for fleet ids the customer does not own', async () => {
    const { store, calls } = countingStore();
    const foreign = Array.from({ length: MAX_FILTER_IDS }, (_, i) => 1_000 + i);
    assert.deepEqual(await storeLiveSnapshot(store, new ManualClock(0))('mine', { fleetIds: foreign }), []);
    assert.deepEqual(calls, ['listFleets'], 'one read of the customer\'s fleets, none per named id');
  });

  it('refuses a filter naming more ids than the cap before anything is read', () => {
    const ids = Array.from({ length: MAX_FILTER_IDS + 1 }, (_, i) => `t${i}`);
    assert.ok(MAX_FILTER_IDS <= 100, 'each named trailer is a store lookup: the cap bounds them');
    assert.throws(() => checkLiveStreamRequest({ filter: { trailerIds: ids } }), (error: unknown) => isTrailwireError(error) && error.code === 'validation_failed');
  });
});

describe('SharedSnapshots', () => {
  it('serves one read to the streams of a customer and filter that ask within shareMs, with the updates since', async () => {
    const clock = new ManualClock(1_000_000);
    const bus = new MemoryLiveBus({ clock });
    const positions: string[] = [];
    for (const customer of ['mine', 'theirs']) await bus.listen(customer, (event) => positions.push(event.position!));
    let reads = 0;
    const states = [{ ...sampleEvent(1, { customerId: 'mine' }), snapshot: true as const }];
    const shared = new SharedSnapshots(
      async () => {
        reads++;
        return states;
      },
      (customerId, position) => bus.replayAfter(customerId, position),
      clock,
      { shareMs: 2_000 },
    );
    await bus.publish(sampleEvent(0, { customerId: 'mine' }));
    // A reconnect storm: ten streams at once, then one a moment later after an update.
    const storm = await Promise.all(Array.from({ length: 10 }, () => shared.read('mine', undefined, positions[0]!)));
    assert.equal(reads, 1, 'the read in flight is shared');
    assert.ok(storm.every((snapshot) => snapshot.states === states && snapshot.position === positions[0] && snapshot.since.length === 0));
    clock.advance(1_000);
    await bus.publish(sampleEvent(2, { customerId: 'mine' }));
    await bus.publish(sampleEvent(3, { customerId: 'theirs' }));
    const later = await shared.read('mine', undefined, positions[2]!);
    assert.equal(reads, 1);
    assert.equal(later.position, positions[0], 'the position the shared states cover');
    assert.deepEqual(later.since.map((event) => event.ts), [2], "the customer's updates since, and no one else's");
    // Another filter, or past shareMs: read again.
    await shared.read('mine', { fleetIds: [7] }, positions[2]!);
    assert.equal(reads, 2);
    clock.advance(2_000);
    const fresh = await shared.read('mine', undefined, positions[2]!);
    assert.equal(reads, 3);
    assert.deepEqual([fresh.position, fresh.since], [positions[2], []]);
    await bus.close();
  });

  it('reads afresh without a window to replay from', async () => {
    const clock = new ManualClock(0);
    let reads = 0;
    const shared = new SharedSnapshots(async () => (reads++, []), null, clock);
    await shared.read('mine', undefined, null);
    await shared.read('mine', undefined, null);
    assert.equal(reads, 2);
  });

  it('shares a read with no replay while nothing was delivered since it, before the first update too', async () => {
    const clock = new ManualClock(0);
    let reads = 0;
    const replays: string[] = [];
    const shared = new SharedSnapshots(
      async () => (reads++, []),
      async (_customerId, position) => (replays.push(position), []),
      clock,
    );
    // A process that has delivered no update yet (its hub's newest position is null): a storm then is one read.
    const storm = await Promise.all(Array.from({ length: 5 }, () => shared.read('mine', undefined, null)));
    assert.equal(reads, 1);
    assert.ok(storm.every((snapshot) => snapshot.position === null && snapshot.since.length === 0));
    // An update came: the read before it covers no position to replay from, so it is read again, then shared.
    await shared.read('mine', undefined, '5-0');
    await shared.read('mine', undefined, '5-0');
    assert.equal(reads, 2);
    assert.deepEqual(replays, [], 'nothing delivered since the shared position: no replay asked');
    const later = await shared.read('mine', undefined, '6-0');
    assert.deepEqual([reads, replays, later.position], [2, ['5-0'], '5-0']);
  });
});
