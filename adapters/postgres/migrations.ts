/**
 * Schema migrations of Trailwire's PostgreSQL schema. As in the SQLite file, each component that keeps
 * tables there (the store here, the durable intake queue later) owns an ordered list of named migrations
 * and applies it with `applyPostgresMigrations`; what was applied is recorded per component in the
 * schema's `trailwire_migrations` table. Any number of Trailwire processes may start at once: the
 * check and the changes run in one transaction holding a transaction-level advisory lock keyed by the
 * schema name, so exactly one of them migrates and the others then find the work done.
 *
 * Migrations are written without a schema: they run with `search_path` set to the target schema for
 * their transaction only. Times are BIGINT epoch milliseconds, ids that lists are ordered by are
 * `COLLATE "C"` (byte order, the same as SQLite's), and each telemetry table has a UNIQUE (source,
 * timestamp) index, which both makes a retried payload harmless and serves the time pages.
 */
import type pg from 'pg';
import { TrailwireError } from '../../core/errors.ts';
import { quoteSchema, withTransaction } from './pool.ts';

export interface PostgresMigration {
  /** Unique within its component and never renamed once released, e.g. `0001_store_schema`. */
  name: string;
  /**
   * A SQL script, or a function for a change SQL alone cannot express. Runs inside the migration
   * transaction with `search_path` set to the target schema.
   */
  up: string | ((client: pg.PoolClient) => Promise<void>);
}

/**
 * Creates `schema` if needed and applies the migrations of `component` it has not seen yet, in order,
 * in one transaction. Answers the names it applied (empty when the schema was current). Throws
 * `TrailwireError('internal')` when the schema holds migrations this code does not know (a schema
 * written by a newer Trailwire, or a renamed migration), rather than guessing.
 */
export async function applyPostgresMigrations(
  pool: pg.Pool,
  schema: string,
  component: string,
  migrations: readonly PostgresMigration[],
): Promise<string[]> {
  assertWellFormed(component, migrations);
  const quoted = quoteSchema(schema);
  return withTransaction(pool, async (client) => {
    // One lock per schema, held to COMMIT: processes migrating other schemas do not wait for this one.
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`trailwire:migrations:${schema}`]);
    // Checked before creating: CREATE SCHEMA needs a privilege that a schema's mere user may lack.
    const existing = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    if (existing.rowCount === 0) await client.query(`CREATE SCHEMA ${quoted}`);
    await client.query(`SET LOCAL search_path TO ${quoted}`);
    await client.query(`CREATE TABLE IF NOT EXISTS trailwire_migrations (
      component  TEXT NOT NULL,
      position   INTEGER NOT NULL,
      name       TEXT NOT NULL,
      applied_at BIGINT NOT NULL,
      PRIMARY KEY (component, position)
    )`);
    const applied = (
      await client.query<{ name: string }>('SELECT name FROM trailwire_migrations WHERE component = $1 ORDER BY position', [component])
    ).rows.map((row) => row.name);
    applied.forEach((name, position) => {
      if (migrations[position]?.name !== name) {
        throw new TrailwireError(
          'internal',
          `schema "${schema}" has migration "${name}" of "${component}" at position ${position + 1}, which this version of Trailwire does not know`,
        );
      }
    });
    const pending = migrations.slice(applied.length);
    for (const [index, migration] of pending.entries()) {
      if (typeof migration.up === 'string') await client.query(migration.up);
      else await migration.up(client);
      await client.query('INSERT INTO trailwire_migrations (component, position, name, applied_at) VALUES ($1, $2, $3, $4)', [
        component,
        applied.length + index,
        migration.name,
        Date.now(),
      ]);
    }
    return pending.map((migration) => migration.name);
  });
}

function assertWellFormed(component: string, migrations: readonly PostgresMigration[]): void {
  if (component.length === 0) throw new TrailwireError('internal', 'migration component name is empty');
  const seen = new Set<string>();
  for (const migration of migrations) {
    if (migration.name.length === 0 || seen.has(migration.name)) {
      throw new TrailwireError('internal', `migrations of "${component}": name "${migration.name}" is empty or repeated`);
    }
    seen.add(migration.name);
  }
}

/** The component name under which the store's migrations are recorded. */
export const POSTGRES_STORE_COMPONENT = 'store';

/** The store's schema, oldest first. Append new migrations; never edit a released one. */
export const POSTGRES_STORE_MIGRATIONS: readonly PostgresMigration[] = [
  {
    name: '0001_store_schema',
    up: `
      CREATE TABLE partners (
        id          TEXT COLLATE "C" PRIMARY KEY,
        name        TEXT NOT NULL,
        product     TEXT NOT NULL,
        key_hash    TEXT NOT NULL UNIQUE,
        key_version INTEGER NOT NULL DEFAULT 1,
        created_at  BIGINT NOT NULL,
        rotated_at  BIGINT
      );

      CREATE TABLE customers (
        id          TEXT COLLATE "C" PRIMARY KEY,
        name        TEXT NOT NULL,
        key_hash    TEXT NOT NULL UNIQUE,
        key_version INTEGER NOT NULL DEFAULT 1,
        created_at  BIGINT NOT NULL,
        rotated_at  BIGINT
      );

      -- position keeps the insertion order, the tie-break of keys created in the same millisecond.
      CREATE TABLE signing_keys (
        kid             TEXT PRIMARY KEY,
        position        BIGINT GENERATED ALWAYS AS IDENTITY,
        alg             TEXT NOT NULL CHECK (alg IN ('RS256', 'ES256')),
        private_key_pem TEXT NOT NULL,
        created_at      BIGINT NOT NULL
      );

      CREATE TABLE secrets (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );

      -- An INTEGER identity: a fleet id is never reused and stays a positive int32 (the proto's fleet_id).
      CREATE TABLE fleets (
        id          INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY CHECK (id > 0),
        customer_id TEXT COLLATE "C" NOT NULL REFERENCES customers (id),
        name        TEXT NOT NULL,
        created_at  BIGINT NOT NULL
      );
      CREATE INDEX fleets_by_customer ON fleets (customer_id, id);

      CREATE TABLE trailers (
        id              TEXT COLLATE "C" PRIMARY KEY,
        fleet_id        INTEGER REFERENCES fleets (id),
        unit_id         TEXT,
        vin             TEXT NOT NULL UNIQUE,
        active          BOOLEAN NOT NULL DEFAULT TRUE,
        status_name     TEXT NOT NULL CHECK (status_name IN ('OK', 'Warning', 'Faulted')),
        status_date     BIGINT NOT NULL,
        faulted_devices INTEGER NOT NULL DEFAULT 0,
        warning_devices INTEGER NOT NULL DEFAULT 0,
        gps_timestamp   BIGINT,
        gps_lat         DOUBLE PRECISION,
        gps_long        DOUBLE PRECISION,
        gps_speed       DOUBLE PRECISION,
        gps_heading     TEXT,
        created_at      BIGINT NOT NULL
      );
      CREATE INDEX trailers_by_fleet ON trailers (fleet_id, id);
      -- activeOnly pages read only active rows, however many inactive ones a fleet has.
      CREATE INDEX trailers_active_by_fleet ON trailers (fleet_id, id) WHERE active;

      CREATE TABLE gps_fixes (
        seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        trailer_id TEXT COLLATE "C" NOT NULL REFERENCES trailers (id),
        timestamp  BIGINT NOT NULL,
        lat        DOUBLE PRECISION NOT NULL,
        long       DOUBLE PRECISION NOT NULL,
        speed      DOUBLE PRECISION NOT NULL,
        heading    TEXT NOT NULL,
        UNIQUE (trailer_id, timestamp)
      );

      CREATE TABLE devices (
        id           TEXT COLLATE "C" PRIMARY KEY,
        trailer_id   TEXT COLLATE "C" NOT NULL REFERENCES trailers (id),
        kind         TEXT NOT NULL,
        serial       TEXT NOT NULL,
        position     TEXT,
        active       BOOLEAN NOT NULL DEFAULT TRUE,
        is_warning   BOOLEAN NOT NULL DEFAULT FALSE,
        is_fault     BOOLEAN NOT NULL DEFAULT FALSE,
        last_seen_at BIGINT,
        created_at   BIGINT NOT NULL,
        UNIQUE (trailer_id, kind, serial)
      );
      CREATE INDEX devices_by_trailer ON devices (trailer_id, id);
      CREATE INDEX devices_active_by_trailer ON devices (trailer_id, id) WHERE active;

      CREATE TABLE device_readings (
        seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        device_id  TEXT COLLATE "C" NOT NULL REFERENCES devices (id),
        timestamp  BIGINT NOT NULL,
        -- json, not jsonb: the metrics come back with their keys in the order the product wrote them.
        metrics    JSON NOT NULL,
        is_warning BOOLEAN NOT NULL,
        is_fault   BOOLEAN NOT NULL,
        UNIQUE (device_id, timestamp)
      );

      -- customer_id copies the owner of the trailer's fleet so that a customer's cargosafe list is an
      -- index range; reads still join through fleets, so a stale copy could hide a unit, never leak one.
      -- The store's assignTrailer keeps it current.
      CREATE TABLE cargosafe_units (
        id               TEXT COLLATE "C" PRIMARY KEY,
        trailer_id       TEXT COLLATE "C" NOT NULL REFERENCES trailers (id),
        serial           TEXT NOT NULL,
        customer_id      TEXT COLLATE "C" REFERENCES customers (id),
        active           BOOLEAN NOT NULL DEFAULT TRUE,
        last_seen_at     BIGINT,
        door_open        BOOLEAN,
        load_percent     DOUBLE PRECISION,
        temperature_c    DOUBLE PRECISION,
        humidity_percent DOUBLE PRECISION,
        created_at       BIGINT NOT NULL,
        UNIQUE (trailer_id, serial)
      );
      CREATE INDEX cargosafe_units_by_customer ON cargosafe_units (customer_id, id);

      CREATE TABLE cargosafe_readings (
        seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        unit_id          TEXT COLLATE "C" NOT NULL REFERENCES cargosafe_units (id),
        timestamp        BIGINT NOT NULL,
        door_open        BOOLEAN NOT NULL,
        load_percent     DOUBLE PRECISION NOT NULL,
        temperature_c    DOUBLE PRECISION NOT NULL,
        humidity_percent DOUBLE PRECISION NOT NULL,
        UNIQUE (unit_id, timestamp)
      );
    `,
  },
];
