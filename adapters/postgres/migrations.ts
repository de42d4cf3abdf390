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
  {
    // The operator-change feed (core/trailer-changes.ts): one row per change, read by every serving process.
    name: '0002_trailer_changes',
    up: `
      CREATE TABLE trailer_changes (
        seq        BIGSERIAL PRIMARY KEY,
        trailer_id TEXT NOT NULL,
        at         BIGINT NOT NULL
      );
      -- Pruning by age, as each note is written, seeks rather than scans.
      CREATE INDEX trailer_changes_at ON trailer_changes (at);
    `,
  },
  {
    // The signing-key lifecycle (issue 17): see the SQLite store's migration of the same name.
    name: '0003_signing_key_lifecycle',
    up: `
      ALTER TABLE signing_keys ALTER COLUMN private_key_pem DROP NOT NULL;
      ALTER TABLE signing_keys ADD COLUMN public_key_pem TEXT;
      ALTER TABLE signing_keys ADD COLUMN retired_at BIGINT;
      ALTER TABLE signing_keys ADD COLUMN revoked_at BIGINT;
      ALTER TABLE signing_keys ADD CHECK (private_key_pem IS NOT NULL OR public_key_pem IS NOT NULL);
    `,
  },
];

/** The component name under which the durable intake queue's migrations are recorded. */
export const POSTGRES_QUEUE_COMPONENT = 'intake-queue';

/**
 * The durable intake queue's schema (`adapters/postgres/intake-queue.ts`), oldest first. Append new
 * migrations; never edit a released one (a change to `intake_claim` is a new `CREATE OR REPLACE`).
 */
export const POSTGRES_QUEUE_MIGRATIONS: readonly PostgresMigration[] = [
  {
    name: '0001_intake_queue',
    up: `
      -- seq is the arrival order; claimed_by names the queue session that holds a processing row.
      CREATE TABLE intake_queue (
        seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        partner_id      TEXT NOT NULL,
        product         TEXT NOT NULL,
        vin             TEXT NOT NULL,
        payload         TEXT NOT NULL,
        received_at     BIGINT NOT NULL,
        idempotency_key TEXT,
        status          TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'processed', 'failed')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at BIGINT NOT NULL,
        processed_at    BIGINT,
        error           TEXT,
        claimed_by      TEXT,
        CHECK ((status = 'processing') = (claimed_by IS NOT NULL))
      );
      -- One live use of a key per partner (the arbiter of the enqueue's ON CONFLICT); a use older
      -- than the window has its key cleared when the key is used again.
      CREATE UNIQUE INDEX intake_by_idempotency_key ON intake_queue (partner_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
      -- Claims walk the queued rows in arrival order and check each VIN's other unfinished rows;
      -- neither index holds processed rows, however many are kept.
      CREATE INDEX intake_ready ON intake_queue (seq) WHERE status = 'queued';
      CREATE INDEX intake_unfinished_by_vin ON intake_queue (vin, seq) INCLUDE (status, next_attempt_at)
        WHERE status IN ('queued', 'processing');
      CREATE INDEX intake_processing ON intake_queue (claimed_by) WHERE status = 'processing';
      CREATE INDEX intake_failed ON intake_queue (seq) WHERE status = 'failed';
      CREATE INDEX intake_processed ON intake_queue (processed_at) WHERE status = 'processed';

      -- The claim, in one round trip. Why it keeps each VIN in order across processes is explained
      -- at CLAIM in adapters/postgres/intake-queue.ts; in short: lock the candidate VINs first (a
      -- transaction advisory lock per VIN, held to COMMIT), then decide what to claim in a second
      -- statement, whose snapshot a VOLATILE function takes after those locks were granted.
      -- search_path is fixed to this schema (the migration's own), so the names below resolve here
      -- whatever the caller's search_path.
      CREATE FUNCTION intake_claim(p_owner TEXT, p_now BIGINT, p_limit INTEGER)
        RETURNS SETOF intake_queue
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
      AS $claim$
      DECLARE
        owner_lock BIGINT := hashtextextended('trailwire:intake-owner:' || p_owner, 0);
        candidate RECORD;
        locked TEXT[] := '{}';
        taken INTEGER := 0;
      BEGIN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
          RAISE EXCEPTION 'intake_claim needs READ COMMITTED (a fresh snapshot per statement), not %',
            current_setting('transaction_isolation');
        END IF;
        -- The owner's session holds this lock while it lives; if this connection can take it, the
        -- owner is gone and its claims could be recovered by anyone at once.
        IF pg_try_advisory_lock(owner_lock) THEN
          PERFORM pg_advisory_unlock(owner_lock);
          RAISE EXCEPTION 'intake queue session % is not live', p_owner USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;

        -- 1. Candidates in arrival order, as this statement's snapshot sees them; a VIN another
        --    claimer holds locked is skipped, like SKIP LOCKED. A VIN is locked once however many
        --    of its rows pass (the lock is re-entrant); locks on VINs that turn out empty are harmless.
        FOR candidate IN
          SELECT q.vin FROM intake_queue q
          WHERE q.status = 'queued' AND q.next_attempt_at <= p_now
            AND NOT EXISTS (SELECT 1 FROM intake_queue e
                            WHERE e.vin = q.vin AND e.status IN ('queued', 'processing')
                              AND (e.status = 'processing' OR (e.seq < q.seq AND e.next_attempt_at > p_now)))
          ORDER BY q.seq
        LOOP
          IF pg_try_advisory_xact_lock(hashtextextended('trailwire:intake-vin:' || current_schema() || ':' || candidate.vin, 0)) THEN
            IF NOT candidate.vin = ANY(locked) THEN locked := locked || candidate.vin; END IF;
            taken := taken + 1;
            EXIT WHEN taken >= p_limit;
          END IF;
        END LOOP;

        -- 2. A new statement, so a new snapshot: it sees every claim of these VINs committed before
        --    their locks were granted to us. A row is claimed when it is queued and due, no row of its
        --    VIN is processing (whatever its seq), and no earlier row of its VIN waits for a retry.
        RETURN QUERY
          UPDATE intake_queue u SET status = 'processing', attempts = u.attempts + 1, claimed_by = p_owner
          WHERE u.status = 'queued' AND u.seq IN (
            SELECT q.seq FROM intake_queue q
            WHERE q.vin = ANY(locked) AND q.status = 'queued' AND q.next_attempt_at <= p_now
              AND NOT EXISTS (SELECT 1 FROM intake_queue e
                              WHERE e.vin = q.vin AND e.status IN ('queued', 'processing')
                                AND (e.status = 'processing' OR (e.seq < q.seq AND e.next_attempt_at > p_now)))
            ORDER BY q.seq
            LIMIT p_limit)
          RETURNING u.*;
      END
      $claim$;
    `,
  },
  {
    // 0001's step 1 read every queued row (and probed its VIN's rows) and sorted them all before
    // taking the first: a claim cost O(queue depth), so a growing backlog slowed its own drain
    // (about 60 ms a claim at a depth of 8,000). The same walk, in seq-ordered slices that stop
    // once enough rows are locked; what is claimed, and why, is unchanged.
    name: '0002_intake_claim_walks_in_slices',
    up: `
      CREATE OR REPLACE FUNCTION intake_claim(p_owner TEXT, p_now BIGINT, p_limit INTEGER)
        RETURNS SETOF intake_queue
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
      AS $claim$
      DECLARE
        owner_lock BIGINT := hashtextextended('trailwire:intake-owner:' || p_owner, 0);
        candidate RECORD;
        locked TEXT[] := '{}';
        taken INTEGER := 0;
        -- Rows walked per slice: a LIMIT lets the planner walk intake_ready in seq order and stop early.
        slice CONSTANT INTEGER := greatest(4 * p_limit, 256);
        walked INTEGER;
        last_seq BIGINT := 0;
      BEGIN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
          RAISE EXCEPTION 'intake_claim needs READ COMMITTED (a fresh snapshot per statement), not %',
            current_setting('transaction_isolation');
        END IF;
        -- The owner's session holds this lock while it lives; if this connection can take it, the
        -- owner is gone and its claims could be recovered by anyone at once.
        IF pg_try_advisory_lock(owner_lock) THEN
          PERFORM pg_advisory_unlock(owner_lock);
          RAISE EXCEPTION 'intake queue session % is not live', p_owner USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;

        -- 1. Candidates in arrival order, a slice at a time (each slice a statement with its own
        --    snapshot: this step only picks VINs to lock, step 2 decides); a VIN another claimer
        --    holds locked is skipped, like SKIP LOCKED. A VIN is locked once however many of its
        --    rows pass (the lock is re-entrant); locks on VINs that turn out empty are harmless.
        <<walk>>
        LOOP
          walked := 0;
          FOR candidate IN
            SELECT q.seq, q.vin FROM intake_queue q
            WHERE q.status = 'queued' AND q.next_attempt_at <= p_now AND q.seq > last_seq
              AND NOT EXISTS (SELECT 1 FROM intake_queue e
                              WHERE e.vin = q.vin AND e.status IN ('queued', 'processing')
                                AND (e.status = 'processing' OR (e.seq < q.seq AND e.next_attempt_at > p_now)))
            ORDER BY q.seq
            LIMIT slice
          LOOP
            walked := walked + 1;
            last_seq := candidate.seq;
            IF pg_try_advisory_xact_lock(hashtextextended('trailwire:intake-vin:' || current_schema() || ':' || candidate.vin, 0)) THEN
              IF NOT candidate.vin = ANY(locked) THEN locked := locked || candidate.vin; END IF;
              taken := taken + 1;
              EXIT walk WHEN taken >= p_limit;
            END IF;
          END LOOP;
          EXIT walk WHEN walked < slice;
        END LOOP;

        -- 2. A new statement, so a new snapshot: it sees every claim of these VINs committed before
        --    their locks were granted to us. A row is claimed when it is queued and due, no row of its
        --    VIN is processing (whatever its seq), and no earlier row of its VIN waits for a retry.
        RETURN QUERY
          UPDATE intake_queue u SET status = 'processing', attempts = u.attempts + 1, claimed_by = p_owner
          WHERE u.status = 'queued' AND u.seq IN (
            SELECT q.seq FROM intake_queue q
            WHERE q.vin = ANY(locked) AND q.status = 'queued' AND q.next_attempt_at <= p_now
              AND NOT EXISTS (SELECT 1 FROM intake_queue e
                              WHERE e.vin = q.vin AND e.status IN ('queued', 'processing')
                                AND (e.status = 'processing' OR (e.seq < q.seq AND e.next_attempt_at > p_now)))
            ORDER BY q.seq
            LIMIT p_limit)
          RETURNING u.*;
      END
      $claim$;
    `,
  },
];
