/**
 * A process that publishes a fleet's live updates through the Redis live bus (with its replay
 * window), as a processing process does: `count` updates over `customers` customers, in batches of
 * 300 (a processing batch's), at `perSecond`. Arguments: Redis URL, the bus's channel prefix, count,
 * customers, perSecond. Prints `ready` once its bus is open, starts on `go`, prints `done` at the end.
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { openRedisLiveBus } from '../../dist/adapters/redis/index.js';
import { benchLiveEvent } from './live-event.ts';

const [url, prefix, count, customers, perSecond] = process.argv.slice(2) as [string, string, string, string, string];
const redis = new Redis(url);
const bus = await openRedisLiveBus({ redis, channel: `${prefix}live`, replay: { streamKey: `${prefix}live:window`, replaySeconds: 300 } });
const eventOf = (n: number) => benchLiveEvent(`c${n % Number(customers)}`, `trailer-${n % 20_000}`, n);
console.log('ready');
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
await lines.next();
const batchMs = (300 / Number(perSecond)) * 1000;
for (let first = 0; first < Number(count); first += 300) {
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(300, Number(count) - first) }, (_, i) => bus.publish(eventOf(first + i))));
  const wait = batchMs - (performance.now() - started);
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}
console.log('done');
await bus.close();
await redis.quit();
