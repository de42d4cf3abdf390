/**
 * Intake processing benchmark: what the processing thread spends per payload, without HTTP or
 * messages. On a temporary SQLite file it writes payloads in groups (`enqueueNow`, as the thread
 * writes what the main thread accepted) and processes them with the core's `IntakeWorker`, each
 * round one transaction on the same connection (as the thread runs it), and reports the CPU per
 * payload of each. Beside it, in the same run, the bare cost of a durable write: the same payloads
 * inserted into a one-table file in the same groups. Every payload is a new GPS fix of one of 20,000
 * VINs, as in the intake benchmark; groups of 25 are about what 50 connections give. The worker
 * processes after every group (batches of 25: a light load) or once 2,048 are waiting (a batch of
 * the processing thread's size: what a sustained load gives). The worker checks partner grants as
 * of processing as the thread's does (issue 37): one read of the grants a batch, and, in the row
 * "a grant in the store" (a customer restricts intake), the owners of the batch's VINs too.
 *
 * The figure says how many payloads a second one core can process; intake's 202/s can only be kept
 * up with where that core is free beside the HTTP thread and the load generator.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteIntakeQueue } from '../dist/adapters/sqlite/intake-queue.js';
import { PROCESSING_BATCH_SIZE, PROCESSING_WAL_AUTOCHECKPOINT_PAGES } from '../dist/adapters/sqlite/intake-thread.js';
import { openSqliteStore, type SqliteDurability } from '../dist/adapters/sqlite/sqlite-store.js';
import { systemClock, timeOrderedIds } from '../dist/core/clock.js';
import type { NewIntake } from '../dist/core/intake-queue.js';
import { IntakeWorker } from '../dist/core/intake-worker.js';
import { createProductRegistry } from '../dist/core/products.js';
import { builtInProducts } from '../dist/products/index.js';
import { openBarePayloadTable } from './lib/bare-payload-table.ts';
import { benchVins, gpsFixBody } from './lib/gps-load.ts';
import { printTable, round, writeResults } from './lib/results.ts';

export interface IntakeProcessingBenchOptions {
  /** Payloads per configuration. Default 30,000. */
  payloads?: number;
  /** Batch sizes to measure (groups of 25 are written until a batch is waiting). Default 25 and the processing thread's (2,048). */
  batchSizes?: readonly number[];
}

const FLEET = 20_000;
/** Issue 13's budget for processing one payload, in the processing thread's batches. */
const PROCESSING_TARGET_MICROS = 20;
/** About what one event-loop turn of 50 connections gives. */
const GROUP_SIZE = 25;
const vins = benchVins(FLEET);
/** Bytes this process has passed to write calls so far (Linux's /proc/self/io `wchar`); null elsewhere. */
const bytesWritten = (): number | null => {
  try {
    return Number(/^wchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))![1]);
  } catch {
    return null;
  }
};
/** Starts counting written bytes; the answer tells how many since (null where the OS does not say). */
const countBytesWritten = (): (() => number | null) => {
  const before = bytesWritten();
  return () => {
    const now = bytesWritten();
    return before === null || now === null ? null : now - before;
  };
};
const cpuMicros = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return used.user + used.system;
};

function groupsOf(payloads: number, size: number, firstTimestamp = 1780315200): NewIntake[][] {
  const ids = timeOrderedIds(systemClock);
  let timestamp = firstTimestamp;
  return Array.from({ length: Math.ceil(payloads / size) }, (_, g) =>
    Array.from({ length: size }, (_, i) => ({
      id: ids(),
      partnerId: 'bench-partner',
      product: 'gps-basic',
      vin: vins[(g * size + i) % vins.length]!,
      payload: gpsFixBody(timestamp++),
      receivedAt: Date.now(),
      idempotencyKey: null,
    })),
  );
}

/** The same payloads in the bare payload table, a commit per group: the floor of any durable write here. */
function measureBareInsert(file: string, groups: NewIntake[][]): { micros: number; bytes: number | null } {
  const table = openBarePayloadTable(file);
  const written = countBytesWritten();
  const started = process.cpuUsage();
  for (const group of groups) table.insertGroup(group);
  const micros = cpuMicros(started);
  const bytes = written();
  table.close();
  return { micros, bytes };
}

/**
 * The thread's work on the file: appends, then processing as the thread runs it, the partner grants
 * checked again per batch (issue 37). With `someGrant`, a customer of the store has granted a partner,
 * so each batch also reads the owners of its VINs (the bench's VINs are unassigned: none is refused).
 */
async function measureThreadWork(file: string, durability: SqliteDurability, groups: NewIntake[][], batchSize: number, someGrant = false) {
  const store = await openSqliteStore({ file, durability });
  store.db.pragma(`wal_autocheckpoint = ${PROCESSING_WAL_AUTOCHECKPOINT_PAGES}`);
  if (someGrant) {
    await store.createCustomer({ id: 'bench-customer', name: 'Bench', keyHash: 'x', createdAt: 0 });
    await store.createPartner({ id: 'bench-granted', name: 'Granted', product: 'gps-basic', keyHash: 'y', createdAt: 0 });
    await store.addPartnerGrant({ customerId: 'bench-customer', partnerId: 'bench-granted', createdAt: 0 });
  }
  const queue = openSqliteIntakeQueue(store.db);
  const grants = { store, requireGrants: false };
  const worker = new IntakeWorker({ queue, store, products: createProductRegistry(builtInProducts), clock: systemClock, grants, publish: () => {} }, { batchSize });
  // The fleet exists before the measurement (its trailers were registered or met before), as in a
  // service that has been running: two earlier fixes per VIN, not measured. The second pass is what
  // a running service has done too: the store remembers a trailer's id once it has found it (not
  // when it creates it, which a failed batch could roll back).
  for (const pass of [2, 1]) {
    for (const group of groupsOf(FLEET, 500, 1780315200 - pass * FLEET)) queue.enqueueNow(group);
    await worker.drainDue();
  }
  const warmed = worker.counts.processed;
  let enqueueMicros = 0;
  let processMicros = 0;
  let processed = 0;
  let waiting = 0;
  const written = countBytesWritten();
  for (const [index, group] of groups.entries()) {
    let started = process.cpuUsage();
    queue.enqueueNow(group);
    enqueueMicros += cpuMicros(started);
    waiting += group.length;
    if (waiting < batchSize && index < groups.length - 1) continue;
    started = process.cpuUsage();
    processed += await worker.drainDue();
    processMicros += cpuMicros(started);
    waiting = 0;
  }
  const bytes = written();
  const { processed: done, failed } = worker.counts;
  await store.close();
  if (done - warmed !== processed || failed !== 0) throw new Error(`processed ${done - warmed} of ${processed} batched, ${failed} failed`);
  return { enqueueMicros, processMicros, processed, bytes };
}

export async function runIntakeProcessingBench(options: IntakeProcessingBenchOptions = {}) {
  const payloads = options.payloads ?? 30_000;
  const batchSizes = options.batchSizes ?? [25, PROCESSING_BATCH_SIZE];
  const groupSize = GROUP_SIZE;
  const directory = mkdtempSync(join(tmpdir(), 'trailwire-bench-processing-'));
  const rows: Array<Record<string, string | number>> = [];
  try {
    const groups = groupsOf(payloads, groupSize);
    const count = groups.length * groupSize;
    const bare = measureBareInsert(join(directory, 'bare.db'), groups);
    rows.push({
      work: 'bare SQLite insert (one table)',
      batch: '-',
      'write µs': round(bare.micros / count, 1),
      'process µs': '-',
      'total µs': round(bare.micros / count, 1),
      'per core/s': Math.round((count * 1e6) / bare.micros),
      'written KB': bare.bytes === null ? '-' : round(bare.bytes / count / 1024, 1),
    });
    const configurations = [
      ...batchSizes.flatMap((batchSize) => (['process', 'power'] as const).map((durability) => ({ batchSize, durability, someGrant: false }))),
      { batchSize: Math.max(...batchSizes), durability: 'process' as const, someGrant: true },
    ];
    for (const { batchSize, durability, someGrant } of configurations) {
      const { enqueueMicros, processMicros, bytes } = await measureThreadWork(join(directory, `${durability}-${batchSize}-${someGrant}.db`), durability, groups, batchSize, someGrant);
      const total = enqueueMicros + processMicros;
      rows.push({
        work: `trailwire thread, ${durability}${someGrant ? ', a grant in the store' : ''}`,
        batch: batchSize,
        'write µs': round(enqueueMicros / count, 1),
        'process µs': round(processMicros / count, 1),
        'total µs': round(total / count, 1),
        'per core/s': Math.round((count * 1e6) / total),
        // Everything this process wrote while appending and processing (WAL, checkpoints, temporary files), per payload.
        'written KB': bytes === null ? '-' : round(bytes / count / 1024, 1),
      });
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
  printTable(`Intake processing without HTTP: CPU per payload, ${payloads} GPS payloads of ${FLEET.toLocaleString('en-US')} VINs in groups of ${groupSize} per row`, rows);
  const largest = rows.find((row) => row.work === 'trailwire thread, process' && row.batch === Math.max(...batchSizes));
  if (largest) {
    const micros = largest['process µs'] as number;
    const met = micros <= PROCESSING_TARGET_MICROS;
    console.log(
      `target processing <= ${PROCESSING_TARGET_MICROS} µs a payload (process, batches of ${largest.batch}): ${micros} µs (${met ? 'met' : 'NOT met'}), plus ${largest['write µs']} µs to append it`,
    );
    // The target is in microseconds, which depend on the machine; the bare insert of the same run says how fast this one is.
    const bare = rows[0]!['write µs'] as number;
    if (!met)
      console.log(
        `why: processing took ${round(micros / bare, 1)} × this run's bare SQLite insert (${bare} µs a payload); at that multiple the target needs a machine whose bare insert takes at most ${round((PROCESSING_TARGET_MICROS * bare) / micros, 1)} µs`,
      );
  }
  console.log(`results: ${writeResults('intake-processing', { payloads, groupSize, batchSizes, fleet: FLEET, rows })}`);
  return { rows };
}

if (import.meta.url === `file://${process.argv[1]}`) await runIntakeProcessingBench();
