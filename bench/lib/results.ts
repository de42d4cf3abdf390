/**
 * Shared benchmark plumbing: latency percentiles, a results file per run under bench/results/
 * (so runs can be compared), and a printed table.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));

/**
 * Node.js flags of every server a benchmark starts, baselines included: those `npm start` runs the
 * service with (a young generation of 32 MB per semi-space, which takes about a tenth off the CPU
 * of a request under load; docs/operations.md, "Node.js settings").
 */
export const SERVER_NODE_FLAGS = ['--max-semi-space-size=32'] as const;

/** The p-th percentile (0..100) of samples, by nearest rank. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export function round(value: number, digits = 2): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Writes `bench/results/<name>-<timestamp>.json` with machine facts; answers the path. */
export function writeResults(name: string, results: object): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const file = join(RESULTS_DIR, `${name}-${stamp}.json`);
  const machine = { node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, memoryGiB: round(totalmem() / 2 ** 30, 1) };
  writeFileSync(file, `${JSON.stringify({ name, at: new Date().toISOString(), machine, ...results }, null, 2)}\n`);
  return file;
}

/** Prints rows as an aligned text table. */
export function printTable(title: string, rows: Array<Record<string, string | number | boolean>>): void {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0] as object);
  const widths = columns.map((column) => Math.max(column.length, ...rows.map((row) => String(row[column]).length)));
  const line = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ');
  console.log(`\n${title}`);
  console.log(line(columns));
  console.log(line(widths.map((w) => '-'.repeat(w))));
  for (const row of rows) console.log(line(columns.map((column) => String(row[column]))));
}
