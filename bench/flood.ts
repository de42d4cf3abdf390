/**
 * Invalid-body flood benchmark (issue 29, finding 2): what one partner sending invalid ~250 KB bodies
 * (24,000 unknown keys) on 32 connections costs every other tenant. Three processes: `trailwire
 * serve` as a user runs it, the flooder (`lib/body-flood.ts`), and this one probing `/healthz` every
 * 10 ms. Two budgets: the test budget (`32/60`: the flood spends it at once, and the rest is
 * refused 429 before the body is read) and the default (`60000/60`: every body reaches the transport,
 * which refuses it as it reads it). The target: `/healthz` p99 under 50 ms during the flood.
 *
 * Figures per run: `/healthz` p50/p99/max before (quiet) and during the flood, the server's own
 * event-loop delay p99 over the flood (`trailwire_nodejs_eventloop_lag_p99_seconds`), its CPU over
 * the flood as a share of a core, the flood requests answered, and the machine's load average (other
 * work on the machine shows in every latency: compare a run with its quiet p99 and its baseline).
 * With `BENCH_BASELINE_BIN=/path/to/other/checkout/dist/bin/trailwire.js` the same runs are made
 * against that build too, alternating, so a change is compared in the same conditions.
 * Run alone with `npm run bench -- flood`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { floodFromAnotherProcess } from './lib/body-flood.ts';
import { probeHealthzUntil, scrapeMetric } from './lib/healthz-probe.ts';
import { percentile, printTable, round, writeResults } from './lib/results.ts';
import { startServe, stopServe } from './lib/serve-process.ts';

const THIS_BIN = fileURLToPath(new URL('../dist/bin/trailwire.js', import.meta.url));

export interface FloodBenchOptions {
  /** Flood duration per run, in ms. Default 8,000. */
  floodMs?: number;
  /** Quiet probing before each flood, in ms. Default 3,000. */
  quietMs?: number;
  /** Flood connections. Default 32, the issue's. */
  connections?: number;
  /** Runs per (build, budget). Default 2. */
  rounds?: number;
  /** The `trailwire` build to compare with (`BENCH_BASELINE_BIN`). Default: none. */
  baselineBin?: string;
}

interface FloodRun {
  build: string;
  budget: string;
  load1: number;
  quietP99: number;
  p50: number;
  p99: number;
  max: number;
  serverLoopLagP99: number;
  /** The server's CPU over the flood, as a share of one core (its /healthz answers included). */
  serverCpuPercent: number;
  answered: number;
  statuses: Record<string, number>;
  failed: number;
}

async function floodOnce(bin: string, build: string, budget: string, options: Required<Omit<FloodBenchOptions, 'baselineBin'>>): Promise<FloodRun> {
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-bench-flood-'));
  const db = join(directory, 'trailwire.db');
  const created = spawnSync(process.execPath, [bin, 'partners', 'create', '--name', 'Flooder', '--product', 'gps-basic', '--db', db, '--json'], { encoding: 'utf8' });
  if (created.status !== 0) throw new Error(`partners create: ${created.stderr}`);
  const { apiKey } = JSON.parse(created.stdout);
  const { child, printed } = await startServe(bin, ['--log-level', 'silent', '--db', db, '--partner-intake-limit', budget]);
  const url = new URL(printed.url);
  try {
    const authenticated = await fetch(new URL('/api/v1/partners/authenticate', url), { method: 'POST', headers: { 'x-api-key': apiKey } });
    const token = ((await authenticated.json()) as { access_token: string }).access_token;
    const quiet = await probeHealthzUntil(url, performance.now() + options.quietMs);
    const flood = floodFromAnotherProcess(url, token, options.floodMs, options.connections);
    await flood.started;
    // Each scrape restarts the loop-delay histogram: the next one covers the flood alone.
    await scrapeMetric(url, 'trailwire_nodejs_eventloop_lag_p99_seconds');
    const cpuBefore = await scrapeMetric(url, 'trailwire_process_cpu_seconds_total');
    const floodStarted = performance.now();
    const load1 = loadavg()[0]!;
    // The flood's last ~200 ms are left out: its connections end one by one.
    const latencies = await probeHealthzUntil(url, performance.now() + options.floodMs - 200);
    const lag = await scrapeMetric(url, 'trailwire_nodejs_eventloop_lag_p99_seconds');
    const cpuAfter = await scrapeMetric(url, 'trailwire_process_cpu_seconds_total');
    const floodSeconds = (performance.now() - floodStarted) / 1000;
    const result = await flood.result;
    const answered = Object.values(result.statuses).reduce((sum, n) => sum + n, 0);
    return {
      build,
      budget,
      load1: round(load1, 1),
      quietP99: round(percentile(quiet, 99), 1),
      p50: round(percentile(latencies, 50), 1),
      p99: round(percentile(latencies, 99), 1),
      max: round(latencies.at(-1)!, 1),
      serverLoopLagP99: round(lag * 1000, 1),
      serverCpuPercent: round((100 * (cpuAfter - cpuBefore)) / floodSeconds, 1),
      answered,
      statuses: result.statuses,
      failed: result.failed,
    };
  } finally {
    await stopServe(child);
    rmSync(directory, { recursive: true, force: true });
  }
}

export async function runFloodBench(options: FloodBenchOptions = {}): Promise<FloodRun[]> {
  const settings = { floodMs: options.floodMs ?? 8_000, quietMs: options.quietMs ?? 3_000, connections: options.connections ?? 32, rounds: options.rounds ?? 2 };
  const builds: Array<[string, string]> = [['this', THIS_BIN]];
  const baseline = options.baselineBin ?? process.env.BENCH_BASELINE_BIN;
  if (baseline) builds.push(['baseline', baseline]);
  const runs: FloodRun[] = [];
  for (let round_ = 0; round_ < settings.rounds; round_++)
    for (const budget of ['32/60', '60000/60'])
      for (const [build, bin] of builds) {
        const run = await floodOnce(bin, build, budget, settings);
        console.log(`# ${JSON.stringify(run)}`);
        runs.push(run);
      }
  printTable(
    `Invalid-body flood: /healthz latency (ms) while one partner sends 250 KB invalid bodies on ${settings.connections} connections (target p99 < 50)`,
    runs.map(({ statuses, ...run }) => ({ ...run, statuses: JSON.stringify(statuses) })),
  );
  console.log(`results: ${writeResults('flood', { settings: { ...settings, baseline: baseline ?? null }, runs })}`);
  return runs;
}
