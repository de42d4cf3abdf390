/**
 * The conformance suite every `LiveBus` passes (the in-process `MemoryLiveBus`, the Redis bus):
 * delivery of every event to every listener of every participant sharing the bus, with all fields
 * intact; publish order kept per publisher; a throwing listener stopping no other; unsubscribe; close. A test file calls
 * `runLiveBusConformance(...)` once per implementation, naming a reason for any skipped case.
 *
 * A networked bus delivers asynchronously, so cases wait for deliveries (never for a fixed time):
 * absence of a delivery is shown by a later marker event that does arrive, which is sound because
 * a bus delivers one publisher's events in publish order.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TrailwireError } from '../../core/errors.ts';
import type { LiveBus, LiveTrailerEvent } from '../../core/live-hub.ts';
import { comparePositions, isPosition } from '../../core/live-replay.ts';

export type LiveBusCase =
  | 'delivers to every listener'
  | 'keeps publish order'
  | 'a throwing listener does not stop the others'
  | 'unsubscribe'
  | 'close'
  | 'replay: one position order for every listener, replayed after a position'
  | 'replay: a position never issued is not resumable'
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
  /**
   * Set when `openBuses` hands `onListenerError` to its buses; without it the case 'a throwing
   * listener does not stop the others' is skipped, saying so (the bus's default would re-throw the
   * case's deliberate error outside the test).
   */
  checksListenerErrors?: boolean;
  /** How long to wait for a delivery before failing. Default 2,000 ms. */
  deliveryTimeoutMs?: number;
  /** Cases this implementation skips, each with the reason. */
  skip?: Partial<Record<LiveBusCase, string>>;
}

/** Registers the suite's cases with `node:test`. */
export function runLiveBusConformance(options: LiveBusConformanceOptions): void {
  const timeoutMs = options.deliveryTimeoutMs ?? 2_000;
  const skips: Partial<Record<LiveBusCase, string>> = {
    ...(options.checksListenerErrors ? {} : { 'a throwing listener does not stop the others': 'openBuses does not take onListenerError' }),
    ...options.skip,
  };
  const replayCase = (name: LiveBusCase, body: (buses: LiveBus[]) => Promise<void>) =>
    it(name, { skip: skips[name] ?? false }, async (t) => {
      const buses = await options.openBuses(2);
      try {
        // A bus without a window has nothing to replay: said so, not passed silently.
        if (!buses[0]!.replayAfter) return t.skip('this bus keeps no replay window');
        await body(buses);
      } finally {
        await Promise.all([...new Set(buses)].map((bus) => bus.close()));
      }
    });
  const caseOf = (name: LiveBusCase, body: () => Promise<void>) => {
    it(name, { skip: skips[name] ?? false }, body);
  };

  async function withBuses(count: number, body: (buses: LiveBus[]) => Promise<void>): Promise<void> {
    const buses = await options.openBuses(count);
    try {
      await body(buses);
    } finally {
      await Promise.all([...new Set(buses)].map((bus) => bus.close()));
    }
  }

  describe(`LiveBus conformance: ${options.name}`, () => {
    caseOf('delivers to every listener', () =>
      withBuses(2, async ([publisher, peer]) => {
        const first = collect(publisher!);
        const second = collect(publisher!);
        const remote = collect(peer!);
        const event = sampleEvent(1);
        await publisher!.publish(event);
        for (const listener of [first, second, remote]) {
          const [received] = await listener.next(1, timeoutMs);
          // Every field survives, whatever the bus does to carry it (JSON over a network, say); a bus
          // with a replay window adds the position.
          const { position, ...rest } = received!;
          assert.deepEqual(rest, event);
          if (publisher!.replayAfter) assert.ok(isPosition(position), `a position, got ${position}`);
          else assert.equal(position, undefined);
        }
      }),
    );

    caseOf('keeps publish order', () =>
      withBuses(2, async ([publisher, peer]) => {
        const remote = collect(peer!);
        const local = collect(publisher!);
        const events = Array.from({ length: 200 }, (_, index) => sampleEvent(index));
        // Published without waiting for one another: the order is the order of the publish calls.
        await Promise.all(events.map((event) => publisher!.publish(event)));
        const expected = events.map((event) => event.ts);
        assert.deepEqual((await remote.next(200, timeoutMs)).map((event) => event.ts), expected);
        assert.deepEqual((await local.next(200, timeoutMs)).map((event) => event.ts), expected);
      }),
    );

    caseOf('a throwing listener does not stop the others', async () => {
      const reported: unknown[] = [];
      const buses = await options.openBuses(2, (error) => reported.push(error));
      try {
        const [publisher, peer] = buses;
        const failure = new Error('listener bug');
        peer!.subscribe(() => {
          throw failure;
        });
        const after = collect(peer!);
        const local = collect(publisher!);
        await publisher!.publish(sampleEvent(1));
        await publisher!.publish(sampleEvent(2));
        assert.deepEqual((await after.next(2, timeoutMs)).map((event) => event.ts), [1, 2], 'a later listener still hears every event');
        assert.deepEqual((await local.next(2, timeoutMs)).map((event) => event.ts), [1, 2]);
        assert.deepEqual(reported, [failure, failure], 'each error is reported, once per event');
      } finally {
        await Promise.all([...new Set(buses)].map((bus) => bus.close()));
      }
    });

    caseOf('unsubscribe', () =>
      withBuses(2, async ([publisher, peer]) => {
        const leaving = collect(peer!);
        const staying = collect(peer!);
        await publisher!.publish(sampleEvent(1));
        await leaving.next(1, timeoutMs);
        await staying.next(1, timeoutMs);

        leaving.stop();
        leaving.stop(); // a second call is harmless
        await publisher!.publish(sampleEvent(2));
        await publisher!.publish(sampleEvent(3));
        assert.deepEqual((await staying.next(2, timeoutMs)).map((event) => event.ts), [2, 3]);
        assert.equal(leaving.received.length, 1, 'an unsubscribed listener receives nothing more');
      }),
    );

    caseOf('close', async () => {
      const [bus] = await options.openBuses(1);
      const listener = collect(bus!);
      await bus!.close();
      await assert.rejects(bus!.publish(sampleEvent(1)), (error: unknown) => {
        assert.ok(error instanceof TrailwireError);
        assert.equal(error.code, 'unavailable');
        return true;
      });
      await bus!.close(); // idempotent
      assert.equal(listener.received.length, 0);
    });

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
      const replayed = await two!.replayAfter!(heardOne[9]!);
      assert.deepEqual(replayed?.map((event) => event.position), heardOne.slice(10));
      assert.deepEqual(replayed?.map(({ position: _, ...event }) => event), (await hearOne.received).slice(10).map(({ position: _, ...event }) => event));
    });

    replayCase('replay: a position never issued is not resumable', async ([bus]) => {
      await bus!.publish(sampleEvent(1));
      assert.equal(await bus!.replayAfter!('1-0'), null);
    });

    replayCase('replay: an event published once by several participants is delivered once', async ([one, two]) => {
      const heard = collect(one!);
      const key = `change:${Math.random()}`;
      await one!.publish(sampleEvent(1), { onceKey: key });
      await two!.publish(sampleEvent(1), { onceKey: key });
      await one!.publish(sampleEvent(2)); // the marker: had the second arrived, it would be before
      const [first, marker] = await heard.next(2, timeoutMs);
      assert.deepEqual([first!.ts, marker!.ts], [1, 2]);
    });
  });
}

interface Collector {
  received: LiveTrailerEvent[];
  /** Resolves with the next `count` events not yet taken, failing after `timeoutMs`. */
  next(count: number, timeoutMs: number): Promise<LiveTrailerEvent[]>;
  stop(): void;
}

function collect(bus: LiveBus): Collector {
  const received: LiveTrailerEvent[] = [];
  let taken = 0;
  let waiter: (() => void) | undefined;
  const stop = bus.subscribe((event) => {
    received.push(event);
    waiter?.();
  });
  return {
    received,
    stop,
    next(count, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(new Error(`expected ${count} more events within ${timeoutMs} ms, got ${received.length - taken}`));
        }, timeoutMs);
        const check = () => {
          if (received.length - taken < count) return;
          clearTimeout(timer);
          waiter = undefined;
          const batch = received.slice(taken, taken + count);
          taken += count;
          resolve(batch);
        };
        waiter = check;
        check();
      });
    },
  };
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
