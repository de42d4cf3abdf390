/**
 * The crash promise with the intake log on NATS JetStream (issue 30), in the middle of a backlog:
 * `trailwire serve --database-url ... --intake-log nats://...` is killed with SIGKILL (no shutdown
 * hook runs) while its worker holds partition leases and batches in hand; a second process started
 * on the same schema and stream takes the partitions over once the dead one's leases run out, and
 * every payload answered (every 202) is processed exactly once — one row and one GPS fix each —
 * and each VIN's payloads in their order: no payload of a VIN is processed in an earlier batch than
 * one appended before it. Needs `TRAILWIRE_TEST_DATABASE_URL` and `TRAILWIRE_TEST_NATS_URL`; the
 * schema and the stream are deleted at the end.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { after, it } from 'node:test';
import { openJetStreamIntakeLog, jetStreamOptionsOfUrl } from '../../adapters/nats/index.ts';
import { openPostgresIntakeIndex, openPostgresStore } from '../../adapters/postgres/index.ts';
import { PartitionedIntakeQueue } from '../../core/partitioned-intake-queue.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { TRAILWIRE_BIN } from '../support/cli.ts';
import { deleteStreams, freshStream, NATS_URL } from '../support/nats.ts';
import { until } from '../support/until.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const skip = DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : NATS_URL === undefined ? 'TRAILWIRE_TEST_NATS_URL is not set' : false;
const schema = `tw_test_${randomBytes(6).toString('hex')}`;
const { stream, subjectPrefix } = freshStream();
// A short lease, so the take-over comes within seconds of the kill.
const intakeLog = `${NATS_URL}?stream=${stream}&subjects=${subjectPrefix}&lease-ttl-ms=2000`;
const env: NodeJS.ProcessEnv = { ...process.env, TRAILWIRE_GRPC_PORT: '0', TRAILWIRE_LOG_LEVEL: 'error' };
delete env.TRAILWIRE_WORKERS;
const children: ChildProcess[] = [];

after(async () => {
  for (const child of children) child.kill('SIGKILL');
  if (skip) return;
  const store = await openPostgresStore({ connectionString: DATABASE_URL!, schema: 'public', poolSize: 1 });
  await store.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await store.close();
  await deleteStreams([stream]);
});

async function serve(): Promise<ChildProcess> {
  const args = [TRAILWIRE_BIN, 'serve', '--json', '--port', '0', '--host', '127.0.0.1', '--database-url', DATABASE_URL!, '--database-schema', schema, '--intake-log', intakeLog];
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  for await (const _line of createInterface({ input: child.stdout! })) return child;
  throw new Error('serve printed nothing');
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

it('a SIGKILL in the middle of a JetStream backlog loses nothing, processes nothing twice, and keeps each VIN in order', { skip, timeout: 180_000 }, async () => {
  const total = 6_000;
  const vins = 300;
  const store = await openPostgresStore({ connectionString: DATABASE_URL!, schema, poolSize: 4 });
  const log = await openJetStreamIntakeLog(jetStreamOptionsOfUrl(intakeLog));
  const index = await openPostgresIntakeIndex(store);
  const queue = new PartitionedIntakeQueue(log, index);
  try {
    // The backlog, appended as intake appends it: each resolved enqueue is a 202.
    const answered = await Promise.all(
      Array.from({ length: total }, (_, i) =>
        queue.enqueue({
          id: `backlog-${String(i).padStart(6, '0')}`,
          partnerId: 'partner-1',
          product: 'gps-basic',
          vin: withCheckDigit(`1BACK000${String(i % vins).padStart(9, '0')}`),
          payload: JSON.stringify({ timestamp: 1767268800 + i, position: { latitude: 41, longitude: -87 }, speedKph: 80, bearingDeg: 10 }),
          receivedAt: Date.now(),
          idempotencyKey: null,
        }),
      ),
    );
    assert.equal(new Set(answered.map((result) => result.record.id)).size, total, 'every payload answered with an id of its own');
    const processed = async () =>
      (await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".intake_index_rows WHERE state = 'done'`).catch(() => ({ rows: [{ n: 0 }] }))).rows[0]!.n;

    const first = await serve();
    await until(async () => (await processed()) > 0, 'the first server to process a payload', 60_000);
    await kill(first);
    const atKill = await processed();
    assert.ok(atKill < total, `the kill came mid-processing (${atKill} of ${total} processed)`);

    const second = await serve();
    try {
      // The assertion below says how many were processed when the wait gives up.
      await until(async () => (await processed()) >= total, 'the second server to finish the backlog', 120_000).catch(() => {});
      assert.equal(await processed(), total, 'every payload answered 202 was processed after the kill');
      // The index says done before the log's acknowledgements land (JetStream acks after the commit).
      await until(async () => (await queue.depth()) === 0, 'the log to have nothing left', 30_000).catch(() => {});
      assert.equal(await queue.depth(), 0, 'nothing left to do');
      for (const { record } of answered.filter((_, i) => i % 97 === 0)) assert.equal((await queue.get(record.id))?.status, 'processed', `${record.id} says processed`);
      const fixes = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".gps_fixes`);
      assert.equal(fixes.rows[0]!.n, total, 'one fix per payload, none twice');
      const outOfOrder = await store.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".intake_index_rows a JOIN "${schema}".intake_index_rows b
           ON b.part = a.part AND b.vin = a.vin AND b.seq > a.seq AND b.processed_at < a.processed_at`,
      );
      assert.equal(outOfOrder.rows[0]!.n, 0, "no payload processed before an earlier one of its VIN");
    } finally {
      await kill(second);
    }
  } finally {
    await queue.close();
    await log.close();
    await store.close();
  }
});
