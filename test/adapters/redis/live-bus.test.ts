/**
 * The Redis live bus: the shared live-bus conformance suite against a real Redis (each bus of a case
 * on its own connection, each case on its own channel), then what is Redis's own — the default
 * channel, the subscriber connection it opens and closes (never the caller's), a message that is
 * not JSON, delivery again after the subscriber connection is lost, a hub on each of two buses, and
 * option checks. Needs `TRAILWIRE_TEST_REDIS_URL`; every channel it uses starts with a random
 * `tw_test_<hex>:` prefix (pub/sub leaves no keys behind).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { openRedisLiveBus, type RedisLiveBus, type RedisLiveBusOptions } from '../../../adapters/redis/index.ts';
import { TrailwireError } from '../../../core/errors.ts';
import { LiveHub } from '../../../core/live-hub.ts';
import { type LiveTrailerEvent } from '../../../core/live-bus.ts';
import { comparePositions } from '../../../core/live-replay.ts';
import { runLiveBusConformance, sampleEvent } from '../../conformance/live-bus.ts';

const REDIS_URL = process.env.TRAILWIRE_TEST_REDIS_URL;

describe('RedisLiveBus options', () => {
  const client = { duplicate() {}, publish() {} };
  const cases: [string, Partial<Record<keyof RedisLiveBusOptions, unknown>>][] = [
    ['redis', { redis: undefined }],
    ['redis', { redis: 'redis://127.0.0.1:6379' }],
    ['channel', { redis: client, channel: '' }],
    ['channel', { redis: client, channel: 7 }],
    ['onError', { redis: client, onError: 'log' }],
    ['onListenerError', { redis: client, onListenerError: true }],
  ];
  for (const [field, options] of cases) {
    it(`rejects ${field} = ${JSON.stringify(options[field as keyof RedisLiveBusOptions]) ?? 'undefined'}, naming the field`, async () => {
      await assert.rejects(openRedisLiveBus(options as RedisLiveBusOptions), (error: unknown) => {
        assert.ok(error instanceof TrailwireError);
        assert.equal(error.code, 'validation_failed');
        assert.deepEqual(error.errors?.map((fieldError) => fieldError.path), [field]);
        assert.match(error.message, new RegExp(`\\b${field}\\b`));
        return true;
      });
    });
  }
});

describe('RedisLiveBus', { skip: REDIS_URL === undefined ? 'TRAILWIRE_TEST_REDIS_URL is not set' : false }, () => {
  const prefix = `tw_test_${randomBytes(6).toString('hex')}:`;
  let channels = 0;
  const freshChannel = () => `${prefix}live:${++channels}`;
  const connections: Redis[] = [];
  /** A connection whose `duplicate()`s (the bus's subscriber connections) are recorded. */
  const connect = (): Redis & { duplicates: Redis[] } => {
    const redis = Object.assign(new Redis(REDIS_URL!, { maxRetriesPerRequest: 2 }), { duplicates: [] as Redis[] });
    const duplicate = redis.duplicate.bind(redis);
    redis.duplicate = (override) => {
      const copy = duplicate(override);
      redis.duplicates.push(copy);
      return copy;
    };
    connections.push(redis);
    return redis;
  };

  after(async () => {
    await Promise.all(connections.map((connection) => connection.quit()));
  });

  runLiveBusConformance({
    name: 'redis',
    // One connection per participant, as separate processes would have; one channel per case.
    async openBuses(count, onListenerError) {
      const channel = freshChannel();
      return Promise.all(Array.from({ length: count }, () => openRedisLiveBus({ redis: connect(), channel, onListenerError })));
    },
    checksListenerErrors: true,
  });

  runLiveBusConformance({
    name: 'redis, with a replay window',
    async openBuses(count, onListenerError) {
      const channel = freshChannel();
      const replay = { streamKey: `${channel}:window`, replaySeconds: 60 };
      return Promise.all(Array.from({ length: count }, () => openRedisLiveBus({ redis: connect(), channel, onListenerError, replay })));
    },
    checksListenerErrors: true,
  });

  it("reads a resume in pages of the customer's own updates, never the whole window (issue 37)", async () => {
    const channel = freshChannel();
    const redis = connect();
    const bus = await openRedisLiveBus({ redis, channel, replay: { streamKey: `${channel}:window`, replaySeconds: 60, pageSize: 10 } });
    try {
      const heard = await nextEvents(bus, 1);
      await bus.publish(sampleEvent(0, { customerId: 'customer-a' }));
      const from = (await heard())[0]!.position!;
      // 25 updates of customer a among 2,000 of customer b.
      for (let i = 1; i <= 2_025; i++) await bus.publish(sampleEvent(i, { customerId: i % 81 === 0 ? 'customer-a' : 'customer-b' }));
      const pages: number[] = [];
      const window = redis as unknown as { trailwireLiveAfterPage: (...args: unknown[]) => Promise<unknown[] | null> };
      const readPage = window.trailwireLiveAfterPage.bind(redis);
      window.trailwireLiveAfterPage = async (...args) => {
        const page = await readPage(...args);
        pages.push(page?.length ?? -1);
        return page;
      };
      const replayed = await bus.replayAfter('customer-a', from);
      assert.deepEqual(replayed?.map((event) => event.ts), Array.from({ length: 25 }, (_, i) => (i + 1) * 81));
      assert.deepEqual(pages, [10, 10, 5], 'each call answers at most a page of the customer\'s updates');
    } finally {
      await bus.close();
    }
  });

  it("appends a turn's updates in one call, in order, each resumable from its customer's stream (issue 41)", async () => {
    const channel = freshChannel();
    const redis = connect();
    const bus = await openRedisLiveBus({ redis, channel, replay: { streamKey: `${channel}:window`, replaySeconds: 60 } });
    try {
      const heard = await nextEvents(bus, 1);
      await bus.publish(sampleEvent(0, { customerId: 'customer-a' }));
      const from = (await heard())[0]!.position!;
      const turn = await nextEvents(bus, 6, ['customer-a', 'customer-b']);
      const sent: string[] = [];
      const send = redis.sendCommand.bind(redis);
      redis.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: Parameters<Redis['sendCommand']>[1]) => {
        sent.push(command.name);
        return send(command, stream);
      }) as Redis['sendCommand'];
      await Promise.all([1, 2, 3, 4, 5, 6].map((i) => bus.publish(sampleEvent(i, { customerId: i % 2 === 0 ? 'customer-a' : 'customer-b' }))));
      redis.sendCommand = send;
      assert.deepEqual(sent, ['evalsha'], 'one script call for the turn');
      const delivered = await turn();
      assert.deepEqual(delivered.map((event) => event.ts), [1, 2, 3, 4, 5, 6], 'heard in the order published');
      const positions = delivered.map((event) => event.position!);
      assert.deepEqual([...positions].sort(comparePositions), positions, 'positions in that order');
      assert.deepEqual((await bus.replayAfter('customer-a', from))?.map((event) => event.position), positions.filter((_, i) => i % 2 === 1));
    } finally {
      await bus.close();
    }
  });

  it("publishes a customer's events on <channel>:c:<customer id>, trailwire:live by default", async () => {
    const bus = await openRedisLiveBus({ redis: connect() });
    const raw = connect();
    try {
      const customerId = `customer-${Math.random()}`;
      const heard = once(raw, 'message');
      await raw.subscribe(`trailwire:live:c:${customerId}`);
      await bus.publish(sampleEvent(5, { customerId }));
      const [name, text] = (await heard) as [string, string];
      assert.equal(name, `trailwire:live:c:${customerId}`);
      assert.deepEqual(JSON.parse(text), sampleEvent(5, { customerId }));
    } finally {
      await bus.close();
    }
  });

  it('closes the subscriber connection it opened, and leaves the caller\'s open', async () => {
    const redis = connect();
    const bus = await openRedisLiveBus({ redis, channel: freshChannel() });
    const [subscriber] = redis.duplicates;
    assert.equal(subscriber?.status, 'ready');
    await Promise.all([bus.close(), bus.close()]);
    assert.equal(subscriber!.status, 'end');
    assert.equal(await redis.ping(), 'PONG');
  });

  it('reports a message that is not JSON and goes on delivering', async () => {
    const channel = freshChannel();
    const errors: unknown[] = [];
    const bus = await openRedisLiveBus({ redis: connect(), channel, onError: (error) => errors.push(error) });
    try {
      const received = await nextEvents(bus, 1);
      await connect().publish(`${channel}:c:customer-a`, 'not json {');
      await bus.publish(sampleEvent(2));
      assert.deepEqual((await received()).map((event) => event.ts), [2]);
      assert.equal(errors.length, 1);
      assert.ok(errors[0] instanceof TrailwireError && /not JSON/.test(errors[0].message));
    } finally {
      await bus.close();
    }
  });

  it('delivers again once its lost subscriber connection is back (what was published meanwhile is lost)', async () => {
    const channel = freshChannel();
    const redis = connect();
    const bus = await openRedisLiveBus({ redis, channel });
    const publisher = await openRedisLiveBus({ redis: connect(), channel });
    try {
      const received: LiveTrailerEvent[] = [];
      await bus.listen('customer-a', (event) => received.push(event));
      await publisher.listen('customer-a', () => {});
      const subscriber = redis.duplicates[0]!;
      const closed = once(subscriber, 'close');
      subscriber.disconnect(true); // the connection drops; ioredis reconnects and resubscribes
      await closed;
      // Published during the outage (ioredis waits 50 ms before its first reconnection): only the
      // other bus's subscriber is there to hear it, and nothing brings it back later.
      const raw = connect();
      assert.equal(await raw.publish(`${channel}:c:customer-a`, JSON.stringify(sampleEvent(0))), 1, 'one subscriber (the other bus) heard it');
      // Publish markers until one arrives: the reconnection takes an unknown few milliseconds.
      const deadline = Date.now() + 5_000;
      const waitUntil = async (done: () => boolean, publishing?: () => Promise<void>) => {
        while (!done()) {
          assert.ok(Date.now() < deadline, `no delivery within 5 s of the connection loss (got ${received.length})`);
          await publishing?.();
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      };
      let n = 0;
      await waitUntil(() => received.length > 0, () => publisher.publish(sampleEvent(++n)));
      const resumedAt = received[0]!.ts;
      await publisher.publish(sampleEvent(1_000));
      await waitUntil(() => received.at(-1)?.ts === 1_000);
      assert.deepEqual(
        received.map((event) => event.ts),
        [...Array.from({ length: received.length - 1 }, (_, i) => resumedAt + i), 1_000],
        'after the reconnection, every event in order; the one published during the outage never arrives',
      );
      assert.ok(resumedAt > 0);
    } finally {
      await Promise.all([bus.close(), publisher.close()]);
    }
  });

  it("carries one process's update to another process's LiveFeed subscriber", async () => {
    const channel = freshChannel();
    // A hub given a bus leaves it open: the buses are closed after the hubs.
    const buses = await Promise.all([0, 1].map(() => openRedisLiveBus({ redis: connect(), channel })));
    const hubs = buses.map((bus) => new LiveHub({ bus }));
    try {
      const written: LiveTrailerEvent[] = [];
      let arrive: () => void = () => {};
      const arrived = new Promise<void>((resolve) => (arrive = resolve));
      await hubs[1]!.subscribe('customer-a', {
        write: (event) => {
          written.push(event);
          arrive();
          return true;
        },
        end: () => {},
      });
      const event = sampleEvent(42, { trailer: { ...sampleEvent(42).trailer, unitId: 'U-17', telemetry: null } });
      await hubs[0]!.publish(event);
      await arrived;
      assert.deepEqual(written, [event]);
    } finally {
      await Promise.all(hubs.map((hub) => hub.close()));
      await Promise.all(buses.map((bus) => bus.close()));
    }
  });
});

/** Listens to the customers' events now (one connection: in the order Redis published them); answers a function resolving with the next `count`. */
async function nextEvents(bus: RedisLiveBus, count: number, customers = ['customer-a'], timeoutMs = 2_000): Promise<() => Promise<LiveTrailerEvent[]>> {
  const events: LiveTrailerEvent[] = [];
  let heard: () => void = () => {};
  const stops: Array<() => void> = [];
  for (const customer of customers)
    stops.push(
      await bus.listen(customer, (event) => {
        events.push(event);
        if (events.length >= count) heard();
      }),
    );
  const stop = () => stops.forEach((one) => one());
  return () =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`expected ${count} events within ${timeoutMs} ms, got ${events.length}`)), timeoutMs);
      heard = () => {
        clearTimeout(timer);
        stop();
        resolve(events.slice(0, count));
      };
      if (events.length >= count) heard();
    });
}
