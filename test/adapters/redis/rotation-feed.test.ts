/**
 * The Redis rotation feed: the shared rotation-feed conformance suite against a real Redis (each
 * participant on its own connection, each case on its own channel; its last case is two
 * `Trailwire`s over one SQLite file: rotate on A, the old token is rejected by B's `tokens.verify`
 * and B's hub ends the customer's streams), then the window between a rotation and B hearing of it,
 * measured; the default channel; option checks. Needs `TRAILWIRE_TEST_REDIS_URL`; every channel it
 * uses starts with a random `tw_test_<hex>:` prefix.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { openRedisRotationFeed, type RedisRotationFeedOptions } from '../../../adapters/redis/index.ts';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { TrailwireError } from '../../../core/errors.ts';
import type { RotationFeed } from '../../../core/rotation-feed.ts';
import { createTrailwire, type Trailwire } from '../../../core/trailwire.ts';
import { runRotationFeedConformance } from '../../conformance/rotation-feed.ts';

const REDIS_URL = process.env.TRAILWIRE_TEST_REDIS_URL;

describe('RedisRotationFeed options', () => {
  const client = { duplicate() {}, publish() {} };
  const cases: [string, Partial<Record<keyof RedisRotationFeedOptions, unknown>>][] = [
    ['redis', { redis: undefined }],
    ['redis', { redis: {} }],
    ['channel', { redis: client, channel: '' }],
    ['onError', { redis: client, onError: 1 }],
    ['onListenerError', { redis: client, onListenerError: 'rethrow' }],
  ];
  for (const [field, options] of cases) {
    it(`rejects ${field} = ${JSON.stringify(options[field as keyof RedisRotationFeedOptions]) ?? 'undefined'}, naming the field`, async () => {
      await assert.rejects(openRedisRotationFeed(options as RedisRotationFeedOptions), (error: unknown) => {
        assert.ok(error instanceof TrailwireError);
        assert.equal(error.code, 'validation_failed');
        assert.deepEqual(error.errors?.map((fieldError) => fieldError.path), [field]);
        return true;
      });
    });
  }
});

describe('RedisRotationFeed', { skip: REDIS_URL === undefined ? 'TRAILWIRE_TEST_REDIS_URL is not set' : false }, () => {
  const prefix = `tw_test_${randomBytes(6).toString('hex')}:`;
  let channels = 0;
  const freshChannel = () => `${prefix}rotations:${++channels}`;
  const connections: Redis[] = [];
  const connect = (): Redis => {
    const redis = new Redis(REDIS_URL!, { maxRetriesPerRequest: 2 });
    connections.push(redis);
    return redis;
  };
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-redis-rotation-'));
  let files = 0;

  after(async () => {
    await Promise.all(connections.map((connection) => connection.quit()));
    rmSync(directory, { recursive: true, force: true });
  });

  async function openFeeds(count: number, onListenerError?: (error: unknown) => void): Promise<RotationFeed[]> {
    const channel = freshChannel();
    return Promise.all(Array.from({ length: count }, () => openRedisRotationFeed({ redis: connect(), channel, onListenerError })));
  }

  /** Two `Trailwire`s over one SQLite file, each with its own Redis feed on one fresh channel. */
  async function openTwoProcesses(): Promise<{ a: Trailwire; b: Trailwire; close(): Promise<void> }> {
    const file = join(directory, `shared-${++files}.db`);
    const feeds = await openFeeds(2);
    const a = await createTrailwire({ store: await openSqliteStore({ file }), rotations: { feed: feeds[0] } });
    const b = await createTrailwire({ store: await openSqliteStore({ file }), rotations: { feed: feeds[1] } });
    return {
      a,
      b,
      async close() {
        await Promise.all([a.close(), b.close()]);
        await Promise.all(feeds.map((feed) => feed.close()));
      },
    };
  }

  runRotationFeedConformance({ name: 'redis', openFeeds, openTwoProcesses });

  it('the window: B hears of a rotation on A about a millisecond after A answers it', async (t) => {
    const { a, b, close } = await openTwoProcesses();
    try {
      const windows: number[] = [];
      for (let n = 0; n < 20; n++) {
        // A customer each: the rotate limit is 3 an hour per principal.
        const { principal, apiKey } = await a.auth.createCustomer({ name: `Customer ${n}` });
        const claims = await b.tokens.verify((await b.auth.authenticate('customers', apiKey, '127.0.0.1')).token.accessToken);
        const ended = new Promise<number>((resolve) => b.live.subscribe(principal.id, { write: () => true, end: () => resolve(performance.now()) }));
        await a.auth.rotate(claims);
        const answeredAt = performance.now();
        windows.push((await ended) - answeredAt);
      }
      windows.sort((x, y) => x - y);
      const median = windows[windows.length >> 1]!;
      const worst = windows.at(-1)!;
      t.diagnostic(`rotation → B's streams ended: median ${median.toFixed(2)} ms, worst ${worst.toFixed(2)} ms after A's rotate() answered`);
      // Loose bounds for a shared CI machine; the measured figures are in the diagnostic above.
      assert.ok(median < 50, `median window ${median} ms`);
      assert.ok(worst < 500, `worst window ${worst} ms`);
    } finally {
      await close();
    }
  });

  it('listens on trailwire:rotations unless told otherwise', async () => {
    const feed = await openRedisRotationFeed({ redis: connect() });
    assert.equal(feed.channelName, 'trailwire:rotations');
    await feed.close();
  });
});
