/**
 * A 202 is a promise: the payload is stored before the answer. This test holds the server to it by
 * killing it with SIGKILL right after the last 202 (no shutdown hook runs), starting it again on the
 * same file, and checking that every acknowledged payload is processed.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, it } from 'node:test';
import { withCheckDigit } from '../../core/vin.ts';
import { openSqliteIntakeQueue } from '../../adapters/sqlite/intake-queue.ts';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { TRAILWIRE_BIN } from '../support/cli.ts';
import { assertAllProcessed } from '../support/intake-status.ts';
import { until } from '../support/until.ts';

const bin = TRAILWIRE_BIN;
const dir = mkdtempSync(join(tmpdir(), 'trailwire-crash-'));
const db = join(dir, 'crash.db');
const env = { ...process.env, TRAILWIRE_GRPC_PORT: '0', TRAILWIRE_LOG_LEVEL: 'error' };
const children: ChildProcess[] = [];
after(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** Starts `trailwire serve` on the test's file and answers its URL. */
async function serve(extra: string[] = []): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [bin, 'serve', '--db', db, '--port', '0', '--json', ...extra], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) return { url: JSON.parse(line).url as string, child };
  throw new Error('serve printed nothing');
}

/** Sends `total` gps-basic payloads over `senders` connections; answers the ids of the 202s, in order of the answers. */
async function sendAll(url: string, token: string, total: number, senders = 16): Promise<string[]> {
  const acknowledged: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: senders }, async () => {
      while (next < total) {
        const i = next++;
        // 100 VINs, so that several payloads of one VIN are in flight at once.
        const vin = withCheckDigit(`1CRASH000${String(i % 100).padStart(8, '0')}`);
        const response = await fetch(`${url}/api/v1/telemetry/intake/${vin}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ timestamp: 1767268800 + i, position: { latitude: 41, longitude: -87 }, speedKph: 80, bearingDeg: 10 }),
        });
        assert.equal(response.status, 202);
        acknowledged.push(((await response.json()) as { id: string }).id);
      }
    }),
  );
  return acknowledged;
}

async function tokenOf(url: string, apiKey: string): Promise<string> {
  const response = await fetch(`${url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
  return ((await response.json()) as { access_token: string }).access_token;
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** Starts the server again on the file and waits until every id is processed (through the status endpoint). */
async function assertAllProcessedAfterRestart(apiKey: string, acknowledged: string[]): Promise<void> {
  const second = await serve();
  await assertAllProcessed(second.url, await tokenOf(second.url, apiKey), acknowledged);
  await kill(second.child);
}

it('every payload acknowledged with 202 before a SIGKILL is in the file, and is processed after the restart', { timeout: 60_000 }, async () => {
  const partner = JSON.parse(execFileSync(process.execPath, [bin, 'partners', 'create', '--name', 'Crash Co', '--product', 'gps-basic', '--db', db, '--json'], { env }).toString());
  // The first process only takes intake, so every payload is still queued at the kill and the
  // restarted process has to do all the processing.
  const first = await serve(['--no-intake-worker']);
  const acknowledged = await sendAll(first.url, await tokenOf(first.url, partner.apiKey), 400);
  // The kill comes the instant the last 202 is read.
  await kill(first.child);
  assert.equal(acknowledged.length, 400);

  // Before anything restarts: every acknowledged payload is in the file the killed process left.
  const store = await openSqliteStore({ file: db });
  const queue = openSqliteIntakeQueue(store.db);
  const records = await Promise.all(acknowledged.map((id) => queue.get(id)));
  await store.close();
  assert.equal(records.filter((record) => record !== null).length, 400, 'every acknowledged payload survived the kill');
  assert.ok(records.every((record) => record?.status === 'queued'), 'nothing was processed before the kill');

  await assertAllProcessedAfterRestart(partner.apiKey, acknowledged);
});

it('a SIGKILL in the middle of processing loses nothing either, and applying a payload twice writes it once', { timeout: 60_000 }, async () => {
  // A backlog written straight into the file: this case is about processing, the one above about intake.
  const total = 20_000;
  const store = await openSqliteStore({ file: db });
  const queue = openSqliteIntakeQueue(store.db);
  const fixesBefore = store.db.prepare('SELECT COUNT(*) FROM gps_fixes').pluck().get() as number;
  await Promise.all(
    Array.from({ length: total }, (_, i) =>
      queue.enqueue({
        id: `backlog-${String(i).padStart(6, '0')}`,
        partnerId: 'partner-1',
        product: 'gps-basic',
        vin: withCheckDigit(`1BACK000${String(i % 500).padStart(9, '0')}`),
        payload: JSON.stringify({ timestamp: 1767268800 + i, position: { latitude: 41, longitude: -87 }, speedKph: 80, bearingDeg: 10 }),
        receivedAt: Date.now(),
        idempotencyKey: null,
      }),
    ),
  );
  // Processed: past the log's watermark and not waiting for a retry (the status the queue derives).
  const processed = store.db
    .prepare(
      `SELECT COUNT(*) FROM intake_log l LEFT JOIN intake_parked p ON p.seq = l.seq
       WHERE l.id LIKE 'backlog-%' AND l.seq <= (SELECT coalesce(max(last_seq), 0) FROM intake_batches) AND (p.seq IS NULL OR p.state = 'done')`,
    )
    .pluck();
  const first = await serve();
  // The kill comes as soon as processing is seen under way.
  await until(() => (processed.get() as number) > 0, 'processing to begin', 30_000, 2);
  await kill(first.child);
  const atKill = processed.get() as number;
  assert.ok(atKill < total, `the kill came mid-processing (${atKill} of ${total} processed)`);

  const second = await serve();
  try {
    await until(() => (processed.get() as number) >= total, 'every payload to be processed after the restart', 30_000, 50);
    assert.equal(processed.get(), total, 'every payload was processed after the restart');
    assert.equal(await queue.depth(), 0, 'nothing left to do');
    assert.equal(store.db.prepare('SELECT COUNT(*) FROM gps_fixes').pluck().get(), fixesBefore + total, 'one fix per payload, none twice');
  } finally {
    await store.close();
    await kill(second.child);
  }
});
