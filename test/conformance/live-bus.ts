/**
 * The conformance suite every `LiveBus` passes (the in-process `MemoryLiveBus`, the Redis bus with
 * and without a replay window). A live bus is a channel of live updates per customer, so the channel
 * suite (`channel.ts`) runs first with its listeners listening to one customer — delivery to every
 * listener of every participant with all fields intact (a bus with a window adding a position to
 * each), publish order per publisher, a throwing listener stopping no other, unsubscribe, close —
 * and then what is the live bus's alone: a listener of one customer hears no other's, and the replay
 * window's rules (one position order for every listener of every participant, replay after a
 * position, a position never issued not resumable, the newest position covering what a listener
 * does not hear, an event published once by several participants delivered once). A test file calls
 * `runLiveBusConformance(...)` once per implementation, naming a reason for any skipped case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LiveBus, LiveTrailerEvent } from '../../core/live-bus.ts';
import { comparePositions, isPosition } from '../../core/live-replay.ts';
import { type ChannelCase, collect, runChannelConformance } from './channel.ts';

export type LiveBusCase =
  | ChannelCase
  | "a listener hears its own customer's events only"
  | 'replay: the newest position covers every event a new listener does not hear'
  | 'replay: one position order for every listener, replayed after a position'
  | 'replay: a position never issued is not resumable'
  | "replay: a customer's resume answers its own updates only, from any position the window holds"
  | 'replay: an event published once by several participants is delivered once';

export interface LiveBusConformanceOptions {
  /** Names the implementation in the test titles. */
  name: string;
  /**
   * Opens a fresh bus isolated from every other case (its own channel), answering one handle per
   * participant sharing it: `count` processes, in effect. An in-process bus may answer the same
   * object `count` times; a networked bus should answer `count` separate connections. The buses
   * report errors thrown by listeners to `onListenerError` when it is given (see
   * `checksListenerErrors`).
   */
  openBuses(count: number, onListenerError?: (error: unknown) => void): Promise<LiveBus[]>;
  /** Set when `openBuses` hands `onListenerError` to its buses (see the channel suite). */
  checksListenerErrors?: boolean;
  /** How long to wait for a delivery before failing. Default 2,000 ms. */
  deliveryTimeoutMs?: number;
  /** Cases this implementation skips, each with the reason. */
  skip?: Partial<Record<LiveBusCase, string>>;
}

/** Registers the suite's cases with `node:test`: the channel suite's, then the replay window's. */
export function runLiveBusConformance(options: LiveBusConformanceOptions): void {
  const timeoutMs = options.deliveryTimeoutMs ?? 2_000;
  runChannelConformance<LiveTrailerEvent, LiveBus>({
    name: `LiveBus: ${options.name}`,
    openChannels: options.openBuses,
    listen: (bus, listener) => bus.listen('customer-a', listener),
    checksListenerErrors: options.checksListenerErrors,
    sample: sampleEvent,
    numberOf: (event) => event.ts,
    // A bus with a replay window adds the event's position; one without adds nothing.
    asPublished: ({ position, ...event }, bus) => {
      if (bus.replays) assert.ok(isPosition(position), `a position, got ${position}`);
      else assert.equal(position, undefined);
      return event;
    },
    deliveryTimeoutMs: options.deliveryTimeoutMs,
    skip: options.skip,
  });

  /** A recording listener of the customers' events on `bus`, in the order the bus delivers them. */
  const hear = (bus: LiveBus, ...customers: string[]) =>
    collect<LiveTrailerEvent>(async (listener) => {
      const stops: Array<() => void> = [];
      for (const customer of customers.length > 0 ? customers : ['customer-a']) stops.push(await bus.listen(customer, listener));
      return () => stops.forEach((stop) => stop());
    });

  describe(`LiveBus: ${options.name}`, () => {
    it("a listener hears its own customer's events only", { skip: options.skip?.["a listener hears its own customer's events only"] ?? false }, async () => {
      const buses = await options.openBuses(2);
      try {
        const [one, two] = buses;
        const ofB = await hear(two!, 'customer-b');
        const ofA = await hear(two!, 'customer-a');
        await one!.publish(sampleEvent(1, { customerId: 'customer-a' }));
        await one!.publish(sampleEvent(2, { customerId: 'customer-b' }));
        await one!.publish(sampleEvent(3, { customerId: 'customer-a' }));
        await one!.publish(sampleEvent(4, { customerId: 'customer-b' })); // the marker: b's listener has heard all it will
        assert.deepEqual((await ofB.next(2, timeoutMs)).map((event) => event.ts), [2, 4]);
        assert.deepEqual((await ofA.next(2, timeoutMs)).map((event) => event.ts), [1, 3]);
        assert.equal(ofB.received.length, 2, "customer a's events never reached b's listener");
      } finally {
        await Promise.all([...new Set(buses)].map((bus) => bus.close()));
      }
    });
  });

  const replayCase = (name: LiveBusCase, body: (buses: LiveBus[]) => Promise<void>) =>
    it(name, { skip: options.skip?.[name] ?? false }, async (t) => {
      const buses = await options.openBuses(2);
      try {
        // A bus without a window has nothing to replay: said so, not passed silently.
        if (!buses[0]!.replays) return t.skip('this bus keeps no replay window');
        await body(buses);
      } finally {
        await Promise.all([...new Set(buses)].map((bus) => bus.close()));
      }
    });

  describe(`LiveBus replay window: ${options.name}`, () => {
    replayCase('replay: one position order for every listener, replayed after a position', async ([one, two]) => {
      const hearOne = await hear(one!);
      const hearTwo = await hear(two!);
      // Two participants (two processes) publishing at once: their events may interleave, but every
      // listener hears one order, the order of the positions, and the window replays exactly it.
      await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? one! : two!).publish(sampleEvent(i))));
      const heardOne = (await hearOne.next(100, timeoutMs)).map((event) => event.position!);
      const heardTwo = (await hearTwo.next(100, timeoutMs)).map((event) => event.position!);
      assert.deepEqual(heardOne, heardTwo);
      assert.deepEqual([...heardOne].sort(comparePositions), heardOne, 'positions increase');
      const replayed = await two!.replayAfter('customer-a', heardOne[9]!);
      assert.deepEqual(replayed?.map((event) => event.position), heardOne.slice(10));
      assert.deepEqual(replayed?.map(({ position: _, ...event }) => event), hearOne.received.slice(10).map(({ position: _, ...event }) => event));
    });

    replayCase('replay: the newest position covers every event a new listener does not hear', async ([one, two]) => {
      assert.equal(await two!.newestPosition(), null, 'a window that issued nothing has no newest position');
      await one!.publish(sampleEvent(1, { customerId: 'customer-b' }));
      await one!.publish(sampleEvent(2));
      // Listening from here: the newest position read now covers events 1 and 2 (the replay has them), the listener hears what follows.
      const late = await hear(two!);
      const newest = await two!.newestPosition();
      assert.ok(newest !== null && isPosition(newest));
      await one!.publish(sampleEvent(3));
      const [third] = await late.next(1, timeoutMs);
      assert.equal(third!.ts, 3);
      assert.ok(comparePositions(third!.position!, newest) > 0, 'what the listener hears is after the newest position it read');
      assert.deepEqual((await two!.replayAfter('customer-a', newest))?.map((event) => event.ts), [3]);
      assert.equal(late.received.filter((event) => comparePositions(event.position!, newest) <= 0).length, 0, 'nothing at or before it is heard: it was published before listening');
    });

    replayCase('replay: a position never issued is not resumable', async ([bus]) => {
      await bus!.publish(sampleEvent(1));
      assert.equal(await bus!.replayAfter('customer-a', '1-0'), null);
      assert.equal(await bus!.replayAfter('customer-a', '99999999999999-0'), null, 'a position from the future');
    });

    replayCase("replay: a customer's resume answers its own updates only, from any position the window holds", async ([one, two]) => {
      const both = await hear(one!, 'customer-a', 'customer-b');
      // Customer b's updates surround a's: a's resume after b's first position answers a's after it.
      for (let i = 0; i < 30; i++) await (i % 2 ? one! : two!).publish(sampleEvent(i, { customerId: i % 3 === 0 ? 'customer-a' : 'customer-b' }));
      const heard = await both.next(30, timeoutMs);
      const from = heard.find((event) => event.customerId === 'customer-b')!.position!;
      const expected = heard.filter((event) => event.customerId === 'customer-a' && comparePositions(event.position!, from) > 0);
      assert.deepEqual((await two!.replayAfter('customer-a', from))?.map((event) => event.position), expected.map((event) => event.position));
      assert.deepEqual(await one!.replayAfter('customer-c', from), [], 'a customer with no update since: nothing to replay, but resumable');
    });

    replayCase('replay: an event published once by several participants is delivered once', async ([one, two]) => {
      const heard = await hear(one!);
      const key = `change:${Math.random()}`;
      await one!.publish(sampleEvent(1), { changeId: key });
      await two!.publish(sampleEvent(1), { changeId: key });
      await one!.publish(sampleEvent(2)); // the marker: had the second arrived, it would be before
      const [first, marker] = await heard.next(2, timeoutMs);
      assert.deepEqual([first!.ts, marker!.ts], [1, 2]);
    });
  });
}

/** A full event (every optional field present but one null) whose `ts` is `n`. */
export function sampleEvent(n: number, overrides: Partial<LiveTrailerEvent> = {}): LiveTrailerEvent {
  return {
    customerId: 'customer-a',
    fleet: { id: 7, name: 'Northern reefers' },
    trailer: {
      id: `6f1c2a4e-0000-4000-8000-${String(n % 1000).padStart(12, '0')}`,
      fleetId: 7,
      unitId: null,
      vin: '1M8GDM9AXKP042788',
      active: true,
      statusName: 'Warning',
      statusDate: Date.UTC(2026, 0, 1, 10),
      faultedDevices: 0,
      warningDevices: 2,
      telemetry: { timestamp: Date.UTC(2026, 0, 1, 11), lat: 51.5, long: -0.12, speed: 48.5, heading: 'NE' },
      createdAt: Date.UTC(2025, 11, 1),
    },
    ts: n,
    ...overrides,
  };
}
