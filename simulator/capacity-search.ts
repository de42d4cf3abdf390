/**
 * `--find-capacity 'p99<250ms'`: the highest arrival rate at which the service still holds a
 * threshold, every invariant and the rate check. It runs the scenario step by step: from the start
 * rate it doubles while a step holds, then halves the gap between the highest rate that held and the
 * lowest that broke, until the gap is under 5 % of the rate or the time budget would not fit
 * another step (judged by the longest step so far). Each step is a whole run with its own report;
 * the search keeps each step's figures. The steps run one after another through `run`, so the search
 * itself is pure stepping and is tested with a made-up service.
 */
import { exitCodeOf, type SimulationReport } from './report.ts';

export interface CapacitySearchOptions {
  /** The first rate tried, requests/s. */
  startRate: number;
  /** Wall time the search may take in all, ms; no step starts that the longest one so far says would overrun it. */
  budgetMs: number;
  /** The clock the budget is kept by. Default `Date.now`. */
  now?: () => number;
}

/** One step: its rate, whether everything held, and the figures it was judged on. */
export interface CapacityStep {
  rate: number;
  held: boolean;
  achievedRate: number;
  latencyMs: { p50: number; p99: number };
  errors: number;
  violations: number;
  /** The thresholds breached, each with its figure. */
  breached: string[];
  seconds: number;
}

export interface CapacityReport {
  /** The highest rate that held, or null when the first step already broke. */
  capacity: number | null;
  /** The lowest rate that broke, or null when none did within the budget. */
  brokeAt: number | null;
  steps: CapacityStep[];
  /** Wall time the search took, s, and its budget. */
  elapsedS: number;
  budgetS: number;
}

/** Searches for the capacity; `run(rate)` runs one step at `rate` and answers its report. */
export async function findCapacity(run: (rate: number) => Promise<SimulationReport>, options: CapacitySearchOptions): Promise<CapacityReport> {
  if (!(options.startRate > 0)) throw new TypeError(`findCapacity: \`startRate\` must be positive, got ${options.startRate}`);
  if (!(options.budgetMs > 0)) throw new TypeError(`findCapacity: \`budgetMs\` must be positive, got ${options.budgetMs}`);
  const now = options.now ?? Date.now;
  const startedAt = now();
  const steps: CapacityStep[] = [];
  let held: number | null = null;
  let broke: number | null = null;
  let longestMs = 0;
  let rate = options.startRate;
  for (;;) {
    const stepStartedAt = now();
    const report = await run(rate);
    const stepMs = now() - stepStartedAt;
    longestMs = Math.max(longestMs, stepMs);
    const step = stepOf(rate, report, stepMs);
    steps.push(step);
    if (step.held) held = rate;
    else broke = rate;
    const next = broke === null ? rate * 2 : held === null ? rate / 2 : (held + broke) / 2;
    const narrowEnough = held !== null && broke !== null && broke - held < held * 0.05;
    const outOfTime = now() - startedAt + longestMs > options.budgetMs;
    // A service that breaks at a rate under one request a second has no capacity worth searching for.
    if (narrowEnough || outOfTime || next < 1) break;
    rate = Math.round(next * 10) / 10;
  }
  return { capacity: held, brokeAt: broke, steps, elapsedS: round((now() - startedAt) / 1000), budgetS: round(options.budgetMs / 1000) };
}

function stepOf(rate: number, report: SimulationReport, stepMs: number): CapacityStep {
  return {
    rate,
    held: exitCodeOf(report) === 0,
    achievedRate: report.rate.achieved,
    latencyMs: { p50: report.latencyMs.p50, p99: report.latencyMs.p99 },
    errors: report.errors,
    violations: report.violations.length,
    breached: report.thresholds.filter((threshold) => !threshold.passed).map((threshold) => `${threshold.threshold} (${threshold.actual})`),
    seconds: round(stepMs / 1000),
  };
}

/** The search as a table, for a terminal. */
export function formatCapacityTable(threshold: string, report: CapacityReport): string {
  const lines = [`Trailwire capacity search: ${threshold} (budget ${report.budgetS} s, took ${report.elapsedS} s)`];
  for (const step of report.steps)
    lines.push(
      `  ${step.held ? 'held ' : 'BROKE'} ${String(step.rate).padStart(8)}/s  achieved ${step.achievedRate}/s  p50 ${step.latencyMs.p50} ms  p99 ${step.latencyMs.p99} ms  errors ${step.errors}  violations ${step.violations}` +
        (step.breached.length > 0 ? `  breached ${step.breached.join(', ')}` : ''),
    );
  lines.push('');
  lines.push(
    report.capacity === null
      ? `No rate held: the first step (${report.steps[0]?.rate}/s) already broke.`
      : `Capacity: ${report.capacity}/s held${report.brokeAt === null ? ' (nothing broke within the budget: the capacity is higher)' : `; ${report.brokeAt}/s broke`}.`,
  );
  return `${lines.join('\n')}\n`;
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
