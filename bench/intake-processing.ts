/**
 * Intake processing benchmark: what the processing thread spends per payload, without HTTP or
 * messages. On a temporary SQLite file it writes payloads in groups (`enqueueNow`, as the thread
 * writes what the main thread accepted) and processes them with the core's `IntakeWorker`, each
 * round one transaction on the same connection (as the thread runs it), and reports the CPU per
 * payload of each. Beside it, in the same run, the bare cost of a durable write: the same payloads
 * inserted into a one-table file in the same groups. Every payload is a new GPS fix of one of 1,000
 * VINs, as in the intake benchmark; groups of 25 are about what 50 connections give.
 *
 * The figure says how many payloads a second one core can process; intake's 202/s can only be kept
 * up with where that core is free beside the HTTP thread and the load generator.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteIntakeQueue } from '../adapters/sqlite/intake-queue.ts';
import { openSqliteStore, type SqliteDurability } from '../adapters/sqlite/sqlite-store.ts';
import { systemClock } from '../core/clock.ts';
import { timeOrderedIds } from '../core/intake-ids.ts';
import type { NewIntake } from '../core/intake-queue.ts';
import { IntakeWorker } from '../core/intake-worker.ts';
import { createProductRegistry } from '../core/products.ts';
import { withCheckDigit } from '../core/vin.ts';
import { builtInProducts } from '../products/index.ts';
import { openBarePayloadTable } from './lib/bare-payload-table.ts';
import { printTable, round, writeResults } from './lib/results.ts';

export interface IntakeProcessingBenchOptions {
  /** Payloads per configuration. Default 30,000. */
  payloads?: number;
  /** Group sizes to measure. Default 25 and 64. */
  groupSizes?: readonly number[];
}

const vins = Array.from({ length: 1000 }, (_, i) => withCheckDigit(`1BNCH0000${String(i).padStart(8, '0')}`));
const cpuMicros = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return used.user + used.system;
};

function groupsOf(payloads: number, size: number): NewIntake[][] {
  const ids = timeOrderedIds(systemClock);
  let timestamp = 1780315200;
  return Array.from({ length: Math.ceil(payloads / size) }, (_, g) =>
    Array.from({ length: size }, (_, i) => ({
      id: ids(),
      partnerId: 'bench-partner',
      product: 'gps-basic',
      vin: vins[(g * size + i) % vins.length]!,
      payload: JSON.stringify({ timestamp: timestamp++, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 }),
      receivedAt: Date.now(),
      idempotencyKey: null,
    })),
  );
}

/** The same payloads in the bare payload table, a commit per group: the floor of any durable write here. */
function measureBareInsert(file: string, groups: NewIntake[][]): number {
  const table = openBarePayloadTable(file);
  const started = process.cpuUsage();
  for (const group of groups) table.insertGroup(group);
  const micros = cpuMicros(started);
  table.close();
  return micros;
}

async function measureThreadWork(file: string, durability: SqliteDurability, groups: NewIntake[][], groupSize: number) {
  const store = await openSqliteStore({ file, durability });
  const queue = openSqliteIntakeQueue(store.db);
  const worker = new IntakeWorker(
    { queue: queue.roundView(), store, products: createProductRegistry(builtInProducts), clock: systemClock, unitOfWork: queue.roundTransaction(), publish: () => {} },
    { batchSize: Math.max(64, groupSize) },
  );
  let enqueueMicros = 0;
  let processMicros = 0;
  let processed = 0;
  for (const group of groups) {
    let started = process.cpuUsage();
    queue.enqueueNow(group);
    enqueueMicros += cpuMicros(started);
    started = process.cpuUsage();
    processed += await worker.drainDue();
    processMicros += cpuMicros(started);
  }
  const { processed: done, failed } = worker.counts;
  await store.close();
  if (done !== processed || failed !== 0) throw new Error(`processed ${done} of ${processed} claimed, ${failed} failed`);
  return { enqueueMicros, processMicros, processed };
}

export async function runIntakeProcessingBench(options: IntakeProcessingBenchOptions = {}) {
  const payloads = options.payloads ?? 30_000;
  const groupSizes = options.groupSizes ?? [25, 64];
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-bench-processing-'));
  const rows: Array<Record<string, string | number>> = [];
  try {
    for (const groupSize of groupSizes) {
      const groups = groupsOf(payloads, groupSize);
      const count = groups.length * groupSize;
      const bare = measureBareInsert(join(directory, `bare-${groupSize}.db`), groups);
      rows.push({ work: 'bare SQLite insert (one table)', group: groupSize, 'write µs': round(bare / count, 1), 'process µs': '-', 'total µs': round(bare / count, 1), 'per core/s': Math.round((count * 1e6) / bare) });
      for (const durability of ['process', 'power'] as const) {
        const { enqueueMicros, processMicros } = await measureThreadWork(join(directory, `${durability}-${groupSize}.db`), durability, groups, groupSize);
        const total = enqueueMicros + processMicros;
        rows.push({
          work: `trailwire thread, ${durability}`,
          group: groupSize,
          'write µs': round(enqueueMicros / count, 1),
          'process µs': round(processMicros / count, 1),
          'total µs': round(total / count, 1),
          'per core/s': Math.round((count * 1e6) / total),
        });
      }
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
  printTable(`Intake processing without HTTP: CPU per payload, ${payloads} GPS payloads of 1,000 VINs per row`, rows);
  console.log(`results: ${writeResults('intake-processing', { payloads, groupSizes, rows })}`);
  return { rows };
}

if (import.meta.url === `file://${process.argv[1]}`) await runIntakeProcessingBench();
