/**
 * The Redis seams through a real Redis outage (issue 28), on a private `redis-server` this test kills
 * and restarts (`test/support/private-services.ts`; skipped, saying why, without the binary):
 * - `RedisLiveBus`: while Redis is down a publish still reaches the publishing process's own
 *   listeners (and never fails), and once Redis is back every other process's listeners get the
 *   latest event of each trailer changed meanwhile — once per trailer, the newest;
 * - `RedisProcessRegistry`: counts the processes heartbeating, forgets one that closed, and keeps its
 *   last count while Redis is away.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { openRedisLiveBus, RedisProcessRegistry, type RedisLiveBus } from '../../../adapters/redis/index.ts';
import { REDIS_CONNECTION_OPTIONS } from '../../../adapters/server/shared-state.ts';
import type { LiveTrailerEvent } from '../../../core/live-bus.ts';
import { sampleEvent } from '../../conformance/live-bus.ts';
import { missingBinaries, PrivateRedis } from '../../support/private-services.ts';
import { until } from '../../support/until.ts';

const skip = missingBinaries();


describe('Redis seams through a Redis outage', { skip, timeout: 60_000 }, () => {
  let server: PrivateRedis;
  const connections: Redis[] = [];
  const connect = async () => {
    const redis = new Redis(server.url, REDIS_CONNECTION_OPTIONS);
    redis.on('error', () => {});
    connections.push(redis);
    await redis.connect();
    return redis;
  };

  before(async () => {
    server = await PrivateRedis.start();
  });

  after(async () => {
    for (const redis of connections) redis.disconnect();
    await server?.kill();
  });

  it('RedisLiveBus: local delivery during the outage, and the latest state of each trailer changed meanwhile to every process after it', async () => {
    const errors: unknown[] = [];
    const [a, b]: RedisLiveBus[] = await Promise.all(
      [await connect(), await connect()].map((redis) => openRedisLiveBus({ redis, channel: 'outage:live', settleMs: 200, onError: (error) => errors.push(error) })),
    );
    const heardByA: LiveTrailerEvent[] = [];
    const heardByB: LiveTrailerEvent[] = [];
    await a!.listen('customer-a', (event) => heardByA.push(event));
    await b!.listen('customer-a', (event) => heardByB.push(event));
    try {
      await a!.publish(sampleEvent(1));
      await until(() => heardByB.length === 1, 'B hears A while Redis is up', 10_000);

      await server.kill();
      await until(() => a!.inOutage, 'A notices the outage', 10_000);
      const first = sampleEvent(2, { ts: 1 });
      const newer = { ...sampleEvent(2), ts: 2 };
      const other = sampleEvent(3);
      // Never a failure for the outage: the event reaches A's own listeners at once.
      await a!.publish(first);
      await a!.publish(newer);
      await a!.publish(other);
      assert.deepEqual(heardByA.slice(-3), [first, newer, other], "A's own listeners hear A during the outage");
      assert.equal(heardByB.length, 1, 'B cannot hear A while Redis is down');

      await server.restart();
      await until(() => heardByB.length >= 3, 'B to be caught up after Redis is back', 10_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // One event per trailer changed during the outage, the newest of each, in the order they first changed.
      assert.deepEqual(heardByB.slice(1), [newer, other]);
      assert.equal(a!.inOutage, false);
      assert.ok(errors.some((error) => String((error as Error).message).includes('published again the latest state of 2 trailers')), 'the catch-up is reported');
    } finally {
      await a!.close();
      await b!.close();
    }
  });

  it("RedisLiveBus: a customer's first listener while Redis is frozen is taken within the command timeout, hears this process's updates, and every process's once Redis answers", async () => {
    const errors: unknown[] = [];
    const [a, b]: RedisLiveBus[] = await Promise.all(
      [await connect(), await connect()].map((redis) => openRedisLiveBus({ redis, channel: 'frozen:live', settleMs: 200, onError: (error) => errors.push(error) })),
    );
    const heard: LiveTrailerEvent[] = [];
    try {
      server.freeze();
      const started = Date.now();
      await b!.listen('customer-z', (event) => heard.push(event));
      assert.ok(Date.now() - started < 5_000, `listening waited ${Date.now() - started} ms`);
      assert.ok(errors.some((error) => String((error as Error).message).includes('SUBSCRIBE')), 'the unanswered SUBSCRIBE is reported');
      // Its own process's update reaches it while Redis answers nothing (the publish fails after the timeout).
      await b!.publish(sampleEvent(1, { customerId: 'customer-z' }));
      assert.deepEqual(heard.map((event) => event.ts), [1]);

      server.thaw();
      // Once Redis has taken the SUBSCRIBE, another process's updates arrive too.
      let n = 100;
      await until(async () => {
        await a!.publish(sampleEvent(++n, { customerId: 'customer-z' }));
        return heard.some((event) => event.ts > 100);
      }, "another process's update after Redis answers again", 10_000, 100);
    } finally {
      server.thaw();
      await a!.close();
      await b!.close();
    }
  });

  it('RedisProcessRegistry: counts the live processes, forgets a closed one, keeps the last count while Redis is away', async () => {
    const redis = await connect();
    const one = new RedisProcessRegistry({ redis, key: 'outage:processes', intervalMs: 100 });
    const two = new RedisProcessRegistry({ redis, key: 'outage:processes', intervalMs: 100 });
    const three = new RedisProcessRegistry({ redis, key: 'outage:processes', intervalMs: 100 });
    try {
      await one.start();
      await two.start();
      await three.start();
      assert.equal(three.count, 3);
      await two.close();
      await until(() => one.count === 2, 'a closed process to be forgotten', 2000);
      await server.kill();
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(one.count, 2, 'the last count seen, while Redis is away');
    } finally {
      await one.close();
      await three.close();
    }
  });
});
