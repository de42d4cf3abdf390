/**
 * The conformance suite every `LiveBus` passes (the in-process `MemoryLiveBus`, the Redis bus with
 * and without a replay window). A live bus is a `Channel` of live updates, so the channel suite
 * (`channel.ts`) runs first — delivery to every listener of every participant with all fields
 * intact (a bus with a window adding a position to each), publish order per publisher, a throwing
 * listener stopping no other, unsubscribe, close — and then what is the live bus's alone: the replay
 * window's rules (one position order for every listener of every participant, replay after a
 * position, a position never issued not resumable, an event published once by several participants
 * delivered once). A test file calls `runLiveBusConformance(...)` once per implementation, naming a
 * reason for any skipped case.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LiveBus, LiveTrailerEvent } from '../../core/live-bus.ts';
import { comparePositions, isPosition } from '../../core/live-replay.ts';
import { type ChannelCase, collect, runChannelConformance } from './channel.ts';

export type LiveBusCase =
  | ChannelCase
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
      const hearOne = collect(one!);
      const hearTwo = collect(two!);
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

    replayCase('replay: a position never issued is not resumable', async ([bus]) => {
      await bus!.publish(sampleEvent(1));
      assert.equal(await bus!.replayAfter('customer-a', '1-0'), null);
      assert.equal(await bus!.replayAfter('customer-a', '99999999999999-0'), null, 'a position from the future');
    });

    replayCase("replay: a customer's resume answers its own updates only, from any position the window holds", async ([one, two]) => {
      const hear = collect(one!);
      // Customer b's updates surround a's: a's resume after b's first position answers a's after it.
      for (let i = 0; i < 30; i++) await (i % 2 ? one! : two!).publish(sampleEvent(i, { customerId: i % 3 === 0 ? 'customer-a' : 'customer-b' }));
      const heard = await hear.next(30, timeoutMs);
      const from = heard.find((event) => event.customerId === 'customer-b')!.position!;
      const expected = heard.filter((event) => event.customerId === 'customer-a' && comparePositions(event.position!, from) > 0);
      assert.deepEqual((await two!.replayAfter('customer-a', from))?.map((event) => event.position), expected.map((event) => event.position));
      assert.deepEqual(await one!.replayAfter('customer-c', from), [], 'a customer with no update since: nothing to replay, but resumable');
    });

    replayCase('replay: an event published once by several participants is delivered once', async ([one, two]) => {
      const heard = collect(one!);
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
