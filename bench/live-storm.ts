/**
 * `npm run bench -- live-storm` (issue 37, items 2 and 3): what one customer's reconnects cost the
 * others.
 *
 * (a) Resumes on Redis: a replay window of 60,000 updates (100 customers, one of them with 3,000,
 * a quiet one with 21), then 10 resumes a second for `BENCH_SECONDS` (default 5) from the window's
 * oldest position, alternating the quiet customer and the big one, while another process PINGs
 * Redis every 10 ms. Reports each resume's time and size, the PING latencies (target: ≤ 10 ms) and
 * the SLOWLOG entries the run added. Needs `TRAILWIRE_TEST_REDIS_URL`; its keys are deleted after.
 *
 * (b) A snapshot storm: the real server (SQLite) with a customer of 3,000 trailers, which opens
 * `GET /api/v1/live?snapshot=true` 100 times a second for 8 s from another process, while a third
 * process probes `/healthz` every 10 ms (another tenant; target p99 ≤ 100 ms). Each row carries
 * the machine's 1-minute load average at the storm's start (the machine may be shared) and the
 * server's CPU time over the storm, in all and per stream served. Run with the default
 * connect limits and with them lifted (every connect served: what the shared snapshot alone buys),
 * `BENCH_ROUNDS` rounds each (default 3; the median is reported beside each round).
 *
 * (c) What the fleet's updates cost a process that serves one customer (issue 41): a process with
 * one stream of one of 200 customers, on the Redis bus, while another process publishes 60,000
 * updates of all 200 at 6,000 a second. Its CPU over the publishing (the same time idle after it is
 * shown beside), per update published: what hearing the fleet costs each process (target ≤ 2 µs;
 * when every process heard every update it was 5.4–5.9 µs, over half a core at 100,000 updates/s).
 * Needs `TRAILWIRE_TEST_REDIS_URL`; its keys are deleted after.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { openRedisLiveBus } from '../dist/adapters/redis/index.js';
import { LiveHub } from '../dist/core/live-hub.js';
import type { LiveTrailerEvent } from '../dist/core/live-bus.js';
import { benchLiveEvent } from './lib/live-event.ts';
import { percentile, printTable, round, SERVER_NODE_FLAGS, writeResults } from './lib/results.ts';

const WINDOW = 60_000;

/** An update of one of the customer's 3,000 trailers. */
const eventOf = (customerId: string, n: number): LiveTrailerEvent => benchLiveEvent(customerId, `trailer-${customerId}-${n % 3_000}`, n);

async function resumesOnRedis(url: string, seconds: number) {
  const prefix = `tw_bench_${randomBytes(4).toString('hex')}:`;
  const redis = new Redis(url);
  const streamKey = `${prefix}live:window`;
  const bus = await openRedisLiveBus({ redis, channel: `${prefix}live`, replay: { streamKey, replaySeconds: 300, maxEvents: 100_000 } });
  try {
    const first: string[] = [];
    // The first update (i = 0) is customer 'quiet''s: its position is where the window starts.
    const stop = await bus.listen('quiet', (event) => void (first.length === 0 && first.push(event.position!)));
    // Customer of each update: 'big' every 20th (3,000), 'quiet' every 2,857th (21), else one of 98 others.
    const customerOf = (i: number) => (i % 2_857 === 0 ? 'quiet' : i % 20 === 1 ? 'big' : `c${i % 98}`);
    for (let i = 0; i < WINDOW; i += 1_000) await Promise.all(Array.from({ length: 1_000 }, (_, j) => bus.publish(eventOf(customerOf(i + j), i + j))));
    while (first.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    stop();
    const from = first[0]!;
    const [, slowerThan] = (await redis.config('GET', 'slowlog-log-slower-than')) as [string, string];
    const slowlogBefore = Number(await redis.slowlog('LEN'));
    const [slowIdsBefore] = ((await redis.slowlog('GET', 1)) as Array<[number]>).map(([id]) => id);

    // The same PINGs with no resume first: on a shared 2-core machine the pinger's own scheduling is in both.
    const idle = child('./lib/redis-pinger.ts', [url, '3']);
    await idle.lines.next();
    const idlePings = await nextJson<number[]>(idle.lines);
    const pinger = child('./lib/redis-pinger.ts', [url, String(seconds)]);
    await pinger.lines.next(); // ready
    const resumes: Array<{ customer: string; ms: number; updates: number }> = [];
    const started = performance.now();
    const pending: Promise<void>[] = [];
    for (let i = 0; i < seconds * 10; i++) {
      const wait = started + i * 100 - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const customer = i % 2 === 0 ? 'quiet' : 'big';
      pending.push(
        (async () => {
          const at = performance.now();
          const replayed = await bus.replayAfter(customer, from);
          if (replayed === null) throw new Error('the oldest position was not resumable');
          resumes.push({ customer, ms: performance.now() - at, updates: replayed.length });
        })(),
      );
    }
    await Promise.all(pending);
    const pings = await nextJson<number[]>(pinger.lines);
    const slow = ((await redis.slowlog('GET', 128)) as Array<[number, number, number, string[]]>).filter(([id]) => slowIdsBefore === undefined || id > slowIdsBefore);
    const of = (customer: string) => resumes.filter((resume) => resume.customer === customer);
    return {
      window: Number(await redis.xlen(streamKey)),
      resumes: ['quiet', 'big'].map((customer) => ({
        customer,
        updates: of(customer)[0]?.updates ?? 0,
        p50Ms: round(percentile(of(customer).map((r) => r.ms), 50)),
        maxMs: round(Math.max(...of(customer).map((r) => r.ms))),
      })),
      pingMs: [
        { while: 'no resume', p50: round(percentile(idlePings, 50)), p99: round(percentile(idlePings, 99)), max: round(Math.max(...idlePings)), samples: idlePings.length },
        { while: '10 resumes/s', p50: round(percentile(pings, 50)), p99: round(percentile(pings, 99)), max: round(Math.max(...pings)), samples: pings.length },
      ],
      slowlog: { thresholdUs: Number(slowerThan), added: Number(await redis.slowlog('LEN')) - slowlogBefore, entries: slow.map(([, , us, command]) => ({ us, command: command.slice(0, 2).join(' ') })) },
    };
  } finally {
    await bus.close();
    const keys = [streamKey, ...['quiet', 'big', ...Array.from({ length: 98 }, (_, i) => `c${i}`)].map((c) => `${streamKey}:c:${c}`)];
    await redis.del(...keys);
    await redis.quit();
  }
}

function child(script: string, args: string[]): { process: ChildProcess; lines: AsyncIterator<string>; exited: Promise<unknown> } {
  const started = spawn(process.execPath, [...SERVER_NODE_FLAGS, '--import', 'tsx', fileURLToPath(new URL(script, import.meta.url)), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  // Listened for from the start: a child that prints its last line and exits at once has exited
  // before a later `once(child, 'exit')` would listen, which then waits forever.
  const exited = once(started, 'exit');
  return { process: started, lines: createInterface({ input: started.stdout! })[Symbol.asyncIterator](), exited };
}

async function nextJson<T>(lines: AsyncIterator<string>): Promise<T> {
  const { value, done } = await lines.next();
  if (done) throw new Error('the child process ended');
  return JSON.parse(value as string) as T;
}

/** `/healthz` latencies (ms, sorted) for `ms` from a prober process of its own, started with `go` once it is loaded. */
async function probeFromAnotherProcess(url: string, ms: number, startWith: Array<ReturnType<typeof child>> = []): Promise<number[]> {
  const prober = child('./lib/healthz-prober.ts', [url, String(ms)]);
  // Every process loaded first, then all started at once: a child's start-up is not part of the storm.
  await Promise.all([prober, ...startWith].map((started) => started.lines.next()));
  for (const started of [prober, ...startWith]) started.process.stdin!.write('go\n');
  return nextJson<number[]>(prober.lines);
}

async function snapshotStorm(connectsPerMinute: number, seconds: number) {
  const server = child('./lib/storm-server.ts', ['3000', String(connectsPerMinute)]);
  try {
    const { url, token } = await nextJson<{ url: string; token: string }>(server.lines);
    const quiet = await probeFromAnotherProcess(url, 2_000);
    server.process.stdin!.write('stats\n');
    await nextJson(server.lines);
    const storm = child('./lib/storm-client.ts', [url, token, '100', String(seconds)]);
    const load1 = loadavg()[0]!;
    const healthz = await probeFromAnotherProcess(url, seconds * 1000, [storm]);
    const counts = await nextJson<{ served: number; refused: number; failed: number; firstFailure: string; bytes: number }>(storm.lines);
    server.process.stdin!.write('stats\n');
    const stats = await nextJson<{ loopDelayMs: { p99: number; max: number }; cpuMs: number; rssMb: number }>(server.lines);
    await storm.exited;
    return {
      load1: round(load1, 1),
      healthzQuietP99Ms: round(percentile(quiet, 99)),
      healthzP50Ms: round(percentile(healthz, 50)),
      healthzP99Ms: round(percentile(healthz, 99)),
      healthzMaxMs: round(healthz.at(-1)!),
      ...counts,
      mbSent: round(counts.bytes / 2 ** 20, 1),
      serverLoopDelayP99Ms: stats.loopDelayMs.p99,
      // What the server itself spent, which the shared machine's load moves far less than latencies.
      serverCpuMs: stats.cpuMs,
      serverCpuMsPerServed: round(stats.cpuMs / Math.max(1, counts.served), 1),
      serverRssMb: stats.rssMb,
    };
  } finally {
    server.process.stdin!.write('close\n');
    await server.exited;
  }
}

/** (c): the CPU per update published by another process, of a process whose hub serves one customer's stream. */
async function hearingTheFleet(url: string) {
  const prefix = `tw_bench_${randomBytes(4).toString('hex')}:`;
  const [count, customers, perSecond] = [60_000, 200, 6_000];
  const redis = new Redis(url);
  const bus = await openRedisLiveBus({ redis, channel: `${prefix}live`, replay: { streamKey: `${prefix}live:window`, replaySeconds: 300 } });
  const hub = new LiveHub({ bus });
  const publisher = child('./lib/fleet-publisher.ts', [url, prefix, String(count), String(customers), String(perSecond)]);
  try {
    let heard = 0;
    await hub.subscribe('c0', { write: () => (heard++, true), end: () => {} });
    await publisher.lines.next();
    const seconds = count / perSecond;
    const cpuMs = () => {
      const usage = process.cpuUsage();
      return (usage.user + usage.system) / 1000;
    };
    const from = cpuMs();
    publisher.process.stdin!.write('go\n');
    await publisher.lines.next();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const busyMs = cpuMs() - from;
    // The same process idle as long, just after: its timers and collector, the baseline.
    const idleFrom = cpuMs();
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000 + 200));
    const idleMs = cpuMs() - idleFrom;
    // All it spent while the fleet published, its idle share included (subtracting the idle run
    // would subtract a collection that fell in it: the difference swung below zero).
    return { updates: count, customers, perSecond, heard, idleCpuMs: round(idleMs), cpuMs: round(busyMs), usPerUpdate: round((busyMs * 1000) / count, 2) };
  } finally {
    publisher.process.stdin!.end();
    await publisher.exited;
    await hub.close();
    await bus.close();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  }
}

export async function runLiveStormBench(): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const redisUrl = process.env.TRAILWIRE_TEST_REDIS_URL;
  // First, while this process has done nothing else: its CPU is what is measured.
  const hearing = redisUrl === undefined || process.env.BENCH_SKIP_REDIS ? null : await hearingTheFleet(redisUrl);
  const redis = redisUrl === undefined || process.env.BENCH_SKIP_REDIS ? null : await resumesOnRedis(redisUrl, seconds);
  if (redis) {
    printTable(`(a) resumes on Redis from the oldest position of a ${redis.window}-update window, 10/s for ${seconds} s`, redis.resumes);
    printTable('Redis PING every 10 ms from another process (ms)', redis.pingMs);
    console.log(`SLOWLOG (threshold ${redis.slowlog.thresholdUs} µs): ${redis.slowlog.added} entries added`, redis.slowlog.entries);
  } else console.log('(a) skipped: TRAILWIRE_TEST_REDIS_URL is not set');
  if (hearing) {
    printTable(`(c) a process serving one customer's stream while another publishes ${hearing.updates} updates of ${hearing.customers} customers at ${hearing.perSecond}/s`, [hearing]);
    console.log(`target hearing the fleet <= 2 µs per update published elsewhere: ${hearing.usPerUpdate} µs (${hearing.usPerUpdate <= 2 ? 'met' : 'NOT met'}); heard ${hearing.heard} (its customer's ${hearing.updates / hearing.customers})`);
  } else console.log('(c) skipped: TRAILWIRE_TEST_REDIS_URL is not set');

  const storms: Array<Record<string, string | number>> = [];
  for (const [limits, perMinute] of [['default (120/60)', 120], ['lifted', 1_000_000]] as const) {
    for (let round = 1; round <= rounds; round++) storms.push({ limits, round, ...(await snapshotStorm(perMinute, 8)) });
  }
  printTable('(b) one customer (3,000 trailers) reconnecting with snapshots at 100/s for 8 s; another tenant probing /healthz', storms);
  const median = (limits: string, field: string) => percentile(storms.filter((s) => s.limits === limits).map((s) => Number(s[field])), 50);
  const medians = ['default (120/60)', 'lifted'].map((limits) => ({ limits, healthzP99Ms: median(limits, 'healthzP99Ms'), served: median(limits, 'served') }));
  printTable('(b) medians', medians);
  console.log(`results: ${writeResults('live-storm', { redis, hearing, storms, medians })}`);
}
