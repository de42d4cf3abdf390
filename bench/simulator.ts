/**
 * The simulator's own ceiling (issue 39): how many intake requests per second `trailwire simulate`
 * can drive on this machine while it checks everything (gRPC and SSE subscribers, the status
 * read-back, every invariant). It runs against `trailwire serve --demo` in another process (roomy
 * limits, so nothing is refused), in this process, and measures this process's CPU time per request
 * sent over the whole run: the ceiling is one core's second over that. The server shares the machine,
 * so the achieved rate and p99 are what a QA run on the same box sees, not the simulator alone.
 * Three rounds; the median is the figure. Run alone with `npm run bench -- simulator`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simulate } from '../simulator/simulate.ts';
import type { DemoPrincipal } from '../simulator/demo-seed.ts';
import { percentile, printTable, round, writeResults } from './lib/results.ts';
import { startServe, stopServe } from './lib/serve-process.ts';

const BIN = fileURLToPath(new URL('../dist/bin/trailwire.js', import.meta.url));
const ROOMY = ['gps-basic', 'tpms', 'cargosafe'].map((product) => `${product}=1000000/60`);

export interface SimulatorBenchOptions {
  /** Requests/s asked for. Default 300. */
  rate?: number;
  /** Seconds of traffic per round. Default 10. */
  durationS?: number;
  /** Default 3. */
  rounds?: number;
}

export async function runSimulatorBench(options: SimulatorBenchOptions = {}): Promise<void> {
  const { rate = 300, durationS = 10, rounds = 3 } = options;
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-bench-simulator-'));
  const { child: serve, printed } = await startServe<{ url: string; grpc: string; demo: { principals: DemoPrincipal[] } }>(BIN, [
    '--demo', '--log-level', 'silent', '--db', join(directory, 'serve.db'), '--heartbeat-ms', '1000', '--read-limit', '1000000/60',
    '--partner-intake-limit', '100000000/60', ...ROOMY.flatMap((limit) => ['--product-limit', limit]),
  ]);
  try {
    const { url, grpc, demo } = printed;
    const partnerKeys = Object.fromEntries(demo.principals.filter((p) => p.audience === 'partners').map((p) => [p.product!, p.apiKey]));
    const customerKeys = demo.principals.filter((p) => p.audience === 'customers').map((p) => p.apiKey);
    const rows = [];
    for (let round_ = 1; round_ <= rounds; round_++) {
      const cpuBefore = process.cpuUsage();
      const startedAt = performance.now();
      const { report } = await simulate({
        scenario: 'steady',
        seed: round_,
        durationS,
        rate,
        vins: 1000,
        subscribers: 2,
        sseSubscribers: 2,
        heartbeatMs: 1000,
        limits: Object.fromEntries(ROOMY.map((entry) => [entry.split('=')[0]!, { requests: 1_000_000, windowSeconds: 60 }])),
        remote: { target: url, grpc, partnerKeys, customerKeys },
      });
      const cpu = process.cpuUsage(cpuBefore);
      const cpuUsPerRequest = (cpu.user + cpu.system) / Math.max(1, report.sent);
      rows.push({
        round: round_,
        sent: report.sent,
        achievedPerS: report.rate.achieved,
        p99Ms: report.latencyMs.p99,
        wallS: round((performance.now() - startedAt) / 1000, 1),
        cpuUsPerRequest: round(cpuUsPerRequest, 0),
        ceilingPerCoreS: round(1_000_000 / cpuUsPerRequest, 0),
        violations: report.violations.length,
      });
    }
    printTable(`simulate against serve --demo, ${rate}/s asked, ${durationS} s a round`, rows);
    const median = percentile(rows.map((row) => row.ceilingPerCoreS), 50);
    console.log(`simulator ceiling (median of ${rounds}): ${median} requests/s per core while checking, at ${rate}/s asked`);
    console.log(`results: ${writeResults('simulator', { rate, durationS, rows, medianCeilingPerCoreS: median })}`);
  } finally {
    await stopServe(serve);
    rmSync(directory, { recursive: true, force: true });
  }
}
