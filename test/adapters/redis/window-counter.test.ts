/**
 * The Redis window counter: the shared window-counter conformance suite against a real Redis, then
 * what is Redis's own — one command per increment, the key's expiry set once to the window's end, the
 * key prefix, recovery from an emptied script cache, option checks, and one limit held across two
 * connections (two processes, in effect). Needs `TRAILWIRE_TEST_REDIS_URL`; every key it writes
 * starts with a random `tw_test_<hex>:` prefix and is deleted at the end.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisWindowCounter, type RedisWindowCounterOptions } from '../../../adapters/redis/index.ts';
import { ManualClock, systemClock } from '../../../core/clock.ts';
import { TrailwireError } from '../../../core/errors.ts';
import { FixedWindowLimiter } from '../../../core/rate-limit.ts';
import { runWindowCounterConformance } from '../../conformance/window-counter.ts';

const REDIS_URL = process.env.TRAILWIRE_TEST_REDIS_URL;

describe('RedisWindowCounter options', () => {
  const cases: [string, Partial<Record<keyof RedisWindowCounterOptions, unknown>>][] = [
    ['redis', { redis: undefined }],
    ['redis', { redis: 'redis://127.0.0.1:6379' }],
    ['keyPrefix', { redis: { evalsha() {} }, keyPrefix: 42 }],
  ];
  for (const [field, options] of cases) {
    it(`rejects ${field} = ${JSON.stringify(options[field as keyof RedisWindowCounterOptions]) ?? 'undefined'}, naming the field`, () => {
      assert.throws(
        () => new RedisWindowCounter(options as RedisWindowCounterOptions),
        (error: unknown) => {
          assert.ok(error instanceof TrailwireError);
          assert.equal(error.code, 'validation_failed');
          assert.deepEqual(error.errors?.map((fieldError) => fieldError.path), [field]);
          assert.match(error.message, new RegExp(`\\b${field}\\b`));
          return true;
        },
      );
    });
  }
});

describe('RedisWindowCounter', { skip: REDIS_URL === undefined ? 'TRAILWIRE_TEST_REDIS_URL is not set' : false }, () => {
  const keyPrefix = `tw_test_${randomBytes(6).toString('hex')}:`;
  const connections: Redis[] = [];
  const connect = (): Redis => {
    const redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 2 });
    connections.push(redis);
    return redis;
  };
  const redis = connect();

  after(async () => {
    const keys: string[] = [];
    for (let cursor = '0'; ; ) {
      const [next, batch] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000);
      keys.push(...batch);
      if ((cursor = next) === '0') break;
    }
    if (keys.length > 0) await redis.del(...keys);
    await Promise.all(connections.map((connection) => connection.quit()));
  });

  /** A connection that records the name of every command it sends. */
  const spiedConnection = () => {
    const sent: string[] = [];
    const spied = connect();
    const send = spied.sendCommand.bind(spied);
    spied.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: Parameters<Redis['sendCommand']>[1]) => {
      sent.push(command.name);
      return send(command, stream);
    }) as Redis['sendCommand'];
    return { spied, sent };
  };

  runWindowCounterConformance({
    name: 'redis',
    async open() {
      return {
        counter: new RedisWindowCounter({ redis, keyPrefix }),
        clock: systemClock,
        // Redis expires keys by its own clock, so this one case waits out a real (short) delay; the
        // server runs on this machine, and a few ms of margin cover the two clocks' rounding.
        async advancePast(expiresAt) {
          await delay(Math.max(0, expiresAt - Date.now()) + 5);
        },
      };
    },
  });

  it('increments in one command a turn, setting the expiry to the window end once', async () => {
    const { spied, sent } = spiedConnection();
    await spied.ping(); // the connection's own set-up commands are not the counter's
    sent.length = 0;
    const counter = new RedisWindowCounter({ redis: spied, keyPrefix });
    const expiresAt = Date.now() + 3_600_000;
    const key = `once-${randomBytes(4).toString('hex')}`;
    await counter.increment(key, expiresAt); // may load the script (EVALSHA answered NOSCRIPT, then EVAL)
    sent.length = 0;
    assert.equal(await counter.increment(key, expiresAt), 2);
    assert.deepEqual(sent, ['evalsha'], 'one round trip');
    assert.equal(await redis.pexpiretime(`${keyPrefix}${key}`), expiresAt, 'the key expires at the end of its window');
    await counter.increment(key, expiresAt + 5000);
    assert.equal(await redis.pexpiretime(`${keyPrefix}${key}`), expiresAt, 'later increments leave the expiry alone');
    assert.equal(await redis.get(`${keyPrefix}${key}`), '3', 'stored under the prefix');
    sent.length = 0;
    const turn = [`other-${key}`, key, `other-${key}`, key].map((each) => counter.increment(each, expiresAt));
    assert.deepEqual(await Promise.all(turn), [1, 4, 2, 5], "one turn's increments, each answered its own count");
    assert.deepEqual(sent, ['evalsha'], "one round trip for a turn's increments");
  });

  it("counts a key a turn asks for several times with one increment of the key, each caller answered its own count (issue 41)", async () => {
    const keys: number[] = [];
    const spied = connect();
    const send = spied.sendCommand.bind(spied);
    spied.sendCommand = ((command: Parameters<Redis['sendCommand']>[0], stream?: Parameters<Redis['sendCommand']>[1]) => {
      // EVALSHA / EVAL: the script, then how many keys it is given.
      if (command.name === 'evalsha' || command.name === 'eval') keys.push(Number(command.args[1]));
      return send(command, stream);
    }) as Redis['sendCommand'];
    const counter = new RedisWindowCounter({ redis: spied, keyPrefix });
    const expiresAt = Date.now() + 60_000;
    const budget = `budget-${randomBytes(4).toString('hex')}`;
    const vins = Array.from({ length: 20 }, (_, i) => `vin-${i}-${budget}`);
    // A partner's turn of 20 requests: its budget's key and each request's own key.
    const counts = await Promise.all(vins.flatMap((vin) => [counter.increment(budget, expiresAt), counter.increment(vin, expiresAt)]));
    assert.deepEqual(counts.filter((_, i) => i % 2 === 0), Array.from({ length: 20 }, (_, i) => i + 1), 'the budget counted once per request, in order');
    assert.deepEqual(counts.filter((_, i) => i % 2 === 1), Array(20).fill(1));
    assert.equal(keys.at(-1), 21, 'the script is given each key once');
    assert.equal(await redis.get(`${keyPrefix}${budget}`), '20');
    assert.equal(await redis.pexpiretime(`${keyPrefix}${budget}`), expiresAt, 'the expiry set on the first count');
  });

  it("reads a turn's peeks in one command (issue 41)", async () => {
    const { spied, sent } = spiedConnection();
    await spied.ping();
    const counter = new RedisWindowCounter({ redis: spied, keyPrefix });
    const key = `peeked-${randomBytes(4).toString('hex')}`;
    await counter.increment(key, Date.now() + 60_000);
    await counter.increment(key, Date.now() + 60_000);
    sent.length = 0;
    assert.deepEqual(await Promise.all([key, `never-${key}`, key].map((each) => counter.peek(each))), [2, 0, 2]);
    assert.deepEqual(sent, ['mget'], "one round trip for a turn's peeks");
  });

  it('counts on when the server has lost its script cache (NOSCRIPT answers are retried with EVAL)', async () => {
    // Only this client's EVALSHA is made to answer NOSCRIPT: flushing the real cache would disturb
    // other test files sharing the server.
    let refusals = 0;
    const forgetful = new Proxy(redis, {
      get(target, property, receiver) {
        if (property === 'evalsha') {
          return async () => {
            refusals++;
            throw new Error('NOSCRIPT No matching script. Please use EVAL.');
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const counter = new RedisWindowCounter({ redis: forgetful, keyPrefix });
    const key = `noscript-${randomBytes(4).toString('hex')}`;
    const expiresAt = Date.now() + 60_000;
    assert.deepEqual([await counter.increment(key, expiresAt), await counter.increment(key, expiresAt)], [1, 2]);
    assert.equal(refusals, 2);
    assert.ok((await redis.pexpiretime(`${keyPrefix}${key}`)) === expiresAt, 'the EVAL path sets the expiry too');
  });

  it('other Redis errors are not swallowed', async () => {
    const broken = new Proxy(redis, {
      get(target, property, receiver) {
        if (property === 'evalsha') return async () => Promise.reject(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'));
        const value = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    await assert.rejects(new RedisWindowCounter({ redis: broken, keyPrefix }).increment('x', Date.now() + 1000), /WRONGTYPE/);
  });

  it('one limit holds across two connections (two processes, in effect)', async () => {
    const clock = new ManualClock(Date.now() + 60_000);
    const name = `shared-${randomBytes(4).toString('hex')}`;
    const limiters = [connect(), connect()].map(
      (connection) => new FixedWindowLimiter({ name, limit: 5, windowSeconds: 3600, counter: new RedisWindowCounter({ redis: connection, keyPrefix }), clock }),
    );
    const states = await Promise.all(Array.from({ length: 30 }, (_, i) => limiters[i % 2]!.consume('VIN-1')));
    assert.equal(states.filter((state) => state.allowed).length, 5);
    assert.equal((await limiters[0]!.peek('VIN-1')).remaining, 0);
    assert.equal((await limiters[1]!.peek('VIN-1')).allowed, false);
  });
});
