/**
 * `trailwire queue failed` and `trailwire queue retry <id>` (contract 4 and 9), run as a user runs
 * them while `trailwire serve` runs on the same file: the dead letters are listed with their
 * reason, and a re-queued one is processed by the running server.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { openSqliteIntakeQueue } from '../../../adapters/sqlite/intake-queue.ts';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { uniqueVin } from '../../support/fixtures.ts';
import { TRAILWIRE_BIN, runTrailwire } from '../../support/cli.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = TRAILWIRE_BIN;
const env = { ...process.env, NO_COLOR: '1', TRAILWIRE_GRPC_PORT: '0', TRAILWIRE_LOG_LEVEL: 'error' };

const runCli = (args: string[]) => runTrailwire(args, env);

describe('trailwire queue', () => {
  let dir: string;
  let db: string;
  let server: ChildProcess | undefined;
  const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
  const dead = { id: 'dead-1', vin: uniqueVin() };
  const poison = { id: 'dead-2', vin: uniqueVin() };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trailwire-queue-cli-'));
    db = join(dir, 'queue.db');
    // Two dead letters, as a worker leaves them after the last retry.
    const store = await openSqliteStore({ file: db });
    const queue = openSqliteIntakeQueue(store.db);
    const payload = JSON.stringify({ timestamp: T0 / 1000, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 80, bearingDeg: 10 });
    for (const { id, vin } of [dead, poison])
      await queue.enqueue({ id, partnerId: 'partner-1', product: 'gps-basic', vin, payload, receivedAt: T0, idempotencyKey: null });
    const batch = (await queue.nextBatch(10, T0))!;
    const [first, second] = batch.entries;
    await queue.commitBatch(
      batch,
      new Map([
        [first!.seq, { kind: 'failed', error: 'the store was unreachable' }],
        [second!.seq, { kind: 'failed', error: 'product "gps-basic" failed to transform the payload' }],
      ]),
      T0 + 60_000,
    );
    await store.close();
    server = spawn(process.execPath, [BIN, 'serve', '--db', db, '--port', '0', '--json'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
    for await (const line of createInterface({ input: server.stdout! })) {
      JSON.parse(line);
      break;
    }
  });
  after(() => {
    server?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the dead letters with their reason while serve runs, as one JSON document or as text', async () => {
    const listed = await runCli(['queue', 'failed', '--db', db, '--json']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(JSON.parse(listed.stdout), {
      failed: [
        {
          id: dead.id,
          vin: dead.vin,
          product: 'gps-basic',
          partnerId: 'partner-1',
          attempts: 1,
          error: 'the store was unreachable',
          receivedAt: new Date(T0).toISOString(),
          failedAt: new Date(T0 + 60_000).toISOString(),
        },
        {
          id: poison.id,
          vin: poison.vin,
          product: 'gps-basic',
          partnerId: 'partner-1',
          attempts: 1,
          error: 'product "gps-basic" failed to transform the payload',
          receivedAt: new Date(T0).toISOString(),
          failedAt: new Date(T0 + 60_000).toISOString(),
        },
      ],
    });
    const limited = await runCli(['queue', 'failed', '--limit', '1', '--db', db, '--json']);
    assert.equal(JSON.parse(limited.stdout).failed.length, 1);
    const text = await runCli(['queue', 'failed', '--db', db]);
    assert.match(text.stdout, new RegExp(`${dead.id}\\s+${dead.vin}\\s+gps-basic\\s+after 1 attempts: the store was unreachable`));
  });

  it('re-queues one dead letter, which the running server then processes', async () => {
    const retried = await runCli(['queue', 'retry', dead.id, '--db', db, '--json']);
    assert.equal(retried.code, 0, retried.stderr);
    assert.deepEqual(JSON.parse(retried.stdout), { id: dead.id, status: 'queued' });
    const store = await openSqliteStore({ file: db });
    try {
      const queue = openSqliteIntakeQueue(store.db);
      const deadline = Date.now() + 10_000;
      // The server learns of the re-queued payload within its idle poll (250 ms).
      while ((await queue.get(dead.id))?.status !== 'processed' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal((await queue.get(dead.id))?.status, 'processed');
      assert.equal((await store.findTrailerByVin(dead.vin))?.telemetry?.timestamp, T0, 'its fix was written');
      assert.equal((await queue.get(poison.id))?.status, 'failed', 'the other stays a dead letter');
    } finally {
      await store.close();
    }
    const listed = await runCli(['queue', 'failed', '--db', db, '--json']);
    assert.deepEqual(
      JSON.parse(listed.stdout).failed.map((item: { id: string }) => item.id),
      [poison.id],
    );
  });

  it('says so when the id is not a dead letter', async () => {
    for (const id of ['no-such-id', dead.id]) {
      const result = await runCli(['queue', 'retry', id, '--db', db, '--json']);
      assert.equal(result.code, 1);
      assert.equal(JSON.parse(result.stdout).error.code, 'not_found');
    }
  });
});
