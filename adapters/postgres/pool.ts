/**
 * The connection plumbing every PostgreSQL module of Trailwire shares (the store and the durable
 * intake log): a `pg` pool whose BIGINT columns come back as numbers (epoch milliseconds and
 * sequences, all far below 2^53), the quoting of the schema name that every statement is qualified
 * with, a transaction helper that always returns its connection, and the translation of PostgreSQL
 * errors into `TrailwireError` codes: constraint errors where a write names them, and — on every
 * query of the pool — a database that cannot be reached into `store_unavailable`.
 *
 * When PostgreSQL goes away (contract 6, issue 28). A query fails within a bound, never hangs: a new
 * connection waits at most `connectTimeoutMs`, a query at most `queryTimeoutMs` (the client's read
 * timeout, which also frees a connection whose server vanished without closing it). The failure is
 * a `store_unavailable` error — 503 with `Retry-After` at the HTTP edge, not a 500 — carrying the
 * driver's error as its cause. The pool drops connections that failed and opens new ones for the
 * next queries, so service resumes by itself when the database is back: no restart.
 */
import pg from 'pg';
import { isTrailwireError, storeUnavailable, TrailwireError } from '../../core/errors.ts';

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
  /** How long a query may go unanswered before it fails (and its connection is dropped), in ms. Default: no limit (the store passes its own). */
  queryTimeoutMs?: number;
}

/** SQLSTATEs that say the database is away or going away, not that a statement is wrong. */
const UNREACHABLE_STATES = new Set([
  '57P01', // admin_shutdown: the server is stopping (fast or immediate shutdown)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up, shutting down, in recovery
  '53300', // too_many_connections
]);
/** Node socket errors of a server that is down or cannot be reached. */
const UNREACHABLE_SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/** The driver's own words for a lost or never-made connection (it has no codes for them). */
const UNREACHABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Connection ended',
];

/** Seconds a client is told to wait before retrying a request refused because the database was away. */
const UNREACHABLE_RETRY_AFTER_SECONDS = 2;

/** Whether `error` says that PostgreSQL cannot be reached (rather than that a statement failed). */
export function isPostgresUnreachable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (code.startsWith('08') || UNREACHABLE_STATES.has(code) || UNREACHABLE_SOCKET_CODES.has(code))) return true;
  return typeof message === 'string' && UNREACHABLE_MESSAGES.some((words) => message.includes(words));
}

/** The error a caller should see: `store_unavailable` when the database cannot be reached, else `error` unchanged. */
export function explainPostgresFailure(error: unknown): unknown {
  if (isTrailwireError(error) || !isPostgresUnreachable(error)) return error;
  return storeUnavailable('The database (PostgreSQL) cannot be reached; retry shortly.', error, UNREACHABLE_RETRY_AFTER_SECONDS);
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
    query_timeout: options.queryTimeoutMs,
    // A connection whose server vanished (a host gone, a cut network) is noticed by the OS.
    keepAlive: true,
    application_name: 'trailwire',
    types,
  });
  // An idle connection dropped by the server (a restart, a failover) is removed from the pool and the
  // next query opens a new one; without a listener the pool's 'error' event would end the process.
  pool.on('error', () => {});
  explainFailures(pool);
  return pool;
}

/**
 * Makes every failure of the pool's queries and connections pass through `explainPostgresFailure`,
 * whichever module runs them (the store, the intake queue, a transaction): patched on this pool and
 * its clients, so an embedding application's other pools are untouched. The pool's own `query` is
 * explained too, not only the client's: when a connection is lost mid-query (the server ended it
 * without a word), pg-pool answers that query with the client's 'error' event, raw, before the
 * client's query fails (issue 37, item 9: a 500 during a PostgreSQL outage).
 */
function explainFailures(pool: pg.Pool): void {
  explainCallsOf(pool, 'connect');
  explainCallsOf(pool, 'query');
  pool.on('connect', (client) => explainCallsOf(client, 'query'));
}

/**
 * Replaces `target[method]` with one whose failures are explained, in both calling styles: a
 * callback last (pg-pool's own `query` calls `connect` and `client.query` that way) or a promise.
 */
function explainCallsOf<Target extends object>(target: Target, method: keyof Target & string): void {
  const call = (target[method] as (...args: unknown[]) => unknown).bind(target);
  (target as Record<string, unknown>)[method] = (...args: unknown[]) => {
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (error: unknown, ...rest: unknown[]) => (callback as (...values: unknown[]) => void)(error && explainPostgresFailure(error), ...rest);
      return call(...args);
    }
    return explained(call(...args));
  };
}

/** A promise's rejection explained; anything else (a submittable query) as it is. */
function explained<T>(result: T): T {
  if (result instanceof Promise) return result.catch((error: unknown) => Promise.reject(explainPostgresFailure(error))) as T;
  return result;
}

/**
 * Runs `work` on `client` with no read timeout (`queryTimeoutMs`), then restores it before the
 * client goes back to the pool. node-postgres reads the timeout from the client's connection
 * parameters at each query, and a per-query `query_timeout` of 0 would fall back to the pool's.
 */
export async function withoutQueryTimeout<T>(client: pg.PoolClient, work: () => Promise<T>): Promise<T> {
  const parameters = (client as unknown as { connectionParameters: { query_timeout?: number } }).connectionParameters;
  const timeout = parameters.query_timeout;
  parameters.query_timeout = undefined;
  try {
    return await work();
  } finally {
    parameters.query_timeout = timeout;
  }
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
  // A connection lost between the transaction's statements (the server stopped) emits 'error', which
  // unheard would end the process: the next statement fails instead, and the connection is destroyed.
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
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
  } catch (error) {
    // A connection lost mid-transaction is the database going away (503), not a bug (500).
    throw explainPostgresFailure(error);
  } finally {
    client.off('error', onError);
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

/**
 * A statement prepared once per connection under its name. Without one, it is planned again for
 * each call's values: for a lookup of a few keys in a table that grows while the server runs
 * (`vin = ANY($1)` in trailers), whose plan cached while the table was small — a scan of the whole
 * table, each row compared with the keys — would be kept as the table grows (issue 41: 3–4 ms a
 * call at 3,500 trailers on the new-VIN fleet, the owners' lookup PostgreSQL's costliest statement).
 * Planned with hundreds of keys, `vin = ANY($1)` also chooses that scan (each key weighed, the table
 * never analyzed): such a lookup hands its keys over through a subquery (`ANY(ARRAY(SELECT
 * unnest($1)))`), which the planner does not look into, and keeps the index.
 */
export interface Statement {
  name?: string;
  text: string;
}

/** What a statement runs on: the pool, or a client holding a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

/** Runs a statement (prepared once per connection when named) and answers its rows. */
export async function queryRows<R extends pg.QueryResultRow>(on: Queryable, statement: Statement, values: unknown[]): Promise<R[]> {
  return (await on.query<R>({ name: statement.name, text: statement.text, values })).rows;
}

/** Runs a statement and answers its first row, if any. */
export async function queryRow<R extends pg.QueryResultRow>(on: Queryable, statement: Statement, values: unknown[]): Promise<R | undefined> {
  return (await queryRows<R>(on, statement, values))[0];
}

/** Runs a statement and answers how many rows it touched. */
export async function queryRun(on: Queryable, statement: Statement, values: unknown[]): Promise<number> {
  return (await on.query({ name: statement.name, text: statement.text, values })).rowCount ?? 0;
}
