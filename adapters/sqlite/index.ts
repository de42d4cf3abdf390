/**
 * The embedded SQLite backend of Trailwire (`trailwire/sqlite`): the store, its options, and the
 * migration runner that other modules sharing the database file (the intake queue) use for their tables.
 */
export {
  DEFAULT_SQLITE_STORE_OPTIONS,
  openSqliteStore,
  resolveSqliteStoreOptions,
  type SqliteDurability,
  type SqliteStore,
  type SqliteStoreOptions,
} from './sqlite-store.ts';
export { applyMigrations, STORE_COMPONENT, STORE_MIGRATIONS, type Migration } from './migrations.ts';
