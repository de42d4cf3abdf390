import assert from 'node:assert/strict';
import { comparePositions } from '../../core/live-replay.ts';
import { describe, it } from 'node:test';
import { TrailwireError } from '../../core/errors.ts';
import { liveEventOf, type LiveTrailerEvent, MemoryLiveBus } from '../../core/live-bus.ts';
import { endStreamsOnRotation, LiveHub, type RotationSource } from '../../core/live-hub.ts';
import type { LiveSink } from '../../core/live-subscriber.ts';
import type { Audience, Fleet } from '../../core/model.ts';
import { runLiveBusConformance, sampleEvent } from '../conformance/live-bus.ts';

runLiveBusConformance({
  name: 'MemoryLiveBus',
  // In-process: every participant shares the one object.
  openBuses: async (count, onListenerError) => Array(count).fill(new MemoryLiveBus({ onListenerError })),
  checksListenerErrors: true,
});

/** A sink whose transport takes `capacity` writes before it reports full. */
class FakeSink implements LiveSink {
  written: LiveTrailerEvent[] = [];
  ended: TrailwireError[] = [];
  private room: number;

  constructor(capacity = Infinity) {
    this.room = capacity;
  }

  write(event: LiveTrailerEvent): boolean {
    this.written.push(event);
    this.room--;
    return this.room > 0;
  }

  end(reason: TrailwireError): void {
    this.ended.push(reason);
  }

  /** The transport flushed and can take `capacity` more. */
  free(capacity: number): void {
    this.room = capacity;
  }
}

function eventFor(customerId: string, trailer: string, ts: number): LiveTrailerEvent {
  const base = sampleEvent(ts, { customerId });
  return { ...base, trailer: { ...base.trailer, id: trailer } };
}

const described = (events: LiveTrailerEvent[]) => events.map((event) => `${event.trailer.id}@${event.ts}`);

describe('LiveHub fan-out', () => {
  it('does not write again an update a resume\'s replay held that arrives after the stream started (the window read before the message)', async () => {
    const bus = new MemoryLiveBus();
    const hub = new LiveHub({ bus });
    const earlier = new FakeSink();
    await hub.subscribe('customer-a', earlier);
    await hub.publish(eventFor('customer-a', 't1', 1));
    await hub.publish(eventFor('customer-a', 't2', 2));
    const [first, second] = earlier.written as [LiveTrailerEvent, LiveTrailerEvent];
    const resumed = new FakeSink();
    const subscription = await hub.subscribe('customer-a', resumed, { held: true });
    // The replay after `first` holds `second`; its bus message reaches this hub only after start.
    subscription.start([second], second.position!);
    (subscription as unknown as { offer(event: LiveTrailerEvent): void }).offer(second);
    await hub.publish(eventFor('customer-a', 't3', 3));
    assert.deepEqual(described(resumed.written), ['t2@2', 't3@3']);
    assert.ok(comparePositions(first.position!, second.position!) < 0);
  });

  it('delivers an event only to the subscribers of its customer, the same object to each', async () => {
    const hub = new LiveHub();
    const a1 = new FakeSink();
    const a2 = new FakeSink();
    const b = new FakeSink();
    await hub.subscribe('customer-a', a1);
    await hub.subscribe('customer-a', a2);
    await hub.subscribe('customer-b', b);

    const event = eventFor('customer-a', 't1', 1);
    await hub.publish(event);

    assert.deepEqual(a1.written.map(({ position: _position, ...rest }) => rest), [event]);
    // Identity matters: the gRPC adapter encodes each event once and reuses the bytes.
    assert.equal(a2.written[0], a1.written[0]);
    assert.deepEqual(b.written, []);
    assert.deepEqual(hub.stats(), { subscribers: 3, customers: 2, pendingTrailers: 0, congestedSubscribers: 0 });
  });

  it('delivers the events of several hubs sharing a bus to the subscribers of each', async () => {
    const bus = new MemoryLiveBus();
    const here = new LiveHub({ bus });
    const there = new LiveHub({ bus });
    const sinkHere = new FakeSink();
    const sinkThere = new FakeSink();
    await here.subscribe('customer-a', sinkHere);
    await there.subscribe('customer-a', sinkThere);

    await here.publish(eventFor('customer-a', 't1', 1));
    assert.equal(sinkHere.written.length, 1);
    assert.equal(sinkThere.written.length, 1);

    // Closing a hub leaves a bus it did not create open for the others.
    await here.close();
    await bus.publish(eventFor('customer-a', 't1', 2));
    assert.equal(sinkThere.written.length, 2);
    assert.equal(sinkHere.written.length, 1);
  });

  it('stops delivering after unsubscribe, without ending the sink, and forgets the customer', async () => {
    const hub = new LiveHub();
    const sink = new FakeSink();
    const subscription = await hub.subscribe('customer-a', sink);
    subscription.unsubscribe();
    subscription.unsubscribe();
    await hub.publish(eventFor('customer-a', 't1', 1));
    assert.deepEqual(sink.written, []);
    assert.deepEqual(sink.ended, []);
    assert.equal(subscription.active, false);
    assert.equal(hub.subscriberCount('customer-a'), 0);
    assert.equal(hub.stats().customers, 0);
  });

  it('ends the stream of a sink that throws and keeps delivering to the others', async () => {
    const hub = new LiveHub();
    const broken: LiveSink & { ended: TrailwireError[] } = {
      ended: [],
      write() {
        throw new Error('socket gone');
      },
      end(reason) {
        this.ended.push(reason);
      },
    };
    const healthy = new FakeSink();
    await hub.subscribe('customer-a', broken);
    await hub.subscribe('customer-a', healthy);
    await hub.publish(eventFor('customer-a', 't1', 1));
    await hub.publish(eventFor('customer-a', 't1', 2));
    assert.equal(broken.ended.length, 1);
    assert.equal(broken.ended[0]!.code, 'internal');
    assert.equal(healthy.written.length, 2);
    assert.equal(hub.subscriberCount('customer-a'), 1);
  });
});

describe('LiveHub back-pressure', () => {
  it('coalesces a congested subscriber to the latest update per trailer and flushes them in position order on drain', async () => {
    const hub = new LiveHub();
    const slow = new FakeSink(1); // full after one write
    const fast = new FakeSink();
    const subscription = await hub.subscribe('customer-a', slow);
    await hub.subscribe('customer-a', fast);

    const published = [
      eventFor('customer-a', 't1', 1), // written; the transport is now full
      eventFor('customer-a', 't2', 2),
      eventFor('customer-a', 't3', 3),
      eventFor('customer-a', 't2', 4), // replaces t2@2, moving t2 behind t3
      eventFor('customer-a', 't1', 5),
      eventFor('customer-a', 't3', 6), // replaces t3@3, moving t3 behind t1
    ];
    for (const event of published) await hub.publish(event);

    assert.deepEqual(described(fast.written), described(published), 'the fast subscriber sees every update at once');
    assert.deepEqual(described(slow.written), ['t1@1']);
    assert.equal(subscription.pendingTrailers, 3);
    assert.deepEqual(hub.stats(), { subscribers: 2, customers: 1, pendingTrailers: 3, congestedSubscribers: 1 });

    // Room for two: written in the order of their newest updates (position order, which makes
    // resuming after the last one received exact), t2@4 and t1@5; t3@6 waits for the next drain.
    slow.free(2);
    subscription.drained();
    assert.deepEqual(described(slow.written), ['t1@1', 't2@4', 't1@5']);
    assert.deepEqual(slow.written.map((event) => event.position), [...slow.written.map((event) => event.position!)].sort(comparePositions), 'positions only increase');
    assert.equal(subscription.pendingTrailers, 1);

    // New updates still queue behind the pending ones, so one trailer's updates never reorder.
    await hub.publish(eventFor('customer-a', 't1', 7));
    assert.equal(subscription.pendingTrailers, 2);

    slow.free(Infinity);
    subscription.drained();
    assert.deepEqual(described(slow.written), ['t1@1', 't2@4', 't1@5', 't3@6', 't1@7']);
    assert.equal(subscription.pendingTrailers, 0);

    // Writable again: updates go straight through.
    await hub.publish(eventFor('customer-a', 't2', 8));
    assert.deepEqual(described(slow.written).at(-1), 't2@8');
  });

  it('ends a subscriber that falls more than maxPendingTrailers behind with rate_limited', async () => {
    const hub = new LiveHub({ maxPendingTrailers: 3 });
    const slow = new FakeSink(1);
    const fast = new FakeSink();
    const subscription = await hub.subscribe('customer-a', slow);
    await hub.subscribe('customer-a', fast);

    await hub.publish(eventFor('customer-a', 't0', 0)); // fills the transport
    for (const [index, trailer] of ['t1', 't2', 't3'].entries()) await hub.publish(eventFor('customer-a', trailer, index + 1));
    // Updates of trailers already pending do not count against the bound.
    await hub.publish(eventFor('customer-a', 't1', 4));
    assert.equal(subscription.pendingTrailers, 3);
    assert.equal(slow.ended.length, 0);

    await hub.publish(eventFor('customer-a', 't4', 5));
    assert.equal(slow.ended.length, 1);
    assert.equal(slow.ended[0]!.code, 'rate_limited');
    assert.equal(subscription.active, false);
    assert.equal(subscription.pendingTrailers, 0, 'its pending updates are released');
    assert.equal(hub.subscriberCount('customer-a'), 1);
    assert.equal(fast.written.length, 6);

    subscription.drained(); // a late drain of an ended subscriber writes nothing
    assert.equal(slow.written.length, 1);
  });

  it("listens on the bus to a customer only while it has streams here, so a process hears only its clients' customers (issue 41)", async () => {
    const bus = new MemoryLiveBus();
    const listening = new Map<string, number>();
    const listen = bus.listen.bind(bus);
    bus.listen = async (customerId, listener) => {
      listening.set(customerId, (listening.get(customerId) ?? 0) + 1);
      const stop = await listen(customerId, listener);
      return () => {
        listening.set(customerId, listening.get(customerId)! - 1);
        stop();
      };
    };
    const hub = new LiveHub({ bus });
    const [first, second] = [new FakeSink(), new FakeSink()];
    const one = await hub.subscribe('customer-a', first);
    const two = await hub.subscribe('customer-a', second);
    assert.deepEqual([...listening], [['customer-a', 1]], "one listening per customer, not per stream, and none for customers without streams");
    await bus.publish(sampleEvent(1));
    await bus.publish(sampleEvent(2, { customerId: 'customer-b' }));
    assert.deepEqual([first.written.map((event) => event.ts), second.written.map((event) => event.ts)], [[1], [1]]);
    one.unsubscribe();
    assert.equal(listening.get('customer-a'), 1, 'still listening while a stream is open');
    two.unsubscribe();
    assert.equal(listening.get('customer-a'), 0, 'no longer listening once the last stream ended');
    const again = new FakeSink();
    await hub.subscribe('customer-a', again);
    await bus.publish(sampleEvent(3));
    assert.deepEqual(again.written.map((event) => event.ts), [3]);
    await hub.close();
    assert.equal(listening.get('customer-a'), 0, 'close stops listening');
  });

  it("gives a customer's first stream the window's newest position, whoever's update it was", async () => {
    const hub = new LiveHub();
    await hub.publish(sampleEvent(1, { customerId: 'customer-b' }));
    const newest = await hub.newestPosition();
    assert.ok(newest !== null);
    const subscription = await hub.subscribe('customer-a', new FakeSink());
    assert.equal(subscription.positionAtSubscribe, newest, "what a snapshot read now covers: every update before it, of every customer");
    await hub.close();
  });

  it('rejects a bad maxPendingTrailers by name', () => {
    assert.throws(() => new LiveHub({ maxPendingTrailers: 0 }), /maxPendingTrailers/);
    assert.throws(() => new LiveHub({ maxPendingTrailers: 1.5 }), /maxPendingTrailers/);
  });
});

describe('LiveHub ending streams', () => {
  it('endCustomer ends every stream of that customer only, with the reason given', async () => {
    const hub = new LiveHub();
    const a1 = new FakeSink();
    const a2 = new FakeSink();
    const b = new FakeSink();
    await hub.subscribe('customer-a', a1);
    await hub.subscribe('customer-a', a2);
    await hub.subscribe('customer-b', b);
    const reason = new TrailwireError('invalid_token', 'rotated');

    assert.equal(hub.endCustomer('customer-a', reason), 2);
    assert.deepEqual(a1.ended, [reason]);
    assert.deepEqual(a2.ended, [reason]);
    assert.deepEqual(b.ended, []);
    assert.equal(hub.endCustomer('customer-a', reason), 0);

    await hub.publish(eventFor('customer-a', 't1', 1));
    await hub.publish(eventFor('customer-b', 't9', 2));
    assert.deepEqual(a1.written, []);
    assert.equal(b.written.length, 1);
  });

  it('close ends every stream with unavailable and refuses new work', async () => {
    const hub = new LiveHub();
    const a = new FakeSink();
    const b = new FakeSink();
    await hub.subscribe('customer-a', a);
    await hub.subscribe('customer-b', b);
    await hub.close();
    await hub.close();
    assert.deepEqual([...a.ended, ...b.ended].map((reason) => reason.code), ['unavailable', 'unavailable']);
    assert.equal(hub.stats().subscribers, 0);
    await assert.rejects(hub.publish(eventFor('customer-a', 't1', 1)), { code: 'unavailable' });
    await assert.rejects(hub.subscribe('customer-a', new FakeSink()), { code: 'unavailable' });
  });

  it('endStreamsOnRotation ends a rotated customer\'s streams with invalid_token and ignores partners', async () => {
    const listeners = new Set<(audience: Audience, id: string) => void>();
    const auth: RotationSource = {
      onRotation(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    const rotate = (audience: Audience, id: string) => listeners.forEach((listener) => listener(audience, id));
    const hub = new LiveHub();
    const sink = new FakeSink();
    await hub.subscribe('principal-1', sink);

    const undo = endStreamsOnRotation(auth, hub);
    rotate('partners', 'principal-1'); // same id, other audience: not this customer
    assert.equal(sink.ended.length, 0);
    rotate('customers', 'principal-1');
    assert.deepEqual(sink.ended.map((reason) => reason.code), ['invalid_token']);

    undo();
    const later = new FakeSink();
    await hub.subscribe('principal-1', later);
    rotate('customers', 'principal-1');
    assert.deepEqual(later.ended, []);
  });
});

describe('liveEventOf', () => {
  const trailer = sampleEvent(1).trailer;
  const fleet: Fleet = { id: 7, customerId: 'customer-a', name: 'Northern reefers', createdAt: 0 };

  it('addresses the event to the customer of the trailer\'s fleet', () => {
    assert.deepEqual(liveEventOf({ trailer, fleet }, 1234), {
      customerId: 'customer-a',
      fleet: { id: 7, name: 'Northern reefers' },
      trailer,
      ts: 1234,
    });
  });

  it('answers null for an unassigned trailer, which no customer may see', () => {
    assert.equal(liveEventOf({ trailer: { ...trailer, fleetId: null }, fleet: null }, 1234), null);
  });
});

describe('MemoryLiveBus', () => {
  it('keeps delivering to the other listeners when one throws, and reports the error', async () => {
    const errors: unknown[] = [];
    const bus = new MemoryLiveBus({ onListenerError: (error) => errors.push(error) });
    const received: number[] = [];
    await bus.listen('customer-a', () => {
      throw new Error('listener bug');
    });
    await bus.listen('customer-a', (event) => received.push(event.ts));
    await bus.publish(sampleEvent(1));
    assert.deepEqual(received, [1]);
    assert.equal((errors[0] as Error).message, 'listener bug');
  });
});
