/**
 * LiveFeed fan-out benchmark (issue 4, issue 32). Four runs, each against Trailwire and, in the same
 * run, a bare @grpc/grpc-js server streaming the same kind of pre-encoded messages to the same
 * subscribers:
 *   (a) 5,000 subscribers over 500 customers, 500 updates/s in all;
 *   (b) 1,000 subscribers of one customer, 50 updates/s (50,000 messages/s);
 *   (saturation) 1,000 subscribers of one customer, the update rate stepped up until the
 *     publish-to-receive p99 passes `SATURATION_P99_MS` or the server's memory grows by more than
 *     `SATURATION_RSS_GROWTH_MB`: the most messages/s delivered before that, published in-process
 *     on both servers (Trailwire through its live hub), so the fan-out is what is measured;
 *   (storm) 1,000 subscribers of one customer, 20 updates/s flowing, all cancel and subscribe again
 *     at once — Trailwire's resuming after the last position each received — and the time until
 *     every one is live again (answered and, resuming, caught up with the newest position seen).
 *     The cap on streams per customer is set to twice the subscribers: old and new streams overlap.
 * `LIVEFEED_RUNS=saturation,storm` (names: a, b, saturation, storm) runs some only.
 * Trailwire's updates come through the real path: this process POSTs gps-basic payloads to the
 * intake, the worker processes them and the live hub fans them out. Reported per server:
 * intake-202-to-stream latency p50/p99 (Trailwire only), publish-to-stream latency (from the
 * update's creation: the worker for Trailwire, the publisher for the bare server), delivered/offered
 * messages, messages/s, and server RSS per idle subscriber. Server and subscribers run in separate
 * processes; subscribers are spread over a few client processes, 50 streams per connection.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';
import { PAYLOAD_EPOCH_SECONDS } from './lib/live-clients.ts';
import { percentile, printTable, round, writeResults } from './lib/results.ts';

const SERVER = new URL('./lib/live-server.ts', import.meta.url).pathname;
const CLIENTS = new URL('./lib/live-clients.ts', import.meta.url).pathname;

export interface LiveRun {
  name: string;
  subscribers: number;
  customers: number;
  /** Updates per second in all, spread round-robin over the customers. */
  rate: number;
  /** Trailers per customer; each gets rate / (customers * trailersPerCustomer) updates/s. */
  trailersPerCustomer: number;
}

export const LIVE_RUNS: LiveRun[] = [
  { name: '(a) 5,000 subs / 500 customers / 500 upd/s', subscribers: 5000, customers: 500, rate: 500, trailersPerCustomer: 2 },
  { name: '(b) 1,000 subs / 1 customer / 50 upd/s', subscribers: 1000, customers: 1, rate: 50, trailersPerCustomer: 50 },
];

const now = () => performance.timeOrigin + performance.now();

/** The children still running: killed when the bench fails, which would otherwise wait for them. */
const running = new Set<ChildProcess>();

/** How long the bench waits for any answer of a child before failing with what it waited for. */
const ANSWER_TIMEOUT_MS = 120_000;

/**
 * A child process spoken to by lines on stdio. `next(what)` never waits forever: it rejects when the
 * child exits first (with its exit code) or after `ANSWER_TIMEOUT_MS`, naming `what` it waited for,
 * and a `failed <reason>` line from the child rejects with the child's reason.
 */
export function child(file: string, args: string[]) {
  const process_ = spawn(process.execPath, ['--max-old-space-size=4096', '--import', 'tsx', file, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  running.add(process_);
  process_.on('exit', () => running.delete(process_));
  const lines = createInterface({ input: process_.stdout! })[Symbol.asyncIterator]();
  const name = file.split('/').at(-1);
  return {
    process: process_ as ChildProcess,
    send: (line: string) => process_.stdin!.write(`${line}\n`),
    next: async (what = 'an answer'): Promise<string> => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${name} gave no ${what} within ${ANSWER_TIMEOUT_MS / 1000} s`)), ANSWER_TIMEOUT_MS);
      });
      try {
        const next = await Promise.race([lines.next(), timeout]);
        if (next.done) throw new Error(`${name} exited (code ${process_.exitCode ?? 'unknown'}) before ${what}`);
        const line = next.value as string;
        if (line.startsWith('failed ')) throw new Error(`${name}: ${JSON.parse(line.slice('failed '.length))}`);
        return line;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

interface Posted {
  /** Payloads answered 202. */
  accepted: number;
  refused: number;
  startedAt: number;
  /** Payload sequence number -> epoch ms its 202 arrived. */
  acks: Record<number, number>;
}

/** POSTs `rate` gps-basic payloads a second for `seconds`, round-robin over customers and their trailers. */
async function postPayloads(url: string, token: string, vins: string[][], run: LiveRun, seconds: number): Promise<Posted> {
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const acks: Record<number, number> = {};
  let refused = 0;
  const pending = new Set<Promise<void>>();
  const post = (seq: number) => {
    const vin = vins[seq % run.customers]![Math.floor(seq / run.customers) % run.trailersPerCustomer]!;
    // The fix time carries the sequence number back out on the stream (telemetry.timestamp).
    const body = JSON.stringify({ timestamp: PAYLOAD_EPOCH_SECONDS + seq, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 89, bearingDeg: 271 });
    const done = new Promise<void>((resolve) => {
      const req = request(`${url}/api/v1/telemetry/intake/${vin}`, {
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      });
      req.on('response', (res) => {
        if (res.statusCode === 202) acks[seq] = now();
        else refused++;
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', () => {
        refused++;
        resolve();
      });
      req.end(body);
    });
    pending.add(done);
    void done.then(() => pending.delete(done));
  };
  const startedAt = now();
  const started = performance.now();
  let sent = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const due = Math.floor(((performance.now() - started) / 1000) * run.rate);
      while (sent < due) post(sent++);
      if (performance.now() - started >= seconds * 1000) {
        clearInterval(timer);
        resolve();
      }
    }, 10);
  });
  await Promise.all(pending);
  agent.destroy();
  return { accepted: Object.keys(acks).length, refused, startedAt, acks };
}

interface ClientReport {
  received: number;
  lastAt: number;
  publishLatencies: number[];
  ackLatencies: number[];
}

/** One server (Trailwire or bare) under one run's load; answers its row. */
export async function measure(mode: 'trailwire' | 'bare', run: LiveRun, seconds: number, clientProcesses: number) {
  const perCustomer = Math.ceil(run.subscribers / run.customers);
  const server = child(SERVER, [mode, String(run.customers), String(run.trailersPerCustomer), String(perCustomer)]);
  const ready = JSON.parse(await server.next('its ready line')) as { port: number; url: string; partnerToken: string; tokens: string[]; vins: string[][] };
  const rss = async () => {
    server.send('rss');
    return (JSON.parse(await server.next()) as { rss: number }).rss;
  };
  const rssStart = await rss();
  // Subscriber i belongs to customer i % customers.
  const assignments: string[][] = Array.from({ length: clientProcesses }, () => []);
  for (let i = 0; i < run.subscribers; i++) assignments[i % clientProcesses]!.push(ready.tokens[i % run.customers]!);
  const clients = assignments.map(() => child(CLIENTS, []));
  clients.forEach((client, i) => client.send(JSON.stringify({ port: ready.port, tokens: assignments[i], perConnection: 50 })));
  for (const client of clients) {
    const line = await client.next('`ready` (every subscriber\'s first heartbeat)');
    if (line !== 'ready') throw new Error(`subscribers did not start: ${line}`);
  }
  const rssIdle = await rss();

  let published: number;
  let startedAt: number;
  let acks: Record<number, number> = {};
  let refused = 0;
  if (mode === 'trailwire') {
    const posted = await postPayloads(ready.url, ready.partnerToken, ready.vins, run, seconds);
    ({ accepted: published, startedAt, acks, refused } = posted);
  } else {
    server.send(`publish ${seconds} ${run.rate}`);
    ({ published, startedAt } = JSON.parse(await server.next()) as { published: number; startedAt: number });
  }
  await new Promise((resolve) => setTimeout(resolve, 1500)); // let the queue drain and the last messages land
  server.send('stats');
  const stats = JSON.parse(await server.next()) as { hub: { pendingTrailers: number }; loopDelayMs: { p50: number; p99: number; max: number } };

  const reports: ClientReport[] = [];
  const ackLine = `report ${JSON.stringify(mode === 'trailwire' ? acks : {})}`;
  for (const client of clients) {
    client.send(ackLine);
    reports.push(JSON.parse(await client.next()) as ClientReport);
  }
  server.send('close');
  await once(server.process, 'exit');

  const ackLatencies = reports.flatMap((report) => report.ackLatencies);
  const publishLatencies = reports.flatMap((report) => report.publishLatencies);
  const delivered = reports.reduce((sum, report) => sum + report.received, 0);
  const offered = published * (run.subscribers / run.customers);
  const lastAt = Math.max(...reports.map((report) => report.lastAt));
  return {
    row: {
      server: mode,
      '202→stream p50 ms': mode === 'trailwire' ? round(percentile(ackLatencies, 50), 1) : '-',
      '202→stream p99 ms': mode === 'trailwire' ? round(percentile(ackLatencies, 99), 1) : '-',
      'publish→stream p50 ms': round(percentile(publishLatencies, 50), 1),
      'publish→stream p99 ms': round(percentile(publishLatencies, 99), 1),
      'delivered/offered': `${delivered}/${offered}`,
      'msgs/s': Math.round(delivered / ((lastAt - startedAt) / 1000)),
      'KiB RSS/idle sub': round((rssIdle - rssStart) / 1024 / run.subscribers, 1),
    },
    facts: { published, refused, delivered, offered, rssStart, rssIdle, pendingAtEnd: stats.hub.pendingTrailers, loopDelayMs: stats.loopDelayMs },
  };
}

/** Starts one server and `clientProcesses` subscriber processes for `subscribers` streams of one customer; answers once every stream has answered. */
async function startOneCustomer(mode: 'trailwire' | 'bare', subscribers: number, streamCap: number, clientProcesses: number, sampleEvery: number) {
  const server = child(SERVER, [mode, '1', '50', String(streamCap)]);
  const ready = JSON.parse(await server.next('its ready line')) as { port: number; tokens: string[] };
  const usage = async () => {
    server.send('rss');
    return JSON.parse(await server.next('its rss')) as { rss: number; cpuUs: number };
  };
  const rss = async () => (await usage()).rss;
  const rssStart = await rss();
  const clients = Array.from({ length: clientProcesses }, () => child(CLIENTS, []));
  const share = Math.ceil(subscribers / clientProcesses);
  clients.forEach((client, i) => {
    const tokens = Array.from({ length: Math.min(share, subscribers - i * share) }, () => ready.tokens[0]!);
    client.send(JSON.stringify({ port: ready.port, tokens, perConnection: 50, sampleEvery }));
  });
  for (const client of clients) {
    const line = await client.next("`ready` (every subscriber's first heartbeat)");
    if (line !== 'ready') throw new Error(`subscribers did not start: ${line}`);
  }
  const stop = async () => {
    for (const client of clients) client.process.kill();
    server.send('close');
    await once(server.process, 'exit');
  };
  return { server, clients, rss, usage, rssStart, stop };
}

/** Publish-to-receive p99 beyond which the server has fallen behind: its latency ran away. */
export const SATURATION_P99_MS = 1_000;
/** Server memory growth beyond which its buffers run away (the bare server's, which never drops). */
export const SATURATION_RSS_GROWTH_MB = 512;
/** Updates per second of one customer, each to every subscriber: the steps of the saturation run (a quarter apart or less up to 40, so that the figure says more than a doubling). */
export const SATURATION_RATES = [10, 15, 20, 25, 30, 35, 40, 50, 60, 70, 80, 100, 120, 160, 200, 250, 320];

/**
 * The saturation run on one server: each step publishes at its rate for `seconds`, then the
 * delivered messages/s, the p99 publish-to-receive latency of a sample (one update in 8), the
 * server's memory and its CPU time per message delivered (a figure the machine's other work moves
 * less than a throughput) are read; the steps stop at the first whose latency or memory ran away twice in a
 * row (a step that did is run again once: on a shared machine one other process's burst is enough
 * to push a p99 past the limit for a step).
 */
async function measureSaturation(mode: 'trailwire' | 'bare', subscribers: number, seconds: number, clientProcesses: number) {
  const run = await startOneCustomer(mode, subscribers, subscribers, clientProcesses, 8);
  const steps: Array<Record<string, string | number | boolean>> = [];
  let saturation = 0;
  try {
    const rssIdle = await run.rss();
    const mark = async () => {
      const marks = [];
      for (const client of run.clients) {
        client.send('mark');
        marks.push(JSON.parse(await client.next('its mark')) as { received: number; p99: number | null });
      }
      return { received: marks.reduce((sum, m) => sum + m.received, 0), p99: Math.max(...marks.map((m) => m.p99 ?? 0)) };
    };
    for (let i = 0, retried = false; i < SATURATION_RATES.length; i++) {
      const rate = SATURATION_RATES[i]!;
      await mark();
      const cpuBefore = (await run.usage()).cpuUs;
      run.server.send(`pace ${rate}`);
      await run.server.next('pacing started');
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      run.server.send('pace 0');
      const { published } = JSON.parse(await run.server.next('pacing stopped')) as { published: number };
      // What was written by the end of the step lands within this; a backlog beyond it is the latency's.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const { received, p99 } = await mark();
      const after = await run.usage();
      const rssGrowthMb = (after.rss - rssIdle) / 2 ** 20;
      const held = p99 < SATURATION_P99_MS && rssGrowthMb < SATURATION_RSS_GROWTH_MB;
      const delivered = Math.round(received / seconds);
      steps.push({ server: mode, 'upd/s': rate, 'offered msgs/s': Math.round((published * subscribers) / seconds), 'delivered msgs/s': delivered, 'p99 ms': round(p99, 1), 'RSS +MB': round(rssGrowthMb, 1), 'server CPU µs/msg': round((after.cpuUs - cpuBefore) / Math.max(1, received), 2), held });
      if (!held && !retried) {
        retried = true;
        i--;
        continue;
      }
      if (!held) break;
      retried = false;
      saturation = Math.max(saturation, delivered);
    }
  } finally {
    await run.stop();
  }
  return { saturation, steps };
}

/** Storms per server: the figure is their median (one storm's time moves with the machine's other work). */
export const STORMS = 3;

/** The reconnect storm on one server: every subscriber cancels and subscribes again at once, while updates flow; `STORMS` times. */
async function measureStorm(mode: 'trailwire' | 'bare', subscribers: number, clientProcesses: number) {
  const run = await startOneCustomer(mode, subscribers, 2 * subscribers, clientProcesses, 1);
  try {
    run.server.send('pace 20');
    await run.server.next('pacing started');
    const storms: Array<{ ms: number; firstMs: number; replayed: number }> = [];
    for (let i = 0; i < STORMS; i++) {
      // Two seconds of updates first: each stream has a position, and a resuming one misses some.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const resume = mode === 'trailwire' ? 1 : 0;
      for (const client of run.clients) client.send(`storm ${resume}`);
      const answers = [];
      for (const client of run.clients) answers.push(JSON.parse(await client.next('the end of its storm')) as { ms: number; firstMs: number; replayed: number });
      storms.push({ ms: Math.max(...answers.map((a) => a.ms)), firstMs: Math.max(...answers.map((a) => a.firstMs)), replayed: answers.reduce((sum, a) => sum + a.replayed, 0) });
    }
    run.server.send('pace 0');
    await run.server.next('pacing stopped');
    const median = [...storms].sort((a, b) => a.ms - b.ms)[Math.floor(STORMS / 2)]!;
    return {
      ms: median.ms,
      row: {
        server: mode,
        'all live again ms (median)': median.ms,
        'each storm ms': storms.map((storm) => storm.ms).join(', '),
        'all answered ms': median.firstMs,
        'updates replayed': mode === 'trailwire' ? median.replayed : '-',
      },
    };
  } finally {
    await run.stop();
  }
}

/** Runs the fan-out runs (Trailwire beside bare grpc-js), prints them, writes bench/results/livefeed-*.json. */
export async function runLiveFeedBench(options: { seconds?: number; clientProcesses?: number; runs?: string[] } = {}) {
  try {
    return await runLiveFeedRuns(options);
  } catch (error) {
    for (const process_ of running) process_.kill();
    throw error;
  }
}

async function runLiveFeedRuns(options: { seconds?: number; clientProcesses?: number; runs?: string[] }) {
  const seconds = options.seconds ?? 10;
  const clientProcesses = options.clientProcesses ?? 4;
  const chosen = new Set(options.runs ?? ['a', 'b', 'saturation', 'storm']);
  for (const name of chosen) if (!['a', 'b', 'saturation', 'storm'].includes(name)) throw new Error(`unknown livefeed run ${name}; choose from a, b, saturation, storm`);
  const results: object[] = [];
  for (const run of LIVE_RUNS.filter((_, i) => chosen.has(['a', 'b'][i]!))) {
    const trailwire = await measure('trailwire', run, seconds, clientProcesses);
    const bare = await measure('bare', run, seconds, clientProcesses);
    const ratio = round(trailwire.row['msgs/s'] / bare.row['msgs/s'], 2);
    const [delivered, offered] = trailwire.row['delivered/offered'].split('/').map(Number) as [number, number];
    const p99 = trailwire.row['202→stream p99 ms'] as number;
    const rssPerSub = trailwire.row['KiB RSS/idle sub'];
    const targets =
      run.customers > 1
        ? { 'p99 < 50 ms': p99 < 50, 'RSS < 25 KiB/sub': rssPerSub < 25 }
        : { 'nothing lost': delivered === offered && trailwire.facts.refused === 0, 'p99 < 250 ms': p99 < 250, '≥ 0.8 of bare msgs/s': ratio >= 0.8, 'RSS < 25 KiB/sub': rssPerSub < 25 };
    printTable(`LiveFeed ${run.name}, ${seconds} s, Trailwire/bare msgs/s = ${ratio}`, [trailwire.row, bare.row]);
    console.log(`targets: ${Object.entries(targets).map(([name, met]) => `${name} ${met ? 'met' : 'MISSED'}`).join(', ')}`);
    results.push({ run, rows: [trailwire.row, bare.row], facts: { trailwire: trailwire.facts, bare: bare.facts }, trailwireOverBareMsgs: ratio, targets });
  }
  if (chosen.has('saturation')) {
    const stepSeconds = 4;
    const trailwire = await measureSaturation('trailwire', 1000, stepSeconds, clientProcesses);
    const bare = await measureSaturation('bare', 1000, stepSeconds, clientProcesses);
    const ratio = bare.saturation > 0 ? round(trailwire.saturation / bare.saturation, 2) : Number.NaN;
    printTable(`LiveFeed saturation, 1,000 subs / 1 customer, ${stepSeconds} s a step: Trailwire ${trailwire.saturation} msgs/s, bare ${bare.saturation}, Trailwire/bare = ${ratio}`, [...trailwire.steps, ...bare.steps]);
    console.log(`targets: ≥ 0.8 of bare ${ratio >= 0.8 ? 'met' : 'MISSED'}`);
    results.push({ run: 'saturation', stepSeconds, p99LimitMs: SATURATION_P99_MS, rssLimitMb: SATURATION_RSS_GROWTH_MB, trailwire, bare, trailwireOverBare: ratio, targets: { '≥ 0.8 of bare': ratio >= 0.8 } });
  }
  if (chosen.has('storm')) {
    const trailwire = await measureStorm('trailwire', 1000, clientProcesses);
    const bare = await measureStorm('bare', 1000, clientProcesses);
    // A speed: bare's time over Trailwire's (1 = as fast as reconnecting to the bare server).
    const ratio = round(bare.ms / trailwire.ms, 2);
    printTable(`LiveFeed reconnect storm, 1,000 subs / 1 customer resubscribing at once, 20 upd/s, median of ${STORMS}: bare/Trailwire time = ${ratio}`, [trailwire.row, bare.row]);
    console.log(`targets: ≥ 0.8 of bare ${ratio >= 0.8 ? 'met' : 'MISSED'}`);
    results.push({ run: 'storm', rows: [trailwire.row, bare.row], bareOverTrailwireTime: ratio, targets: { '≥ 0.8 of bare': ratio >= 0.8 } });
  }
  console.log(`results: ${writeResults('livefeed', { seconds, clientProcesses, results })}`);
  return results;
}

/** `LIVEFEED_RUNS`: the runs to make (a, b, saturation, storm; default all). */
export function liveFeedRunsOf(value: string | undefined): string[] | undefined {
  return value === undefined || value === '' ? undefined : value.split(',').map((name) => name.trim());
}

if (import.meta.url === `file://${process.argv[1]}`) await runLiveFeedBench({ seconds: Number(process.env.BENCH_SECONDS ?? 10), runs: liveFeedRunsOf(process.env.LIVEFEED_RUNS) });
