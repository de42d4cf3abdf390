/**
 * Another Redis client, in a process that does nothing else: PINGs Redis every 10 ms for
 * `seconds` and prints the latencies in ms, so that what is measured is Redis's, not the
 * benchmark's own event loop. Arguments: `<redis url> <seconds>`.
 */
import { Redis } from 'ioredis';

const [url, secondsArg] = process.argv.slice(2);
const redis = new Redis(url!);
await redis.ping();
console.log('ready');
const deadline = performance.now() + Number(secondsArg) * 1000;
const latencies: number[] = [];
while (performance.now() < deadline) {
  const started = performance.now();
  await redis.ping();
  latencies.push(performance.now() - started);
  await new Promise((resolve) => setTimeout(resolve, 10));
}
await redis.quit();
console.log(JSON.stringify(latencies));
