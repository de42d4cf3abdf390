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
 * first. The servers of a round run side by side and take the load in turns, in slices of two
 * seconds (each slice ends once the loaded server's queue is drained, before the next server's
 * begins), so that each server's ten seconds are spread over the same minutes as every other's: on
 * these shared machines the host's speed drifts by tens of per cent within a minute, which ten
 * seconds of one server and then ten of the next would read as a difference between them (the
 * ratios of one round so measured spread over 0.65–1.23 for the same code). Every server is measured
 * in each of three rounds (started afresh each time), and the table and the targets are the median
 * round's. Run alone with `node --import tsx bench/intake.ts` (BENCH_SECONDS=10, BENCH_ROUNDS=3 by
 * default).
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

/** Issue 27's target: Trailwire's 202/s with its processing thread keeping up, over bare node:http's. */
const INTAKE_TARGET = 0.45;

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
  /** Seconds of load per server and round. Default 10. */
  durationSeconds?: number;
  /** The load of each server is given in slices of about this many seconds, the servers taking turns. Default 2. */
  sliceSeconds?: number;
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
  const slices = Math.max(1, Math.round(duration / (options.sliceSeconds ?? 2)));
  const sliceSeconds = duration / slices;
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

  /** One slice of one server's load, from a drained queue to a drained queue: what it measured. */
  const measureSlice = async (server: RunningChild): Promise<SliceFigures> => {
    const before = await server.report();
    const clientStarted = process.cpuUsage();
    const result = await load(server, sliceSeconds);
    const clientCpu = process.cpuUsage(clientStarted);
    const after = await server.report();
    return {
      accepted: result['2xx'] as number,
      requests: result.requests.total as number,
      seconds: result.duration as number,
      p50: result.latency.p50 as number,
      p99: result.latency.p99 as number,
      failures: (result.non2xx as number) + (result.errors as number),
      // The drain after the previous slice is not this slice's.
      cpuMs: after.cpuMs - (before.cpuMsWithDrain ?? before.cpuMs),
      mainCpuMs: after.mainCpuMs === null || before.mainCpuMs === null ? null : after.mainCpuMs - before.mainCpuMs,
      clientCpuMs: (clientCpu.user + clientCpu.system) / 1000,
      processed: after.processed === undefined ? undefined : after.processed - before.processed!,
      after,
    };
  };

  /**
   * One round: every server started fresh and warmed up, then loaded in turns, slice by slice (the
   * order turning by one each slice, so that each server takes each place in it), then stopped.
   */
  const measureRound = async (): Promise<{ rows: Row[]; raw: Record<string, unknown> }> => {
    const running: RunningChild[] = [];
    try {
      for (const mode of servers) running.push(await startChild(mode));
      for (const server of running) await load(server, warmup);
      const measured: SliceFigures[][] = running.map(() => []);
      for (let slice = 0; slice < slices; slice++) {
        for (let turn = 0; turn < running.length; turn++) {
          const index = (slice + turn) % running.length;
          measured[index]!.push(await measureSlice(running[index]!));
        }
      }
      return {
        rows: servers.map((mode, index) => rowOf(mode, measured[index]!)),
        raw: Object.fromEntries(servers.map((mode, index) => [mode, measured[index]])),
      };
    } finally {
      for (const server of running) server.child.kill();
    }
  };

  // Rounds, each measuring every server in slices taken in turns (above): a ratio is taken between
  // servers of the same round, and the verdict is the median round's.
  const roundsRows: Row[][] = [];
  const raw: Array<Record<string, unknown>> = [];
  for (let index = 0; index < rounds; index++) {
    const round = await measureRound();
    roundsRows.push(round.rows);
    raw.push(round.raw);
  }
  const rows = medianRows(roundsRows);
  const bare = rows.find((row) => row.server === 'node-http')?.['202/s'] as number | undefined;
  if (bare) for (const row of rows) row['x node:http'] = round((row['202/s'] as number) / bare, 2);
  const each = rounds === 1 ? '' : `, median of ${rounds} rounds`;
  printTable(
    `Intake: ${connections} connections, ${duration} s each in ${slices} slices taken in turns after ${warmup} s warm-up${each}, token reused, ${vins.length} VINs (gps-basic limit raised)`,
    rows,
  );
  const budget = cpuBudget(rows, bare);
  if (budget) console.log(budget);
  const targets = targetLines(roundsRows);
  for (const line of targets) console.log(line);
  const results = { durationSeconds: duration, slices, warmupSeconds: warmup, connections, vins: vins.length, rounds, rows, roundsRows, targets, raw };
  console.log(`results: ${writeResults('intake', results)}`);
  return results;
}

type Row = Record<string, string | number>;

interface SliceFigures {
  accepted: number;
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  failures: number;
  cpuMs: number;
  mainCpuMs: number | null;
  clientCpuMs: number;
  processed: number | undefined;
  /** The server's report after the slice's queue drained (depths, drain time). */
  after: Figures;
}

/**
 * A server's row from its slices: rates and CPU over all of them; latency the median slice's; the
 * queue at its worst (the most behind at a slice's end, the longest catch-up, the deepest).
 */
function rowOf(server: string, slices: SliceFigures[]): Row {
  const sum = (figure: (slice: SliceFigures) => number) => slices.reduce((total, slice) => total + figure(slice), 0);
  const accepted = sum((slice) => slice.accepted);
  const seconds = sum((slice) => slice.seconds);
  const worst = (figure: (after: Figures) => number | null | undefined) => {
    const values = slices.map((slice) => figure(slice.after));
    return values.every((value) => typeof value === 'number') ? Math.max(...(values as number[])) : undefined;
  };
  const mainCpuMs = slices.every((slice) => slice.mainCpuMs !== null) ? sum((slice) => slice.mainCpuMs!) : null;
  const drainSeconds = worst((after) => after.drainSeconds);
  const processed = slices.every((slice) => slice.processed !== undefined) ? sum((slice) => slice.processed!) : undefined;
  return {
    server,
    '202/s': Math.round(accepted / seconds),
    'p50 ms': percentile(slices.map((slice) => slice.p50), 50),
    'p99 ms': percentile(slices.map((slice) => slice.p99), 50),
    'non-2xx': sum((slice) => slice.failures),
    'cpu µs/202': round((sum((slice) => slice.cpuMs) * 1000) / Math.max(1, accepted), 1),
    'main µs/202': mainCpuMs === null ? '-' : round((mainCpuMs * 1000) / Math.max(1, accepted), 1),
    // The load generator shares the machine: what it spends per request is CPU the server does not have.
    'client µs/req': round((sum((slice) => slice.clientCpuMs) * 1000) / Math.max(1, sum((slice) => slice.requests)), 1),
    'processed/s': processed === undefined || drainSeconds === undefined ? '-' : Math.round(processed / (seconds + sum((slice) => slice.after.drainSeconds ?? 0))),
    'max depth': worst((after) => after.maxDepth) ?? '-',
    'behind at end': worst((after) => after.depthAtLoadEnd) ?? '-',
    'catch-up s': drainSeconds === undefined ? '-' : round(drainSeconds, 2),
  };
}

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
    lines.push(`target 202/s >= ${INTAKE_TARGET} x node:http, processing keeping up: ${text}, ${lags} behind at load end (${verdict(middle >= INTAKE_TARGET && keepsUp)})`);
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
 * for the intake log's fsync — on the HTTP thread (whose commit of the turn's group syncs the log's
 * file) and in all (besides, the processing thread's commits at `synchronous = FULL`)
 * — and how much longer it waits.
 */
function powerCost(rows: Row[]): string {
  const [power, processOnly] = ['trailwire-power-thread', 'trailwire-process-thread'].map((server) => rows.find((row) => row.server === server));
  if (!power || !processOnly) return '';
  const more = (column: string) =>
    typeof power[column] === 'number' && typeof processOnly[column] === 'number' ? `${round((power[column] as number) - (processOnly[column] as number), 1)} µs` : '?';
  return (
    `; a power 202 waits for an fsync of the intake log's commit (p50 ${power['p50 ms']} ms against ${processOnly['p50 ms']}) and costs ${more('cpu µs/202')} more CPU,` +
    ` ${more('main µs/202')} of it on the HTTP thread (the log's syncs, run there), the rest mostly the processing thread's FULL commits`
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
    ' the accept path (auth, limit, validation, ids: `npm run bench -- accept-path` counts it alone) and each turn\'s commit to the intake log'
  );
}

/**
 * The CPU the target (`INTAKE_TARGET` × node:http) takes with processing keeping up, at the CPU per
 * request each side spent in this run: the server's (both threads) and the load generator's, which
 * share the machine. The intake log has a file of its own, so the accept path never waits for a batch's lock, and
 * this is what bounds the rate: the cores the three busy threads (HTTP, processing, load generator)
 * share.
 */
function cpuBudget(rows: Row[], bare: number | undefined): string | undefined {
  const row = rows.find((candidate) => candidate.server === 'trailwire-process-thread');
  if (!bare || !row) return undefined;
  const rate = Math.round(INTAKE_TARGET * bare);
  const cores = (rate * ((row['cpu µs/202'] as number) + (row['client µs/req'] as number))) / 1e6;
  const acceptOnly = rows.find((candidate) => candidate.server === 'trailwire-process-none');
  const why = acceptOnly ? ` Accepting only (no processing thread) reached ${round((acceptOnly['202/s'] as number) / bare, 2)} × node:http.` : '';
  return `At ${INTAKE_TARGET} × node:http (${rate} 202/s), trailwire-process-thread (${row['cpu µs/202']} µs per 202, ${row['main µs/202']} of them on the HTTP thread) and its load generator (${row['client µs/req']} µs) would need ${round(cores, 2)} of this machine's ${cpus().length} cores.${why}`;
}

if (import.meta.url === `file://${process.argv[1]}`) await runIntakeBench({ durationSeconds: Number(process.env.BENCH_SECONDS ?? 10), rounds: Number(process.env.BENCH_ROUNDS ?? 3) });
