/**
 * Export and import benchmark (issue 40), on the embedded store, against the compiled build as an
 * operator runs it:
 * - export: a trailer with 1,000,000 GPS fixes, exported whole as CSV and as NDJSON from a
 *   `trailwire serve` process of its own, read by a client that takes the body as it comes; rows/s,
 *   and the server's resident memory (VmRSS, sampled every 50 ms) above what it held just before.
 *   Target: RSS growth < 100 MB (the export holds a page, never the range).
 * - import: `trailwire trailers import` of a 10,000-trailer CSV file, process start included, then
 *   the same file again (nothing changes). Target: < 10 s.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '../dist/adapters/sqlite/index.js';
import { ManualClock } from '../dist/core/clock.js';
import type { GpsFix } from '../dist/core/model.js';
import { createTrailwire } from '../dist/core/trailwire.js';
import { withCheckDigit } from '../dist/core/vin.js';
import { printTable, round, writeResults } from './lib/results.ts';
import { startServe, stopServe } from './lib/serve-process.ts';

const BIN = fileURLToPath(new URL('../dist/bin/trailwire.js', import.meta.url));

export interface ExportImportOptions {
  /** GPS fixes of the exported trailer. Default 1,000,000. */
  points?: number;
  /** Trailers in the import file. Default 10,000. */
  trailers?: number;
}

export async function runExportImportBench(options: ExportImportOptions = {}) {
  const points = options.points ?? 1_000_000;
  const trailers = options.trailers ?? 10_000;
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-bench-export-'));
  try {
    const db = join(dir, 'bench.db');
    const seeded = await seed(db, points);
    const exports = await measureExports(db, seeded);
    const imports = await measureImports(db, seeded.fleetId, trailers, dir);
    const results = {
      points,
      trailers,
      seedSeconds: seeded.seedSeconds,
      exports,
      imports,
      targets: {
        exportRssGrowthUnder100MB: exports.every((row) => row.rssGrowthMB < 100),
        importUnder10s: imports[0]!.seconds < 10,
      },
    };
    printTable(`Export of ${points.toLocaleString()} GPS fixes from serve (seeded in ${seeded.seedSeconds} s)`, exports);
    printTable(`Import of ${trailers.toLocaleString()} trailers (trailwire trailers import, process start included)`, imports);
    console.log(`targets: ${JSON.stringify(results.targets)}`);
    console.log(`results: ${writeResults('export-import', results)}`);
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Seeded {
  apiKey: string;
  fleetId: number;
  trailerId: string;
  from: number;
  to: number;
  seedSeconds: number;
}

/** A customer, a fleet and a trailer with `points` fixes a second apart, written as intake writes them. */
async function seed(db: string, points: number): Promise<Seeded> {
  const start = Date.UTC(2026, 0, 1);
  const clock = new ManualClock(start + points * 1000 + 1000);
  const store = await openSqliteStore({ file: db });
  const trailwire = await createTrailwire({ store, clock, worker: false });
  try {
    const { principal, apiKey } = await trailwire.auth.createCustomer({ name: 'Bench' });
    const fleet = await trailwire.admin.createFleet({ customerId: principal.id, name: 'Bench fleet' });
    const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: '1HGCM82633A004352', unitId: 'B-1' });
    const began = performance.now();
    const batch = 100_000;
    for (let offset = 0; offset < points; offset += batch) {
      const fixes: GpsFix[] = [];
      for (let i = offset; i < Math.min(points, offset + batch); i++)
        fixes.push({ timestamp: start + i * 1000, lat: 41 + i * 1e-6, long: -87 - i * 1e-6, speed: 55.5, heading: 'NE' });
      await store.applyTelemetry({ vin: trailer.vin, at: clock.now(), telemetry: { gps: fixes, devices: [], cargosafe: [] } });
    }
    return { apiKey, fleetId: fleet.id, trailerId: trailer.id, from: start, to: start + points * 1000, seedSeconds: round((performance.now() - began) / 1000, 1) };
  } finally {
    await trailwire.close();
  }
}

/** Each format exported whole from a serve process of its own, its RSS sampled while it streams. */
async function measureExports(db: string, seeded: Seeded) {
  const rows = [];
  for (const [format, accept] of [
    ['csv', 'text/csv'],
    ['ndjson', 'application/x-ndjson'],
  ] as const) {
    const server = await startServe(BIN, ['--db', db, '--log-level', 'warn']);
    try {
      const auth = await fetch(`${server.printed.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': seeded.apiKey } });
      const token = ((await auth.json()) as { access_token: string }).access_token;
      const path = `/api/v1/trailers/telemetry/gps/${seeded.trailerId}`;
      const range = (from: number, to: number) => `?from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}`;
      // A warm-up export of an hour: the route, the statements and the stream are in place before the baseline.
      await download(`${server.printed.url}${path}${range(seeded.from, seeded.from + 3_600_000)}`, token, accept);
      const before = rssMB(server.child.pid!);
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMB(server.child.pid!))), 50);
      const began = performance.now();
      const { lines, bytes } = await download(`${server.printed.url}${path}${range(seeded.from, seeded.to)}`, token, accept);
      const seconds = (performance.now() - began) / 1000;
      clearInterval(sampler);
      const records = format === 'csv' ? lines - 1 : lines;
      if (records !== Math.round((seeded.to - seeded.from) / 1000)) throw new Error(`${format}: exported ${records} records`);
      rows.push({
        format,
        records,
        seconds: round(seconds, 2),
        rowsPerSecond: Math.round(records / seconds),
        MB: round(bytes / 2 ** 20, 1),
        rssBeforeMB: round(before, 1),
        rssPeakMB: round(peak, 1),
        rssGrowthMB: round(peak - before, 1),
      });
    } finally {
      await stopServe(server.child);
    }
  }
  return rows;
}

/** Reads an export as a client saving it would: chunk by chunk, counting lines, keeping nothing. */
function download(url: string, token: string, accept: string): Promise<{ lines: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${token}`, accept } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`export answered ${res.statusCode}`));
      let lines = 0;
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        for (let at = chunk.indexOf(10); at >= 0; at = chunk.indexOf(10, at + 1)) lines++;
      });
      res.on('end', () => resolve({ lines, bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The import, timed as the operator waits for it: the command from start to exit. */
async function measureImports(db: string, fleetId: number, trailers: number, dir: string) {
  const file = join(dir, 'fleet.csv');
  const lines = ['vin,unitId,active'];
  for (let i = 0; i < trailers; i++) lines.push(`${withCheckDigit(`1TWBN0000BN${String(i).padStart(6, '0')}`)},U-${i},true`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  const rows = [];
  for (const run of ['first run', 'same file again']) {
    const began = performance.now();
    const result = await runCli(['trailers', 'import', '--fleet', String(fleetId), '--file', file, '--db', db, '--json']);
    const seconds = (performance.now() - began) / 1000;
    if (result.code !== 0) throw new Error(`import failed: ${result.stdout} ${result.stderr}`);
    const report = JSON.parse(result.stdout) as { outcome: string; created: number; unchanged: number };
    rows.push({ run, outcome: report.outcome, created: report.created, unchanged: report.unchanged, seconds: round(seconds, 2), linesPerSecond: Math.round(trailers / seconds) });
  }
  return rows;
}

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A process's resident set size in MB, from /proc. */
function rssMB(pid: number): number {
  const kB = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kB) / 1024;
}

if (import.meta.url === `file://${process.argv[1]}`)
  await runExportImportBench({ points: Number(process.env.BENCH_POINTS ?? 1_000_000), trailers: Number(process.env.BENCH_TRAILERS ?? 10_000) });
