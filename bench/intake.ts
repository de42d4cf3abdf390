/**
 * Intake benchmark (issue 3): 202/s and latency at 50 connections for Trailwire's intake beside a
 * bare node:http server that parses the JSON and answers 202, a bare Koa + @koa/router app doing
 * the same, and that Koa app storing each payload durably in SQLite first (one table, one commit per
 * event-loop turn: the ceiling of any Koa service that acknowledges durably), all in the same run,
 * each server in its own process (`lib/intake-server.ts`) so that the load generator does not share
 * its event loop. Besides the process's CPU per 202 it reports its main thread's (on Linux): with a
 * processing thread, the difference is what processing costs; and the load generator's CPU per
 * request, which the server does not have on a small machine. Trailwire runs in both durability modes with
 * processing in its worker thread (the default), and — to show what the thread is worth and what
 * the accept path alone costs — with processing on the event loop and with no processing at all.
 * For each Trailwire row it reports the queue: how far behind processing was when the load ended,
 * the deepest it got, and the drain rate (payloads processed per second, catching up included).
 *
 * Every request is a new GPS fix of one of a fleet of 20,000 VINs (a distinct row to write each time); the token
 * is reused; gps-basic's per-VIN limit is raised for the run. Each server gets a short warm-up
 * first. Every server is measured in each of three rounds (started afresh each time), and the table
 * and the targets are the median round's: on a shared machine the host's load drifts by tens of per
 * cent over the minutes the servers take one after another, which one pass would read as a
 * difference between them. Run alone with `node --import tsx bench/intake.ts` (BENCH_SECONDS=10,
 * BENCH_ROUNDS=3 by default).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { createInterface } from 'node:readline';
// autocannon ships no types; the bench uses a handful of its documented fields.
// @ts-expect-error -- untyped module
import autocannon from 'autocannon';
import { benchVins, gpsFixBody } from './lib/gps-load.ts';
import { percentile, printTable, round, SERVER_NODE_FLAGS, writeResults } from './lib/results.ts';

const SERVER = new URL('./lib/intake-server.ts', import.meta.url).pathname;

export const INTAKE_BENCH_SERVERS = [
  'node-http',
  'koa',
  'koa-sqlite',
  'trailwire-process-thread',
  'trailwire-power-thread',
  'trailwire-process-inline',
  'trailwire-process-none',
] as const;

export interface IntakeBenchOptions {
  /** Seconds of load per server. Default 10. */
  durationSeconds?: number;
  /** Seconds of warm-up load per server, not measured. Default 2. */
  warmupSeconds?: number;
  /** Concurrent connections. Default 50. */
  connections?: number;
  /** Distinct VINs the requests cycle over (the fleet). Default 20,000. */
  vins?: number;
  /** Rounds of every server, one after another; the figures and verdicts are the median round's (by nearest rank: an odd count gives the middle one). Default 3. */
  rounds?: number;
  /** Which servers to measure. Default: all of `INTAKE_BENCH_SERVERS`. */
  servers?: readonly (typeof INTAKE_BENCH_SERVERS)[number][];
}

interface Figures {
  cpuMs: number;
  /** The main thread's CPU (null off Linux): with a processing thread, the rest is processing. */
  mainCpuMs: number | null;
  cpuMsWithDrain?: number;
  processed?: number;
  failed?: number;
  processedAtLoadEnd?: number;
  depthAtLoadEnd?: number;
  maxDepth?: number;
  drainSeconds?: number | null;
}

interface RunningChild {
  child: ChildProcess;
  url: string;
  token: string;
  report(): Promise<Figures>;
}

async function startChild(mode: string): Promise<RunningChild> {
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, '--import', 'tsx', SERVER, mode], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`the ${mode} server ended early`);
    return JSON.parse(value as string);
  };
  const ready = await next();
  return {
    child,
    url: ready.url,
    token: ready.token,
    report: () => {
      child.stdin!.write('report\n');
      return next();
    },
  };
}

export async function runIntakeBench(options: IntakeBenchOptions = {}) {
  const duration = options.durationSeconds ?? 10;
  const warmup = options.warmupSeconds ?? 2;
  const connections = options.connections ?? 50;
  const vins = benchVins(options.vins ?? 20_000);
  const servers = options.servers ?? INTAKE_BENCH_SERVERS;
  const rounds = options.rounds ?? 3;
  let timestamp = 1780315200;
  const load = (server: RunningChild, seconds: number) => {
    let n = 0;
    return autocannon({
      url: server.url,
      connections,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
          setupRequest: (request: Record<string, unknown>) => ({
            ...request,
            path: `/api/v1/telemetry/intake/${vins[n++ % vins.length]}`,
            body: gpsFixBody(timestamp++),
          }),
        },
      ],
    });
  };

  /** One server measured once: started fresh, warmed up, loaded, its queue drained; its row and raw figures. */
  const measure = async (mode: string): Promise<{ row: Row; raw: unknown }> => {
    const server = await startChild(mode);
    try {
      await load(server, warmup);
      const before = await server.report();
      const clientStarted = process.cpuUsage();
      const result = await load(server, duration);
      const clientCpu = process.cpuUsage(clientStarted);
      const after = await server.report();
      const accepted = result['2xx'] as number;
      const seconds = result.duration as number;
      const cpuMs = after.cpuMs - (before.cpuMsWithDrain ?? before.cpuMs);
      const mainCpuMs = after.mainCpuMs === null || before.mainCpuMs === null ? null : after.mainCpuMs - before.mainCpuMs;
      const processed = after.processed === undefined ? undefined : after.processed - before.processed!;
      return {
        raw: { requests: result.requests, latency: result.latency, non2xx: result.non2xx, errors: result.errors, before, after },
        row: {
          server: mode,
          '202/s': Math.round(accepted / seconds),
          'p50 ms': result.latency.p50,
          'p99 ms': result.latency.p99,
          'non-2xx': result.non2xx + result.errors,
          'cpu µs/202': round((cpuMs * 1000) / Math.max(1, accepted), 1),
          'main µs/202': mainCpuMs === null ? '-' : round((mainCpuMs * 1000) / Math.max(1, accepted), 1),
          // The load generator shares the machine: what it spends per request is CPU the server does not have.
          'client µs/req': round((clientCpu.user + clientCpu.system) / Math.max(1, result.requests.total as number), 1),
          'processed/s': processed === undefined || after.drainSeconds === null ? '-' : Math.round(processed / (seconds + after.drainSeconds!)),
          'max depth': after.maxDepth ?? '-',
          'behind at end': after.depthAtLoadEnd ?? '-',
          'catch-up s': after.drainSeconds === undefined || after.drainSeconds === null ? '-' : round(after.drainSeconds, 2),
        },
      };
    } finally {
      server.child.kill();
    }
  };

  // Rounds, each measuring every server in turn: a ratio is taken between servers of the same round,
  // minutes apart at most, and the verdict is the median round's, so that the host's drift between
  // the first server and the last (on a shared machine, tens of per cent) decides no target alone.
  const roundsRows: Row[][] = [];
  const raw: Array<Record<string, unknown>> = [];
  for (let index = 0; index < rounds; index++) {
    const rows: Row[] = [];
    const roundRaw: Record<string, unknown> = {};
    for (const mode of servers) {
      const measured = await measure(mode);
      rows.push(measured.row);
      roundRaw[mode] = measured.raw;
    }
    roundsRows.push(rows);
    raw.push(roundRaw);
  }
  const rows = medianRows(roundsRows);
  const bare = rows.find((row) => row.server === 'node-http')?.['202/s'] as number | undefined;
  if (bare) for (const row of rows) row['x node:http'] = round((row['202/s'] as number) / bare, 2);
  const each = rounds === 1 ? '' : `, median of ${rounds} rounds`;
  printTable(`Intake: ${connections} connections, ${duration} s each after ${warmup} s warm-up${each}, token reused, ${vins.length} VINs (gps-basic limit raised)`, rows);
  const budget = cpuBudget(rows, bare);
  if (budget) console.log(budget);
  const targets = targetLines(roundsRows);
  for (const line of targets) console.log(line);
  const results = { durationSeconds: duration, warmupSeconds: warmup, connections, vins: vins.length, rounds, rows, roundsRows, targets, raw };
  console.log(`results: ${writeResults('intake', results)}`);
  return results;
}

type Row = Record<string, string | number>;

/** Per server, each figure's median over the rounds (by nearest rank: a figure one round measured; one that is not a number is the first round's). */
function medianRows(roundsRows: Row[][]): Row[] {
  return roundsRows[0]!.map((first, index) => {
    const row: Row = {};
    for (const [column, value] of Object.entries(first)) {
      const values = roundsRows.map((rows) => rows[index]![column]);
      row[column] = typeof value === 'number' && values.every((v) => typeof v === 'number') ? percentile(values as number[], 50) : value;
    }
    return row;
  });
}

/**
 * The intake targets, each with the ratio of every round, the median round's, and whether that one
 * met it: 202/s against bare node:http with processing keeping up (in every round), `power` against
 * `process`, and the HTTP thread's CPU per 202 against Koa storing the payload in SQLite.
 */
function targetLines(roundsRows: Row[][]): string[] {
  const lines: string[] = [];
  const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
  const perRound = (numerator: string, denominator: string, column: string): number[] | undefined => {
    const ratios = roundsRows.map((rows) => {
      const [top, bottom] = [rows.find((row) => row.server === numerator)?.[column], rows.find((row) => row.server === denominator)?.[column]];
      return typeof top === 'number' && typeof bottom === 'number' ? top / bottom : undefined;
    });
    return ratios.every((ratio) => ratio !== undefined) ? (ratios as number[]) : undefined;
  };
  const told = (ratios: number[]) => {
    const middle = percentile(ratios, 50);
    return { middle, text: ratios.length === 1 ? `${round(middle, 3)} x` : `${round(middle, 3)} x (rounds: ${ratios.map((ratio) => round(ratio, 3)).join(', ')})` };
  };
  const overBare = perRound('trailwire-process-thread', 'node-http', '202/s');
  if (overBare) {
    const processRows = roundsRows.map((rows) => rows.find((row) => row.server === 'trailwire-process-thread')!);
    const keepsUp = processRows.every((row) => typeof row['behind at end'] === 'number' && row['behind at end'] <= (row['202/s'] as number) && (row['catch-up s'] as number) < 5);
    const { middle, text } = told(overBare);
    const lags = processRows.map((row) => row['behind at end']).join(', ');
    lines.push(`target 202/s >= 0.4 x node:http, processing keeping up: ${text}, ${lags} behind at load end (${verdict(middle >= 0.4 && keepsUp)})`);
  }
  const powerOverProcess = perRound('trailwire-power-thread', 'trailwire-process-thread', '202/s');
  if (powerOverProcess) {
    const { middle, text } = told(powerOverProcess);
    lines.push(`target power >= 0.8 x process: ${text} (${verdict(middle >= 0.8)})${middle >= 0.8 ? '' : powerCost(medianRows(roundsRows))}`);
  }
  const httpThread = perRound('trailwire-process-thread', 'koa-sqlite', 'main µs/202');
  if (httpThread) {
    const { middle, text } = told(httpThread);
    lines.push(`target HTTP thread <= 1.5 x koa-sqlite: ${text} (${verdict(middle <= 1.5)})${middle <= 1.5 ? '' : httpThreadCost(medianRows(roundsRows))}`);
  }
  return lines;
}

/**
 * Why `power` falls short of `process`, from the run's figures: what a 202 costs more when it waits
 * for the journal's fdatasync — on the HTTP thread (the event-loop turns that answer each sync's
 * groups) and in all (besides, the syncs' own kernel work: the journal's, and the processing
 * thread's commits at `synchronous = FULL`) — and how much longer it waits.
 */
function powerCost(rows: Row[]): string {
  const [power, processOnly] = ['trailwire-power-thread', 'trailwire-process-thread'].map((server) => rows.find((row) => row.server === server));
  if (!power || !processOnly) return '';
  const more = (column: string) =>
    typeof power[column] === 'number' && typeof processOnly[column] === 'number' ? `${round((power[column] as number) - (processOnly[column] as number), 1)} µs` : '?';
  return (
    `; a power 202 waits for an fdatasync of the journal (p50 ${power['p50 ms']} ms against ${processOnly['p50 ms']}) and costs ${more('cpu µs/202')} more CPU,` +
    ` ${more('main µs/202')} of it on the HTTP thread (the turns that answer each sync), the rest in syncs (the journal's, and the processing thread's FULL commits)`
  );
}

/**
 * Why Trailwire's HTTP thread costs more than Koa + SQLite's, from the run's figures: what it spends
 * beyond it per 202, and bare Koa's figure beside it — Koa + SQLite's requests wait for its write and
 * so gather into fewer event-loop turns, which can make it cheaper per request than Koa alone, so
 * the baseline moves with how requests happen to group.
 */
function httpThreadCost(rows: Row[]): string {
  const [trailwire, koaSqlite, koa] = ['trailwire-process-thread', 'koa-sqlite', 'koa'].map((server) => rows.find((row) => row.server === server)?.['main µs/202']);
  if (typeof trailwire !== 'number' || typeof koaSqlite !== 'number') return '';
  // Said only where it shows: bare Koa dearer per request than Koa + SQLite.
  const bareKoa = typeof koa === 'number' && koa > koaSqlite ? ` (bare Koa's ${koa} µs: its requests do not wait for a write, and gather into more, smaller turns)` : '';
  return (
    `; the HTTP thread spent ${trailwire} µs per 202 against Koa + SQLite's ${koaSqlite}${bareKoa}: ${round(trailwire - koaSqlite, 1)} µs more for` +
    ' the accept path (auth, limit, validation, ids: `npm run bench -- accept-path` counts it alone) and each turn\'s hand-over to the journal and the processing thread'
  );
}

/**
 * The CPU the target (0.4 × node:http) takes with processing keeping up, at the CPU per
 * request each side spent in this run: the server's (both threads) and the load generator's, which
 * share the machine. With the intake journal nothing waits for SQLite's lock on the accept path, so
 * this is what bounds the rate: the cores the three busy threads (HTTP, processing, load generator)
 * share.
 */
function cpuBudget(rows: Row[], bare: number | undefined): string | undefined {
  const row = rows.find((candidate) => candidate.server === 'trailwire-process-thread');
  if (!bare || !row) return undefined;
  const rate = Math.round(0.4 * bare);
  const cores = (rate * ((row['cpu µs/202'] as number) + (row['client µs/req'] as number))) / 1e6;
  const acceptOnly = rows.find((candidate) => candidate.server === 'trailwire-process-none');
  const why = acceptOnly ? ` Accepting only (no processing thread) reached ${round((acceptOnly['202/s'] as number) / bare, 2)} × node:http.` : '';
  return `At 0.4 × node:http (${rate} 202/s), trailwire-process-thread (${row['cpu µs/202']} µs per 202, ${row['main µs/202']} of them on the HTTP thread) and its load generator (${row['client µs/req']} µs) would need ${round(cores, 2)} of this machine's ${cpus().length} cores.${why}`;
}

if (import.meta.url === `file://${process.argv[1]}`) await runIntakeBench({ durationSeconds: Number(process.env.BENCH_SECONDS ?? 10), rounds: Number(process.env.BENCH_ROUNDS ?? 3) });
