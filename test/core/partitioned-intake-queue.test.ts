/**
 * The intake queue of a log engine (`PartitionedIntakeQueue`): the intake-queue conformance suite on
 * NATS JetStream's log with PostgreSQL's index (a stream and a schema of their own per case; two
 * processes' worth of connections for the sharing case), and on PostgreSQL's log part with the same
 * index, so that the composition is held apart from any one log. The service-backed runs need `TRAILWIRE_TEST_DATABASE_URL` (and `TRAILWIRE_TEST_NATS_URL`
 * for JetStream); each skips, saying so, without it.
 */
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import pg from 'pg';
import { openJetStreamIntakeLog } from '../../adapters/nats/index.ts';
import { openPostgresIntakeIndex, openPostgresIntakeLog } from '../../adapters/postgres/index.ts';
import { createPostgresPool } from '../../adapters/postgres/pool.ts';
import type { IntakeLog } from '../../core/intake-log.ts';
import { PartitionedIntakeQueue } from '../../core/partitioned-intake-queue.ts';
import { runIntakeQueueConformance } from '../conformance/intake-queue.ts';
import { deleteStreams, freshStream, NATS_SKIP, NATS_URL } from '../support/nats.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const DATABASE_SKIP = DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false;

describe('PartitionedIntakeQueue', { skip: DATABASE_SKIP }, () => {
  const schemas: string[] = [];
  const streams: string[] = [];
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  after(async () => {
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    await deleteStreams(streams);
  });
  const newSchema = () => {
    const schema = `tw_test_${randomBytes(6).toString('hex')}`;
    schemas.push(schema);
    return schema;
  };

  /** A queue as one process opens it: its own pool on `schema`, its own log instance. */
  async function openProcess(schema: string, openLog: (host: { pool: pg.Pool; schema: string }) => Promise<IntakeLog>) {
    const pool = createPostgresPool({ connectionString: DATABASE_URL!, poolSize: 6, connectTimeoutMs: 5000 });
    const host = { pool, schema };
    const log = await openLog(host);
    const index = await openPostgresIntakeIndex(host);
    const queue = new PartitionedIntakeQueue(log, index);
    let closing: Promise<void> | undefined;
    const close = () => (closing ??= (async () => {
      await queue.close();
      await log.close();
      await index.close();
      await pool.end();
    })());
    return { queue, close };
  }

  const runOn = (name: string, skip: string | false, newLog: () => (host: { pool: pg.Pool; schema: string }) => Promise<IntakeLog>) =>
    describe(name, { skip }, () => {
      runIntakeQueueConformance({
        name,
        openQueue: () => openProcess(newSchema(), newLog()),
        async openSharedQueues() {
          const schema = newSchema();
          const openLog = newLog();
          const [a, b] = [await openProcess(schema, openLog), await openProcess(schema, openLog)];
          return { queues: [a.queue, b.queue], close: async () => (await a.close(), await b.close()) };
        },
      });
    });

  runOn('jetstream log + postgres index', NATS_SKIP, () => {
    const names = freshStream();
    streams.push(names.stream);
    return () => openJetStreamIntakeLog({ servers: NATS_URL!, ...names });
  });
  runOn('postgres log + postgres index', false, () => (host) => openPostgresIntakeLog(host));
});
