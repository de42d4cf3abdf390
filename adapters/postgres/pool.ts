/**
 * The connection plumbing every PostgreSQL module of Trailwire shares (the store now, the durable
 * intake queue later): a `pg` pool whose BIGINT columns come back as numbers (epoch milliseconds and
 * sequences, all far below 2^53), the quoting of the schema name that every statement is qualified
 * with, a transaction helper that always returns its connection, and the translation of PostgreSQL
 * constraint errors into `TrailwireError` codes.
 */
import pg from 'pg';
import { TrailwireError } from '../../core/errors.ts';

/** The `pg` type id of BIGINT (int8). */
const INT8_OID = 20;

/** PostgreSQL's SQLSTATE codes the store turns into its own errors. */
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

/**
 * A schema name Trailwire accepts: a lower-case SQL identifier of at most 63 bytes, so that it never
 * needs case folding rules to be remembered and is the same quoted or not.
 */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface PostgresPoolOptions {
  connectionString: string;
  /** Connections at most. */
  poolSize: number;
  /** How long to wait for a new connection before failing, in ms. */
  connectTimeoutMs: number;
}

/** Parses BIGINT as a JavaScript number, refusing (rather than rounding) one beyond 2^53. */
function parseBigint(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new TrailwireError('internal', `BIGINT ${text} does not fit a JavaScript number`);
  return value;
}

const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8_OID && format !== 'binary' ? parseBigint : pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * A pool with Trailwire's type parsers. The parsers are set per pool, not globally on `pg.types`, so
 * an application that embeds Trailwire keeps its own BIGINT handling elsewhere.
 */
export function createPostgresPool(options: PostgresPoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    application_name: 'trailwire',
    types,
  });
  // An idle connection dropped by the server (a restart, a failover) is removed from the pool and the
  // next query opens a new one; without a listener the pool's 'error' event would end the process.
  pool.on('error', () => {});
  return pool;
}

/** Whether `schema` is a name Trailwire accepts (see `SCHEMA_NAME`). */
export function isSchemaName(schema: unknown): schema is string {
  return typeof schema === 'string' && SCHEMA_NAME.test(schema);
}

/** The schema as a quoted identifier, ready to qualify table names. */
export function quoteSchema(schema: string): string {
  if (!isSchemaName(schema)) throw new TrailwireError('internal', `not a schema name Trailwire accepts: ${JSON.stringify(schema)}`);
  return `"${schema}"`;
}

/**
 * Runs `work` in one transaction on one connection of `pool`: COMMIT when it resolves, ROLLBACK when
 * it throws. A connection whose rollback fails is destroyed rather than returned to the pool, since
 * its state is unknown.
 */
export async function withTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    try {
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: Error) => {
        broken = rollbackError;
      });
      throw error;
    }
  } finally {
    client.release(broken);
  }
}

/**
 * Runs a write, turning constraint failures into the store's errors: a duplicate is a `conflict`, a
 * dangling reference `not_found`. Anything else is rethrown untouched.
 */
export async function writeOrExplain<T>(write: () => Promise<T>, explain: { conflict?: string; missing?: string }): Promise<T> {
  try {
    return await write();
  } catch (error) {
    const code = error instanceof pg.DatabaseError ? error.code : undefined;
    if (code === UNIQUE_VIOLATION && explain.conflict !== undefined) throw new TrailwireError('conflict', explain.conflict, { cause: error });
    if (code === FOREIGN_KEY_VIOLATION && explain.missing !== undefined) throw new TrailwireError('not_found', explain.missing, { cause: error });
    throw error;
  }
}

/** A statement prepared once per connection under its name. */
export interface Statement {
  name: string;
  text: string;
}

/** What a statement runs on: the pool, or a client holding a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

/** Runs a named statement (prepared once per connection) and answers its rows. */
export async function queryRows<R extends pg.QueryResultRow>(on: Queryable, statement: Statement, values: unknown[]): Promise<R[]> {
  return (await on.query<R>({ name: statement.name, text: statement.text, values })).rows;
}

/** Runs a named statement and answers its first row, if any. */
export async function queryRow<R extends pg.QueryResultRow>(on: Queryable, statement: Statement, values: unknown[]): Promise<R | undefined> {
  return (await queryRows<R>(on, statement, values))[0];
}

/** Runs a named statement and answers how many rows it touched. */
export async function queryRun(on: Queryable, statement: Statement, values: unknown[]): Promise<number> {
  return (await on.query({ name: statement.name, text: statement.text, values })).rowCount ?? 0;
}
