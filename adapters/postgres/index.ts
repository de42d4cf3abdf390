/**
 * The PostgreSQL backend of Trailwire (`trailwire/postgres`), for scale-out: many stateless Trailwire
 * processes sharing one fleet through one database (contract 11). It holds the store (`openPostgresStore`,
 * the same `TrailwireStore` as the embedded SQLite one, passing the same conformance suite), the
 * migration runner that other modules keeping tables in the same schema use (the intake queue), and
 * the pool plumbing they share: BIGINT parsed as numbers, schema-qualified statements, transactions.
 */
export {
  DEFAULT_POSTGRES_STORE_OPTIONS,
  openPostgresStore,
  resolvePostgresStoreOptions,
  type PostgresStore,
  type PostgresStoreOptions,
} from './postgres-store.ts';
export {
  applyPostgresMigrations,
  POSTGRES_STORE_COMPONENT,
  POSTGRES_STORE_MIGRATIONS,
  type PostgresMigration,
} from './migrations.ts';
export { createPostgresPool, quoteSchema, withTransaction, writeOrExplain, type PostgresPoolOptions } from './pool.ts';
