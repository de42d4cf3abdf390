/**
 * The PostgreSQL backend of Trailwire (`trailwire/postgres`), for scale-out: many stateless Trailwire
 * processes sharing one fleet through one database (contract 11). It holds the store (`openPostgresStore`,
 * the same `TrailwireStore` as the embedded SQLite one, passing the same conformance suite), the durable
 * intake log those processes share (`openPostgresIntakeQueue(store, options?)` → `PostgresIntakeQueue`,
 * an `IntakeQueue` passing the queue conformance suite, its work shared by `INTAKE_PARTITIONS` VIN
 * partitions, with `resolvePostgresIntakeQueueOptions` and `DEFAULT_POSTGRES_INTAKE_QUEUE_OPTIONS`), the migration runner and each component's migrations
 * (`POSTGRES_STORE_*`, `POSTGRES_QUEUE_*`), and the pool plumbing they share: BIGINT parsed as numbers,
 * schema-qualified statements, transactions.
 */
export {
  DEFAULT_POSTGRES_STORE_OPTIONS,
  openPostgresStore,
  resolvePostgresStoreOptions,
  type PostgresStore,
  type PostgresStoreOptions,
} from './postgres-store.ts';
/**
 * `openPostgresIntake({ store, process?, log? })`: the intake behind one front door — the queue
 * (in the database, or a log engine's log beside this schema's index), readiness checks, `stop`, and
 * `onEnqueuedElsewhere` to wake the worker (`PostgresIntakeOptions`, `PostgresIntake`). What a server uses.
 */
export { openPostgresIntake, type PostgresIntake, type PostgresIntakeOptions } from './intake.ts';
export {
  DEFAULT_POSTGRES_INTAKE_QUEUE_OPTIONS,
  INTAKE_PARTITIONS,
  openPostgresIntakeQueue,
  PostgresIntakeQueue,
  resolvePostgresIntakeQueueOptions,
  type PostgresIntakeQueueOptions,
  type PostgresIntakeQueueSettings,
  type PostgresQueueHost,
} from './intake-queue.ts';
/**
 * `openPostgresIntakeLog(store)`: the schema's intake log as an `IntakeLog` (`core/intake-log.ts`):
 * 16 VIN partitions, leases as session advisory locks. The server's intake uses the queue, which
 * commits a batch's outcomes and watermarks at once.
 */
export { openPostgresIntakeLog } from './intake-log.ts';
/**
 * `openPostgresIntakeIndex(store)`: the index part (`IntakeIndex`: idempotency keys, positions, a row
 * per payload a batch has been through) that a log engine's queue (`PartitionedIntakeQueue` of
 * `trailwire/core`) keeps beside its log; its migrations are `POSTGRES_INDEX_*`.
 */
export { openPostgresIntakeIndex, POSTGRES_INDEX_COMPONENT, POSTGRES_INDEX_MIGRATIONS } from './intake-index.ts';
export {
  applyPostgresMigrations,
  POSTGRES_QUEUE_COMPONENT,
  POSTGRES_QUEUE_MIGRATIONS,
  POSTGRES_STORE_COMPONENT,
  POSTGRES_STORE_MIGRATIONS,
  type PostgresMigration,
} from './migrations.ts';
export { createPostgresPool, quoteSchema, withTransaction, writeOrExplain, type PostgresPoolOptions } from './pool.ts';
