/**
 * Intake processing in a worker thread: it processes what the main thread's queue stores, wakes on
 * notify, sends live updates and counts back, stops cleanly; and the write-lock handoff lets a
 * waiting main thread commit between (or within) the thread's rounds.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { WriteLockHandoff } from '../../../adapters/sqlite/intake-lock-handoff.ts';
import { openSqliteIntakeQueue } from '../../../adapters/sqlite/intake-queue.ts';
import { IntakeThread, type IntakeThreadLog } from '../../../adapters/sqlite/intake-thread.ts';
import type { LiveTrailerEvent } from '../../../core/live-hub.ts';
import { createTrailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { uniqueVin } from '../../support/fixtures.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-thread-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;
const freshFile = (): string => join(directory, `thread-${++files}.db`);

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('IntakeThread', () => {
  it('processes what the main thread queues, wakes on notify, sends live updates back and stops cleanly', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const handoff = new WriteLockHandoff();
    let thread: IntakeThread | undefined;
    const queue = openSqliteIntakeQueue(store.db, { onEnqueued: () => thread?.notify(), lockHandoff: handoff });
    const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: queue });
    const { principal } = await trailwire.auth.createCustomer({ name: 'Threaded' });
    const fleet = await trailwire.admin.createFleet({ customerId: principal.id, name: 'F' });
    const vin = uniqueVin();
    await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin });
    const events: LiveTrailerEvent[] = [];
    const logs: IntakeThreadLog[] = [];
    const claims = { aud: 'partners', sub: 'partner-1', scope: 'product:gps-basic', ver: 1 } as never;
    const send = (seconds: number) => {
      const body = { timestamp: 1780315200 + seconds, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 };
      return trailwire.intake!.service.accept({ claims, vin, body, rawBody: JSON.stringify(body) });
    };
    const first = await send(0);
    // A long idle poll: only a notify can get the later payloads processed within the test's time.
    thread = await IntakeThread.start({ file, lockHandoff: handoff, worker: { idlePollMs: 600_000 }, onEvents: (batch) => events.push(...batch), onLog: (entry) => logs.push(entry) });
    assert.equal(thread.isRunning, true);
    await until(() => thread!.counts.processed === 1, 'the payload queued before the start');
    const later = await Promise.all([send(1), send(2), send(3)]);
    await until(() => thread!.counts.processed === 4, 'the payloads queued after a notify');
    for (const { record } of [first, ...later]) assert.equal((await queue.get(record.id))?.status, 'processed');
    assert.deepEqual(
      events.map((event) => event.trailer.telemetry?.timestamp),
      [0, 1, 2, 3].map((seconds) => (1780315200 + seconds) * 1000),
      'every update, in order, with the trailer state after each payload',
    );
    assert.equal(events[0]!.customerId, principal.id);
    await thread.stop();
    assert.equal(thread.isRunning, false);
    const afterStop = await send(4);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal((await queue.get(afterStop.record.id))?.status, 'queued', 'a stopped thread processes nothing');
    assert.deepEqual(logs, []);
    await trailwire.close();
  });

  it('loads the product modules it is given besides the built-in products', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    const reefer = { reeferId: 'RF-1', reportedAt: '2026-06-01T12:00:00Z', setpointC: -18, returnAirC: -17, fuelPercent: 80 };
    const gps = { timestamp: 1780315200, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 100, bearingDeg: 90 };
    for (const [id, product, payload] of [['reefer-1', 'reefer', reefer], ['gps-1', 'gps-basic', gps]] as const)
      await queue.enqueue({ id, partnerId: 'p', product, vin: uniqueVin(), payload: JSON.stringify(payload), receivedAt: Date.now(), idempotencyKey: null });
    const thread = await IntakeThread.start({
      file,
      productModules: ['./examples/custom-product/index.ts'],
      cwd: fileURLToPath(new URL('../../../', import.meta.url)),
      onEvents: () => {},
    });
    await until(() => thread.counts.processed === 2, 'both payloads');
    await thread.stop();
    await store.close();
  });

  it('refuses a database it cannot share', async () => {
    await assert.rejects(IntakeThread.start({ file: ':memory:', onEvents: () => {} }), /in-memory database cannot be shared/);
  });
});

describe('WriteLockHandoff', () => {
  it('gives a waiting main thread its turn, and holds the thread until the main thread releases the lock', async () => {
    const handoff = new WriteLockHandoff();
    const module = new URL('../../../adapters/sqlite/intake-lock-handoff.ts', import.meta.url).href;
    const tsx = import.meta.resolve('tsx/esm/api');
    // The "processing thread": between rounds it checks for a waiting main thread and lets it go first.
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      import(${JSON.stringify(tsx)}).then(({ tsImport }) => tsImport(${JSON.stringify(module)}, ${JSON.stringify(module)})).then(({ WriteLockHandoff }) => {
        const handoff = new WriteLockHandoff(workerData);
        const cells = new Int32Array(new SharedArrayBuffer(4));
        parentPort.postMessage('ready');
        const deadline = Date.now() + 5000;
        while (!handoff.mainWaiting && Date.now() < deadline) Atomics.wait(cells, 0, 0, 1);
        handoff.letMainGoFirst();
        parentPort.postMessage('resumed');
      });`;
    const worker = new Worker(code, { eval: true, workerData: handoff.buffer });
    const exited = once(worker, 'exit');
    const messages: string[] = [];
    worker.on('message', (message: string) => messages.push(message));
    await until(() => messages.includes('ready'), 'the thread');
    const turnsBefore = Atomics.load(new Int32Array(handoff.buffer), 1);
    await handoff.request();
    assert.equal(Atomics.load(new Int32Array(handoff.buffer), 1), turnsBefore + 1, 'the thread gave the turn (not a timeout)');
    // The thread stays out of the way until the main thread is done.
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.deepEqual(messages, ['ready']);
    handoff.release();
    await until(() => messages.includes('resumed'), 'the thread to resume');
    await exited;
  });

  it('tells the thread nothing when the main thread is not waiting', () => {
    const handoff = new WriteLockHandoff();
    assert.equal(handoff.mainWaiting, false);
    const started = Date.now();
    handoff.letMainGoFirst();
    assert.ok(Date.now() - started < 5, 'no wait');
    handoff.release();
    assert.equal(handoff.mainWaiting, false);
  });
});
