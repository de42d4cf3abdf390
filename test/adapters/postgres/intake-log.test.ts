/**
 * The PostgreSQL schema as an intake log: the log conformance suite on a schema of its own per case,
 * two pools on one schema for the sharing case; a commit's processed time is the batch's, not the
 * system clock's. Needs `TRAILWIRE_TEST_DATABASE_URL`; every schema it
 * creates is named `tw_test_<random>` and dropped at the end.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { openPostgresIntakeLog } from '../../../adapters/postgres/index.ts';
import { createPostgresPool } from '../../../adapters/postgres/pool.ts';
import { runIntakeLogConformance } from '../../conformance/intake-log.ts';
import { INTAKE_TIME, newIntake } from '../../support/fixtures.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;

describe('PostgreSQL intake log', { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false }, () => {
  const connectionString = DATABASE_URL!;
  const schemas: string[] = [];
  const admin = new pg.Pool({ connectionString, max: 1 });
  const newSchema = (): string => {
    const schema = `tw_test_${randomBytes(6).toString('hex')}`;
    schemas.push(schema);
    return schema;
  };
  /** A log on its own pool (a process, in effect); closing it (once or more) ends the pool too. */
  async function openProcess(schema: string) {
    const pool = createPostgresPool({ connectionString, poolSize: 4, connectTimeoutMs: 5000 });
    const log = await openPostgresIntakeLog({ pool, schema });
    let closing: Promise<void> | undefined;
    return { log, close: () => (closing ??= log.close().then(() => pool.end())) };
  }
  after(async () => {
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });

  runIntakeLogConformance({
    name: 'postgres (a schema per case)',
    openLog: () => openProcess(newSchema()),
    async openSharedLogs() {
      const schema = newSchema();
      const [a, b] = [await openProcess(schema), await openProcess(schema)];
      return { logs: [a.log, b.log], close: async () => (await a.close(), await b.close()) };
    },
  });

  it("records a commit at the batch's time (the worker's clock), which the queue's status reads show as processed", async () => {
    const schema = newSchema();
    const { log, close } = await openProcess(schema);
    try {
      const [position] = await log.append([newIntake()]);
      assert.ok(position !== undefined && 'seq' in position, 'appended');
      const at = INTAKE_TIME + 123;
      await log.commit(position.partition, position.seq, at);
      const rows = await admin.query(`SELECT part, last_seq::float8 AS last_seq, processed_at::float8 AS processed_at FROM "${schema}".intake_batches`);
      assert.deepEqual(rows.rows, [{ part: position.partition, last_seq: position.seq, processed_at: at }]);
    } finally {
      await close();
    }
  });
});
