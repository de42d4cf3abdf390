/**
 * The crash promise on PostgreSQL, in the middle of a backlog: `trailwire serve --database-url` is
 * killed with SIGKILL (no shutdown hook runs) while its worker holds partition leases and batches
 * in hand, another process started on the same schema takes the partitions over at once (the
 * leases ended with the killed process's connections), and every payload is processed exactly as
 * often as it shows: one GPS fix per payload, none twice. (A kill right after the 202s, with a
 * second process taking over, is in `test/scale-out/multi-process.test.ts`.) Needs
 * `TRAILWIRE_TEST_DATABASE_URL`; the schema (`tw_test_<hex>`) is dropped at the end.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { after, it } from 'node:test';
import { openPostgresIntakeQueue, openPostgresStore } from '../../adapters/postgres/index.ts';
import { withCheckDigit } from '../../core/vin.ts';
import { TRAILWIRE_BIN } from '../support/cli.ts';
import { until } from '../support/until.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const schema = `tw_test_${randomBytes(6).toString('hex')}`;
const env: NodeJS.ProcessEnv = { ...process.env, TRAILWIRE_GRPC_PORT: '0', TRAILWIRE_LOG_LEVEL: 'error' };
delete env.TRAILWIRE_WORKERS;
const children: ChildProcess[] = [];

after(async () => {
  for (const child of children) child.kill('SIGKILL');
  if (DATABASE_URL === undefined) return;
  const store = await openPostgresStore({ connectionString: DATABASE_URL, schema: 'public', poolSize: 1 });
  await store.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await store.close();
});

async function serve(): Promise<ChildProcess> {
  const args = [TRAILWIRE_BIN, 'serve', '--json', '--port', '0', '--host', '127.0.0.1', '--database-url', DATABASE_URL!, '--database-schema', schema];
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

it(
  'a SIGKILL in the middle of a PostgreSQL backlog loses nothing, and nothing is written twice',
  { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false, timeout: 120_000 },
  async () => {
    const total = 10_000;
    const store = await openPostgresStore({ connectionString: DATABASE_URL!, schema, poolSize: 2 });
    const queue = await openPostgresIntakeQueue(store);
    try {
      // A backlog appended straight to the log: this case is about processing.
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
      // Processed, as the log derives it: at or below its partition's watermark, not waiting for a retry.
      const processed = async () =>
        (
          await store.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${schema}".intake_log l JOIN "${schema}".intake_partitions w ON w.part = l.part
             LEFT JOIN "${schema}".intake_parked p ON p.seq = l.seq
             WHERE l.seq <= w.watermark AND (p.seq IS NULL OR p.state = 'done')`,
          )
        ).rows[0]!.n;

      const first = await serve();
      // The kill comes as soon as processing is seen under way.
      await until(async () => (await processed()) > 0, 'processing to begin', 60_000, 5);
      await kill(first);
      const atKill = await processed();
      assert.ok(atKill < total, `the kill came mid-processing (${atKill} of ${total} processed)`);

      const second = await serve();
      try {
        await until(async () => (await processed()) >= total, 'every payload to be processed after the kill', 60_000, 100);
        assert.equal(await processed(), total, 'every payload was processed after the kill');
        assert.equal(await queue.depth(), 0, 'nothing left to do');
        const fixes = await store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".gps_fixes`);
        assert.equal(fixes.rows[0]!.n, total, 'one fix per payload, none twice');
      } finally {
        await kill(second);
      }
    } finally {
      await queue.close();
      await store.close();
    }
  },
);
