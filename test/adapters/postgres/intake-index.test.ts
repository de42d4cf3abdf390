/**
 * The PostgreSQL intake index: the index conformance suite on a schema of its own per case. Needs
 * `TRAILWIRE_TEST_DATABASE_URL`; every schema it creates is named `tw_test_<random>` and dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import { after, describe } from 'node:test';
import pg from 'pg';
import { openPostgresIntakeIndex } from '../../../adapters/postgres/index.ts';
import { createPostgresPool } from '../../../adapters/postgres/pool.ts';
import { runIntakeIndexConformance } from '../../conformance/intake-index.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;

describe('PostgreSQL intake index', { skip: DATABASE_URL === undefined ? 'TRAILWIRE_TEST_DATABASE_URL is not set' : false }, () => {
  const schemas: string[] = [];
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  after(async () => {
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  });
  runIntakeIndexConformance({
    name: 'postgres (a schema per case)',
    async openIndex() {
      const schema = `tw_test_${randomBytes(6).toString('hex')}`;
      schemas.push(schema);
      const pool = createPostgresPool({ connectionString: DATABASE_URL!, poolSize: 12, connectTimeoutMs: 5000 });
      const index = await openPostgresIntakeIndex({ pool, schema });
      return { index, close: async () => (await index.close(), await pool.end()) };
    },
  });
});
