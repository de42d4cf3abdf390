/**
 * The PostgreSQL schema as an intake log: the log conformance suite on a schema of its own per case,
 * two pools on one schema for the sharing case. Needs `TRAILWIRE_TEST_DATABASE_URL`; every schema it
 * creates is named `tw_test_<random>` and dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import pg from 'pg';
import { openPostgresIntakeLog } from '../../../adapters/postgres/index.ts';
import { createPostgresPool } from '../../../adapters/postgres/pool.ts';
import { runIntakeLogConformance } from '../../conformance/intake-log.ts';

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
});
