/**
 * `trailwire/sqlite`: the embedded SQLite backend of Trailwire — the store, the durable intake queue
 * (its log in a file of its own beside the store's, `<file>-intake-log`), and the migration runner
 * that modules keeping tables in the store's file use. One file serves one server process and any CLI
 * commands beside it (WAL mode). To assemble it as `trailwire serve` does (processing in a thread):
 *
 *   const store = await openSqliteStore({ file: './data/trailwire.db' });
 *   const intake = openSqliteIntake({ store, onEvents: (events) => events.forEach((e) => trailwire.live.publish(e)) });
 *   const trailwire = await createTrailwire({ store, products, intakeQueue: intake.queue, worker: false });
 *   await intake.start();
 */

/**
 * `openSqliteStore(options)` opens (creating if needed) the file and applies pending migrations,
 * answering a `SqliteStore` (a `TrailwireStore` with its connection as `db`). `SqliteStoreOptions`
 * documents each option (`durability`: `SqliteDurability`, `process` or `power`); their defaults are
 * `DEFAULT_SQLITE_STORE_OPTIONS`, and `resolveSqliteStoreOptions` checks options and fills them in.
 */
export {
  DEFAULT_SQLITE_STORE_OPTIONS,
  openSqliteStore,
  resolveSqliteStoreOptions,
  type SqliteDurability,
  type SqliteStore,
  type SqliteStoreOptions,
} from './sqlite-store.ts';
/**
 * `openSqliteIntake({ store, ... })`: the intake of the store's file behind one front door — the
 * queue the core takes intake into, its processing thread, `start`/`stop` and readiness checks
 * (`SqliteIntakeOptions`, `SqliteIntake`). What a server uses.
 */
export { openSqliteIntake, type SqliteIntake, type SqliteIntakeLog, type SqliteIntakeOptions } from './intake.ts';
/**
 * `openSqliteIntakeQueue(store.db, options?)` opens the durable intake queue (`SqliteIntakeQueue`,
 * a `ProcessableIntakeQueue` the core's worker processes on the event loop) on the store's
 * connection, its log's file attached; without a queue the core takes no intake.
 * `SqliteIntakeQueueOptions.onEnqueued` is told after each commit that made payloads due (stored, or requeued).
 */
export { openSqliteIntakeQueue, SqliteIntakeQueue, type SqliteIntakeQueueOptions } from './intake-queue.ts';
/**
 * `applyMigrations(db, component, migrations)` applies a component's pending `Migration`s in one
 * immediate transaction; `STORE_COMPONENT` / `STORE_MIGRATIONS` are the store's own.
 */
export { applyMigrations, STORE_COMPONENT, STORE_MIGRATIONS, type Migration } from './migrations.ts';
/** `readableByOthers(file)`: the database file and its sidecars that users other than the owner may read (a server warns of them). */
export { readableByOthers } from './file-modes.ts';
