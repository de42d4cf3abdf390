/**
 * Webhook benchmark (issue 40), against the compiled build as an operator runs it: `trailwire serve`
 * on an SQLite file with `--webhook-allow-http --webhook-allow-private`, its endpoints' receivers in
 * a process of their own (`lib/webhook-receivers.ts`, answering 204 at once).
 *
 * (a) Latency: 500 updates/s for 20 s (after 3 s of warm-up) spread over 2,000 registered trailers
 *     of 5 customers, each customer with one endpoint (100 updates/s each), then of 100 customers
 *     (5 updates/s each: a spread-out load); each update's latency is from its 202 (as the
 *     load generator reads it) to the receiver's arrival of that update (matched by VIN and the fix's
 *     timestamp), both read from the wall clock of this machine. p50/p95/p99/max, and every update
 *     must arrive at least once. Target: p99 < 1 s. With `BENCH_BASELINE_BIN` (another build's
 *     `dist/bin/trailwire.js`) the same load runs against it too, in the same run.
 * (b) Intake with 100 endpoints active: the intake bench's load (50 connections, GPS fixes over
 *     20,000 VINs; here registered, 200 trailers to each of 100 customers) against three servers of
 *     that fleet: each customer with an endpoint (`100-endpoints`); the same endpoints `failing`, so
 *     that every event is written to the outbox and none is sent (`outbox-only`: what the outbox costs
 *     processing, and by difference what delivering costs); no endpoints. Taken in turns in slices of
 *     2 s as `bench/intake.ts` does (each slice ends once the server's queue has drained and, with
 *     endpoints, its outbox and pending deliveries are empty, so that no work spills into another's
 *     slice), three rounds, each server started afresh. Target: 202/s with endpoints ≥ 0.9 × without,
 *     the median round's. Beside it, per server: the HTTP (main) thread's CPU per 202, its event-loop
 *     delay p99 over each slice (`trailwire_nodejs_eventloop_lag_p99_seconds`, the median slice's and
 *     the worst), how long the deliveries took to catch up after a slice, and how full they were.
 *
 * Run alone with `node --import tsx bench/webhooks.ts` after `npm run build`; BENCH_SECONDS (per server
 * and round in (b), default 10), BENCH_ROUNDS (3), BENCH_LATENCY_SECONDS (20), BENCH_PARTS (`latency,intake`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
// autocannon ships no types; the bench uses a handful of its documented fields.
// @ts-expect-error -- untyped module
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../dist/adapters/sqlite/index.js';
import { createTrailwire } from '../dist/core/trailwire.js';
import { benchVins, gpsFixBody } from './lib/gps-load.ts';
import { scrapeMetric } from './lib/healthz-probe.ts';
import { percentile, printTable, round, writeResults } from './lib/results.ts';
import { startServe as startServeProcess, stopServe } from './lib/serve-process.ts';
import { cpuMsOfStat } from './lib/service-cpu.ts';

const THIS_BIN = fileURLToPath(new URL('../dist/bin/trailwire.js', import.meta.url));
const RECEIVERS = fileURLToPath(new URL('./lib/webhook-receivers.ts', import.meta.url));

/** Issue 40's targets. */
const LATENCY_P99_TARGET_MS = 1000;
const INTAKE_RATIO_TARGET = 0.9;

export interface WebhookBenchOptions {
  /** Which parts: `latency` (a) and `intake` (b). Default both. */
  parts?: readonly ('latency' | 'intake')[];
  /** (a) Updates per second. Default 500. */
  rate?: number;
  /** (a) Seconds of measured load. Default 20. */
  latencySeconds?: number;
  /** (a) Another build to measure beside this one (its `dist/bin/trailwire.js`). Default: none. */
  baselineBin?: string;
  /** (b) Seconds of load per server and round. Default 10. */
  durationSeconds?: number;
  /** (b) Rounds. Default 3. */
  rounds?: number;
}

export async function runWebhookBench(options: WebhookBenchOptions = {}) {
  const parts = options.parts ?? ['latency', 'intake'];
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-webhooks-'));
  const receivers = await startReceivers();
  const load = { before: round(loadavg()[0]!, 2), after: 0 };
  try {
    const latency = [];
    if (parts.includes('latency')) {
      const builds: Array<[string, string]> = [['this', THIS_BIN]];
      if (options.baselineBin) builds.push(['baseline', options.baselineBin]);
      for (const customers of [5, 100])
        for (const [build, bin] of builds) latency.push(await measureLatency(dir, receivers, build, bin, customers, options.rate ?? 500, options.latencySeconds ?? 20));
      printTable(`(a) Webhook latency from the 202 to the receiver: ${options.rate ?? 500} updates/s for ${options.latencySeconds ?? 20} s over 2,000 trailers of 5 (then 100) customers, one endpoint each (target p99 < ${LATENCY_P99_TARGET_MS} ms)`, latency);
    }
    const intake = parts.includes('intake') ? await measureIntake(dir, receivers, options.durationSeconds ?? 10, options.rounds ?? 3) : undefined;
    load.after = round(loadavg()[0]!, 2);
    const targets = [
      ...latency
        .filter((row) => row.build === 'this')
        .map((row) => `target p99 < ${LATENCY_P99_TARGET_MS} ms (${row.endpoints} endpoints): ${row['p99 ms']} ms, ${row.missing} missing (${verdict(row['p99 ms'] < LATENCY_P99_TARGET_MS && row.missing === 0)})`),
      ...(intake ? [intake.target] : []),
    ];
    for (const line of targets) console.log(line);
    console.log(`load average (1 min): ${load.before} at the start, ${load.after} at the end`);
    const results = { load, latency, intake, targets };
    console.log(`results: ${writeResults('webhooks', results)}`);
    return results;
  } finally {
    receivers.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

const verdict = (met: boolean) => (met ? 'met' : 'NOT met');

// --- the fleet and the server ---------------------------------------------------------------------

interface Seeded {
  partnerKey: string;
  vins: string[];
}

/**
 * A store file with a gps-basic partner and `customers` customers of `trailersPerCustomer` trailers
 * each (one fleet each), and, when `hookUrl` names one, an endpoint per customer at that URL.
 */
async function seedFleet(db: string, customers: number, trailersPerCustomer: number, hookUrl?: (customer: number) => string): Promise<Seeded> {
  const store = await openSqliteStore({ file: db });
  const trailwire = await createTrailwire({ store, worker: false, webhooks: { rules: { allowHttp: true, allowPrivate: true } } });
  try {
    const partner = await trailwire.auth.createPartner({ name: 'Bench', product: 'gps-basic' });
    const vins = benchVins(customers * trailersPerCustomer);
    for (let c = 0; c < customers; c++) {
      const customer = await trailwire.auth.createCustomer({ name: `Customer ${c}` });
      const fleet = await trailwire.admin.createFleet({ customerId: customer.principal.id, name: `Fleet ${c}` });
      for (let t = 0; t < trailersPerCustomer; t++)
        await store.createTrailer({ id: randomUUID(), fleetId: fleet.id, vin: vins[c * trailersPerCustomer + t]!, unitId: null, createdAt: Date.now() });
      if (hookUrl) await trailwire.webhooks.service.create(customer.principal.id, { url: hookUrl(c) });
    }
    return { partnerKey: partner.apiKey, vins };
  } finally {
    await trailwire.close();
  }
}

interface Serve {
  child: ChildProcess;
  url: URL;
  token: string;
}

/** `trailwire serve` on the file, as an operator runs it with local receivers allowed; the partner's token. */
async function startServe(bin: string, db: string, partnerKey: string): Promise<Serve> {
  const { child, printed } = await startServeProcess(bin, [
    '--db',
    db,
    '--log-level',
    'warn',
    '--webhook-allow-http',
    '--webhook-allow-private',
    // The bench measures webhooks, not the limiter.
    '--partner-intake-limit',
    '1000000000/60',
    '--product-limit',
    'gps-basic=1000000000/60',
  ]);
  const url = new URL(printed.url);
  const answer = await fetch(new URL('/api/v1/partners/authenticate', url), { method: 'POST', headers: { 'x-api-key': partnerKey } });
  return { child, url, token: ((await answer.json()) as { access_token: string }).access_token };
}

/** CPU time in ms of a process and of its main thread, from /proc (Linux). */
function cpuOf(pid: number): { process: number; main: number } {
  const read = (path: string) => {
    const ms = cpuMsOfStat(path);
    if (ms === undefined) throw new Error(`cannot read ${path}: the bench needs Linux's /proc`);
    return ms;
  };
  return { process: read(`/proc/${pid}/stat`), main: read(`/proc/${pid}/task/${pid}/stat`) };
}

// --- the receivers ----------------------------------------------------------------------------------

interface Receivers {
  child: ChildProcess;
  port: number;
  ask<T>(command: string): Promise<T>;
}

async function startReceivers(): Promise<Receivers> {
  const child = spawn(process.execPath, ['--import', 'tsx', RECEIVERS], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error('the receivers ended');
    return JSON.parse(value as string);
  };
  const { port } = (await next()) as { port: number };
  // One question at a time: answers come in order.
  let queue: Promise<unknown> = Promise.resolve();
  const ask = <T>(command: string): Promise<T> => {
    const answer = queue.then(() => {
      child.stdin!.write(`${command}\n`);
      return next() as Promise<T>;
    });
    queue = answer.catch(() => undefined);
    return answer;
  };
  return { child, port, ask };
}

type Counts = { groups: Record<string, { deliveries: number; events: number } | undefined> };

// --- (a) latency ------------------------------------------------------------------------------------

async function measureLatency(dir: string, receivers: Receivers, build: string, bin: string, customers: number, rate: number, seconds: number) {
  const group = `latency-${build}-${customers}`;
  const db = join(dir, `${group}.db`);
  const seeded = await seedFleet(db, customers, 2000 / customers, (c) => `http://127.0.0.1:${receivers.port}/${group}/${c}`);
  const server = await startServe(bin, db, seeded.partnerKey);
  try {
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    // Fix times a day back, one second apart per request: each VIN's fixes move its latest forward.
    const base = Math.floor(Date.now() / 1000) - 86_400;
    let sequence = 0;
    const send = (measured: Map<string, number>, failures: { count: number }) => {
      const n = sequence++;
      const vin = seeded.vins[n % seeded.vins.length]!;
      const timestamp = base + n;
      const req = request(
        { agent, host: server.url.hostname, port: server.url.port, method: 'POST', path: `/api/v1/telemetry/intake/${vin}`, headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 202) measured.set(`${vin}|${new Date(timestamp * 1000).toISOString()}`, performance.timeOrigin + performance.now());
            else failures.count++;
          });
        },
      );
      req.on('error', () => failures.count++);
      req.end(gpsFixBody(timestamp));
    };
    /** `rate` requests a second for `ms`, paced every 10 ms; resolves once every answer is in. */
    const paced = async (ms: number, measured: Map<string, number>, failures: { count: number }) => {
      const started = performance.now();
      let sent = 0;
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          const elapsed = Math.min(ms, performance.now() - started);
          const due = Math.floor((elapsed * rate) / 1000);
          while (sent < due) (send(measured, failures), sent++);
          if (elapsed >= ms) (clearInterval(timer), resolve());
        }, 10);
      });
      for (let waited = 0; measured.size + failures.count < sent && waited < 10_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
      return sent;
    };
    await paced(3000, new Map(), { count: 0 });
    const measured = new Map<string, number>();
    const failures = { count: 0 };
    await scrapeMetric(server.url, 'trailwire_nodejs_eventloop_lag_p99_seconds');
    const cpuBefore = cpuOf(server.child.pid!);
    const countsBefore = ((await receivers.ask<Counts>('counts')).groups[group]) ?? { deliveries: 0, events: 0 };
    const sent = await paced(seconds * 1000, measured, failures);
    const loopLag = await scrapeMetric(server.url, 'trailwire_nodejs_eventloop_lag_p99_seconds');
    const cpuAfter = cpuOf(server.child.pid!);
    // Every measured update must arrive: wait for them (at most 30 s), then match.
    let arrivals = new Map<string, number>();
    let duplicates = 0;
    for (let waited = 0; waited < 30_000; waited += 250) {
      const answer = await receivers.ask<{ arrivals: Array<[string, number]>; duplicates: number }>(`arrivals ${group}`);
      arrivals = new Map(answer.arrivals);
      duplicates = answer.duplicates;
      if ([...measured.keys()].every((key) => arrivals.has(key))) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const countsAfter = (await receivers.ask<Counts>('counts')).groups[group]!;
    const latencies: number[] = [];
    let missing = 0;
    for (const [key, acceptedAt] of measured) {
      const arrived = arrivals.get(key);
      if (arrived === undefined) missing++;
      else latencies.push(arrived - acceptedAt);
    }
    const deliveries = countsAfter.deliveries - countsBefore.deliveries;
    return {
      build,
      endpoints: customers,
      sent,
      accepted: measured.size,
      'non-202': failures.count,
      missing,
      duplicates,
      'p50 ms': round(percentile(latencies, 50), 1),
      'p95 ms': round(percentile(latencies, 95), 1),
      'p99 ms': round(percentile(latencies, 99), 1),
      'max ms': round(percentile(latencies, 100), 1),
      deliveries,
      'events/delivery': round((countsAfter.events - countsBefore.events) / Math.max(1, deliveries), 2),
      'loop p99 ms': round(loopLag * 1000, 1),
      'cpu µs/update': round(((cpuAfter.process - cpuBefore.process) * 1000) / Math.max(1, measured.size), 1),
      'main µs/update': round(((cpuAfter.main - cpuBefore.main) * 1000) / Math.max(1, measured.size), 1),
    };
  } finally {
    await stopServe(server.child);
  }
}

// --- (b) intake with 100 endpoints ------------------------------------------------------------------

/**
 * The servers of (b): 100 endpoints delivering; the same 100 endpoints `failing` (their events are
 * written to the outbox with each batch, nothing is sent: what the outbox costs processing alone, so
 * that the difference to the first is what delivering costs); no endpoints.
 */
const INTAKE_SERVERS = ['100-endpoints', 'outbox-only', 'no-endpoints'] as const;
type IntakeServer = (typeof INTAKE_SERVERS)[number];
const HOOK_GROUP = 'intake';
const DELIVERING = `${HOOK_GROUP}-100-endpoints`;

interface Slice {
  accepted: number;
  /** Deliveries and events that reached the receivers from the slice's start until its work was done. */
  deliveries: number;
  events: number;
  seconds: number;
  p99: number;
  failures: number;
  cpuMs: number;
  mainCpuMs: number;
  loopLagMs: number;
  /** The receivers' process's CPU from the slice's start until its work was done: the bench's, sharing the machine. */
  receiversCpuMs: number;
  /** Events not yet delivered when the load ended, and how long they took to arrive (null without endpoints). */
  undeliveredAtEnd: number | null;
  catchUpSeconds: number;
}

async function measureIntake(dir: string, receivers: Receivers, duration: number, rounds: number) {
  const customers = 100;
  const connections = 50;
  const sliceSeconds = 2;
  const slices = Math.max(1, Math.round(duration / sliceSeconds));
  const warmup = 2;
  // One seeded file per server, copied afresh for each round.
  const templates = {} as Record<IntakeServer, { db: string; seeded: Seeded }>;
  for (const server of INTAKE_SERVERS) {
    const db = join(dir, `${server}.db`);
    const seeded = await seedFleet(db, customers, 200, server === 'no-endpoints' ? undefined : (c) => `http://127.0.0.1:${receivers.port}/${HOOK_GROUP}-${server}/${c}`);
    if (server === 'outbox-only') {
      const file = new Database(db);
      file.prepare(`UPDATE webhook_endpoints SET status = 'failing', failing_since = ?`).run(Date.now());
      file.close();
    }
    if (existsSync(`${db}-wal`)) throw new Error(`${db}: the seeded store left a WAL behind`);
    templates[server] = { db, seeded };
  }
  let timestamp = 1780315200;
  const vins = templates['no-endpoints'].seeded.vins;
  const load = (server: Serve, seconds: number) => {
    let n = 0;
    return autocannon({
      url: server.url.href,
      connections,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
          setupRequest: (req: Record<string, unknown>) => ({ ...req, path: `/api/v1/telemetry/intake/${vins[n++ % vins.length]}`, body: gpsFixBody(timestamp++) }),
        },
      ],
    });
  };
  const hookEvents = async () => (await receivers.ask<Counts>('counts')).groups[DELIVERING]?.events ?? 0;

  const roundsRows: Array<Array<Record<string, string | number>>> = [];
  const raw: Array<Record<string, Slice[]>> = [];
  for (let roundIndex = 0; roundIndex < rounds; roundIndex++) {
    const running = new Map<IntakeServer, Serve & { acceptedSoFar: number; eventsAtStart: number; undelivered?: () => number; close(): void }>();
    try {
      for (const name of INTAKE_SERVERS) {
        const db = join(dir, `${name}-round-${roundIndex}.db`);
        copyFileSync(templates[name].db, db);
        const serve = await startServe(THIS_BIN, db, templates[name].seeded.partnerKey);
        const reader = name === '100-endpoints' ? new Database(db, { readonly: true }) : undefined;
        const undelivered = reader?.prepare<[], number>(
          `SELECT (SELECT count(*) FROM webhook_outbox) + (SELECT coalesce(sum(event_count), 0) FROM webhook_deliveries WHERE state = 'pending')`,
        );
        running.set(name, { ...serve, acceptedSoFar: 0, eventsAtStart: await hookEvents(), undelivered: undelivered && (() => undelivered.pluck().get()!), close: () => reader?.close() });
      }
      /**
       * Waits for the server's queue to drain and, with endpoints, for its outbox and pending deliveries
       * to empty (read from its file: the server's own state); answers what was undelivered at first.
       */
      const drained = async (name: IntakeServer) => {
        const server = running.get(name)!;
        const began = performance.now();
        let undelivered: number | null = null;
        for (;;) {
          const depth = await scrapeMetric(server.url, 'trailwire_intake_queue_depth');
          const behind = server.undelivered?.() ?? 0;
          undelivered ??= server.undelivered ? behind : null;
          if (depth === 0 && behind === 0) break;
          if (performance.now() - began > 60_000) throw new Error(`${name}: ${depth} queued and ${behind} events undelivered after a minute`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return { undelivered, seconds: (performance.now() - began) / 1000 };
      };
      for (const name of INTAKE_SERVERS) {
        const server = running.get(name)!;
        const result = await load(server, warmup);
        server.acceptedSoFar += result['2xx'] as number;
        await drained(name);
      }
      const measured = new Map<IntakeServer, Slice[]>(INTAKE_SERVERS.map((name) => [name, []]));
      for (let slice = 0; slice < slices; slice++)
        for (let turn = 0; turn < INTAKE_SERVERS.length; turn++) {
          const name = INTAKE_SERVERS[(slice + turn) % INTAKE_SERVERS.length]!;
          const server = running.get(name)!;
          await scrapeMetric(server.url, 'trailwire_nodejs_eventloop_lag_p99_seconds');
          const hooksBefore = (await receivers.ask<Counts>('counts')).groups[DELIVERING] ?? { deliveries: 0, events: 0 };
          const before = cpuOf(server.child.pid!);
          const receiversBefore = cpuOf(receivers.child.pid!).process;
          const result = await load(server, sliceSeconds);
          const loopLag = await scrapeMetric(server.url, 'trailwire_nodejs_eventloop_lag_p99_seconds');
          const after = cpuOf(server.child.pid!);
          server.acceptedSoFar += result['2xx'] as number;
          const caughtUp = await drained(name);
          const receiversCpuMs = cpuOf(receivers.child.pid!).process - receiversBefore;
          const hooksAfter = (await receivers.ask<Counts>('counts')).groups[DELIVERING] ?? { deliveries: 0, events: 0 };
          measured.get(name)!.push({
            deliveries: hooksAfter.deliveries - hooksBefore.deliveries,
            events: hooksAfter.events - hooksBefore.events,
            accepted: result['2xx'] as number,
            seconds: result.duration as number,
            p99: result.latency.p99 as number,
            failures: (result.non2xx as number) + (result.errors as number),
            cpuMs: after.process - before.process,
            mainCpuMs: after.main - before.main,
            loopLagMs: loopLag * 1000,
            receiversCpuMs,
            undeliveredAtEnd: caughtUp.undelivered,
            catchUpSeconds: caughtUp.seconds,
          });
        }
      roundsRows.push(INTAKE_SERVERS.map((name) => intakeRow(name, measured.get(name)!)));
      raw.push(Object.fromEntries(measured));
      const delivering = running.get('100-endpoints')!;
      const delivered = (await hookEvents()) - delivering.eventsAtStart;
      if (delivered < delivering.acceptedSoFar) throw new Error(`${delivered} events delivered for ${delivering.acceptedSoFar} updates`);
      const sentToFailing = (await receivers.ask<Counts>('counts')).groups[`${HOOK_GROUP}-outbox-only`];
      if (sentToFailing) throw new Error(`failing endpoints were sent ${sentToFailing.deliveries} deliveries`);
    } finally {
      for (const server of running.values()) {
        server.close();
        await stopServe(server.child);
      }
    }
  }
  const rate = (rows: Array<Record<string, string | number>>, server: IntakeServer) => rows.find((row) => row.server === server)!['202/s'] as number;
  const ratiosOf = (top: IntakeServer, bottom: IntakeServer) => roundsRows.map((rows) => rate(rows, top) / rate(rows, bottom));
  const told = (ratios: number[]) => `${round(percentile(ratios, 50), 3)} x (rounds: ${ratios.map((ratio) => round(ratio, 3)).join(', ')})`;
  const ratios = ratiosOf('100-endpoints', 'no-endpoints');
  const median = percentile(ratios, 50);
  const medianRound = roundsRows[ratios.indexOf(median)]!;
  printTable(
    `(b) Intake, ${connections} connections, ${duration} s per server in ${slices} slices taken in turns, ${vins.length} registered VINs of ${customers} customers; the median round's (by the target's ratio)`,
    medianRound,
  );
  const parts = {
    delivering: told(ratiosOf('100-endpoints', 'outbox-only')),
    outbox: told(ratiosOf('outbox-only', 'no-endpoints')),
  };
  console.log(`of which delivering (100 endpoints / outbox only): ${parts.delivering}; the outbox writes (outbox only / no endpoints): ${parts.outbox}`);
  const target = `target 202/s with 100 endpoints >= ${INTAKE_RATIO_TARGET} x without: ${told(ratios)} (${verdict(median >= INTAKE_RATIO_TARGET)})`;
  return { connections, durationSeconds: duration, slices, rounds, ratios, median, parts, medianRound, roundsRows, raw, target };
}

function intakeRow(server: IntakeServer, slices: Slice[]): Record<string, string | number> {
  const sum = (figure: (slice: Slice) => number) => slices.reduce((total, slice) => total + figure(slice), 0);
  const accepted = sum((slice) => slice.accepted);
  const lags = slices.map((slice) => slice.loopLagMs);
  return {
    server,
    '202/s': Math.round(accepted / sum((slice) => slice.seconds)),
    'p99 ms': percentile(slices.map((slice) => slice.p99), 50),
    'non-2xx': sum((slice) => slice.failures),
    'cpu µs/202': round((sum((slice) => slice.cpuMs) * 1000) / Math.max(1, accepted), 1),
    'main µs/202': round((sum((slice) => slice.mainCpuMs) * 1000) / Math.max(1, accepted), 1),
    'loop p99 ms': round(percentile(lags, 50), 1),
    'loop p99 worst': round(Math.max(...lags), 1),
    'undelivered at end': slices.every((slice) => slice.undeliveredAtEnd !== null) ? Math.max(...slices.map((slice) => slice.undeliveredAtEnd!)) : '-',
    'catch-up s': round(Math.max(...slices.map((slice) => slice.catchUpSeconds)), 2),
    deliveries: sum((slice) => slice.deliveries),
    'events/delivery': round(sum((slice) => slice.events) / Math.max(1, sum((slice) => slice.deliveries)), 1),
    // A receiver elsewhere costs this machine nothing; here it shares the cores with the server.
    'receivers µs/202': round((sum((slice) => slice.receiversCpuMs) * 1000) / Math.max(1, accepted), 1),
  };
}

if (import.meta.url === `file://${process.argv[1]}`)
  await runWebhookBench({
    parts: (process.env.BENCH_PARTS?.split(',') as WebhookBenchOptions['parts']) ?? undefined,
    durationSeconds: Number(process.env.BENCH_SECONDS ?? 10),
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
    latencySeconds: Number(process.env.BENCH_LATENCY_SECONDS ?? 20),
    baselineBin: process.env.BENCH_BASELINE_BIN,
  });
