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

const bin = new URL('../../bin/trailwire.js', import.meta.url).pathname;
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

it('every payload acknowledged with 202 before a SIGKILL is processed after the restart', { timeout: 60_000 }, async () => {
  const partner = JSON.parse(execFileSync(process.execPath, [bin, 'partners', 'create', '--name', 'Crash Co', '--product', 'gps-basic', '--db', db, '--json'], { env }).toString());
  // The first process only takes intake, so every payload is still queued at the kill and the
  // restarted process has to do all the processing.
  const first = await serve(['--no-intake-worker']);
  const auth = await fetch(`${first.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': partner.apiKey } });
  const token = ((await auth.json()) as { access_token: string }).access_token;

  const acknowledged: string[] = [];
  const total = 400;
  let next = 0;
  // 16 concurrent senders; the kill comes the instant the last 202 is read.
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < total) {
        const i = next++;
        const vin = withCheckDigit(`1CRASH${String(i).padStart(4, '0')}0000000`.slice(0, 17));
        const response = await fetch(`${first.url}/api/v1/telemetry/intake/${vin}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ timestamp: 1767268800 + i, position: { latitude: 41, longitude: -87 }, speedKph: 80, bearingDeg: 10 }),
        });
        assert.equal(response.status, 202);
        acknowledged.push(((await response.json()) as { id: string }).id);
      }
    }),
  );
  first.child.kill('SIGKILL');
  await new Promise((resolve) => first.child.once('exit', resolve));
  assert.equal(acknowledged.length, total);

  // Before anything restarts: every acknowledged payload is in the file the killed process left.
  const store = await openSqliteStore({ file: db });
  const queue = openSqliteIntakeQueue(store.db);
  const records = await Promise.all(acknowledged.map((id) => queue.get(id)));
  await store.close();
  assert.equal(records.filter((record) => record !== null).length, total, 'every acknowledged payload survived the kill');
  assert.ok(records.every((record) => record?.status === 'queued'), 'nothing was processed before the kill');

  const second = await serve();
  const auth2 = await fetch(`${second.url}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': partner.apiKey } });
  const token2 = ((await auth2.json()) as { access_token: string }).access_token;
  const deadline = Date.now() + 30_000;
  let pending = [...acknowledged];
  while (pending.length > 0 && Date.now() < deadline) {
    const states = await Promise.all(
      pending.map(async (id) => {
        const response = await fetch(`${second.url}/api/v1/telemetry/intake/status/${id}`, { headers: { authorization: `Bearer ${token2}` } });
        assert.equal(response.status, 200, `payload ${id} is known after the restart`);
        return { id, status: ((await response.json()) as { status: string }).status };
      }),
    );
    assert.ok(states.every((state) => state.status !== 'failed'));
    pending = states.filter((state) => state.status !== 'processed').map((state) => state.id);
    if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.deepEqual(pending, [], 'every acknowledged payload was processed');
  second.child.kill('SIGTERM');
});
