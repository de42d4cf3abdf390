/**
 * Schema migrations of Trailwire's PostgreSQL schema. As in the SQLite file, each component that keeps
 * tables there (the store, and the durable intake log: `POSTGRES_QUEUE_MIGRATIONS`) owns an ordered list of named migrations
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
import { quoteSchema, withoutQueryTimeout, withTransaction } from './pool.ts';
import { POSTGRES_WEBHOOK_TABLES_MIGRATION } from './webhook-tables.ts';

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
  // A migration may rewrite a large table, and may wait for another process's: no read timeout.
  return withTransaction(pool, (client) => withoutQueryTimeout(client, async () => {
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
  }));
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
  {
    // Issue 29: see the SQLite store's migration of the same name.
    name: '0004_partner_policies',
    up: `
      CREATE TABLE partner_grants (
        customer_id TEXT COLLATE "C" NOT NULL REFERENCES customers (id),
        partner_id  TEXT COLLATE "C" NOT NULL REFERENCES partners (id),
        created_at  BIGINT NOT NULL,
        PRIMARY KEY (customer_id, partner_id)
      );
      CREATE INDEX partner_grants_by_partner ON partner_grants (partner_id, customer_id);

      CREATE TABLE partner_intake_limits (
        partner_id            TEXT COLLATE "C" PRIMARY KEY REFERENCES partners (id),
        intake_requests       INTEGER CHECK (intake_requests >= 1),
        intake_window_seconds INTEGER CHECK (intake_window_seconds >= 1),
        new_vins_per_day      INTEGER CHECK (new_vins_per_day >= 0),
        updated_at            BIGINT NOT NULL,
        CHECK ((intake_requests IS NULL) = (intake_window_seconds IS NULL))
      );
    `,
  },
  // Issue 40: webhook endpoints, their outbox and deliveries (adapters/postgres/webhook-tables.ts).
  POSTGRES_WEBHOOK_TABLES_MIGRATION,
  {
    // Issue 41: every payload rewrites its trailer's row (latest fix, status). An update that finds
    // room on the row's page is a HOT update: no new entry in the table's four indexes, and the old
    // version is pruned on the page. Filled to 100 %, the pages of 20,000 registered trailers had
    // no room, and 45 % of the updates went elsewhere with their index entries: 2.85 WAL records a
    // payload, 1.43 with this (the scale-out bench's registered fleet). Pages written from now on
    // keep 30 % free; older ones get room as their rows move.
    name: '0006_trailers_room_for_updates',
    up: `ALTER TABLE trailers SET (fillfactor = 70);`,
  },
];

/** The component name under which the durable intake queue's migrations are recorded. */
export const POSTGRES_QUEUE_COMPONENT = 'intake-queue';

/**
 * The durable intake queue's schema (`adapters/postgres/intake-queue.ts`), oldest first. Append new
 * migrations; never edit a released one. 0001 and 0002 built the claim-based queue that 0003 turns
 * into the log, carrying its payloads over.
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
  {
    // The queue becomes a log (issue 13); how it is read and why it is correct is explained at the
    // top of adapters/postgres/intake-queue.ts. An append writes one row with one index besides
    // its (partition, seq) key: the id the status endpoint looks up. Statuses are derived from each
    // partition's watermark; only retries (and the payloads held behind them), dead letters and
    // payloads processed after a retry get a row in intake_parked.
    //
    // Everything the old table held is carried over: queued and processing payloads wait as retries
    // (due when they were, an interrupted attempt uncounted), so they go first and each VIN's in
    // order; processed payloads and dead letters keep their status; idempotency keys keep answering.
    name: '0003_intake_log',
    up: `
      -- A VIN's partition: a hash that is the same in every PostgreSQL version (md5), into 16.
      CREATE FUNCTION intake_partition(p_vin TEXT) RETURNS SMALLINT
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT (get_byte(decode(md5(p_vin), 'hex'), 0) % 16)::smallint $$;

      CREATE SEQUENCE intake_log_seq AS BIGINT;
      CREATE TABLE intake_log (
        part            SMALLINT NOT NULL,
        seq             BIGINT NOT NULL,
        id              TEXT NOT NULL,
        partner_id      TEXT NOT NULL,
        product         TEXT NOT NULL,
        vin             TEXT NOT NULL,
        payload         TEXT NOT NULL,
        received_at     BIGINT NOT NULL,
        idempotency_key TEXT,
        PRIMARY KEY (part, seq)
      );
      CREATE UNIQUE INDEX intake_log_by_id ON intake_log (id);

      -- Only appends that carry a key write here.
      CREATE TABLE intake_idempotency (
        partner_id      TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        id              TEXT NOT NULL,
        received_at     BIGINT NOT NULL,
        PRIMARY KEY (partner_id, idempotency_key)
      );
      CREATE INDEX intake_idempotency_by_age ON intake_idempotency (received_at);

      -- Every payload of a partition at or below its watermark has been through a committed batch.
      CREATE TABLE intake_partitions (
        part      SMALLINT PRIMARY KEY,
        watermark BIGINT NOT NULL
      );
      -- One row per partition per committed batch that moved its watermark: the processed time of
      -- the payloads up to last_seq (after the previous row's).
      CREATE TABLE intake_batches (
        part         SMALLINT NOT NULL,
        last_seq     BIGINT NOT NULL,
        processed_at BIGINT NOT NULL,
        PRIMARY KEY (part, last_seq)
      );
      CREATE TABLE intake_parked (
        seq             BIGINT PRIMARY KEY,
        part            SMALLINT NOT NULL,
        vin             TEXT NOT NULL,
        state           TEXT NOT NULL CHECK (state IN ('retry', 'failed', 'done')),
        attempts        INTEGER NOT NULL,
        next_attempt_at BIGINT NOT NULL,
        error           TEXT,
        processed_at    BIGINT
      );
      CREATE INDEX intake_parked_retry ON intake_parked (part, vin, seq) INCLUDE (next_attempt_at) WHERE state = 'retry';
      CREATE INDEX intake_parked_failed ON intake_parked (seq) WHERE state = 'failed';

      INSERT INTO intake_log (part, seq, id, partner_id, product, vin, payload, received_at, idempotency_key)
        SELECT intake_partition(vin), seq, id, partner_id, product, vin, payload, received_at, idempotency_key FROM intake_queue;
      SELECT setval('intake_log_seq', coalesce(max(seq), 1), max(seq) IS NOT NULL) FROM intake_queue;
      INSERT INTO intake_idempotency (partner_id, idempotency_key, id, received_at)
        SELECT partner_id, idempotency_key, id, received_at FROM intake_queue WHERE idempotency_key IS NOT NULL;
      INSERT INTO intake_parked (seq, part, vin, state, attempts, next_attempt_at, error, processed_at)
        SELECT seq, intake_partition(vin), vin,
               CASE status WHEN 'processed' THEN 'done' WHEN 'failed' THEN 'failed' ELSE 'retry' END,
               CASE status WHEN 'processing' THEN attempts - 1 ELSE attempts END,
               next_attempt_at, error, processed_at
        FROM intake_queue;
      INSERT INTO intake_partitions (part, watermark)
        SELECT g.part, coalesce(max(q.seq), 0)
        FROM generate_series(0, 15) AS g (part) LEFT JOIN intake_queue q ON intake_partition(q.vin) = g.part
        GROUP BY g.part;
      INSERT INTO intake_batches (part, last_seq, processed_at) SELECT part, watermark, 0 FROM intake_partitions WHERE watermark > 0;
      DROP FUNCTION intake_claim(TEXT, BIGINT, INTEGER);
      DROP TABLE intake_queue;

      -- The append of a group: the idempotency keys first (a key another payload used within the
      -- window stays with it, and that payload is not stored), then the log rows, in the group's
      -- order, and one notice for the group. search_path is fixed to this schema (the migration's).
      CREATE FUNCTION intake_append(p_ids TEXT[], p_partners TEXT[], p_products TEXT[], p_vins TEXT[], p_payloads TEXT[],
          p_received BIGINT[], p_keys TEXT[], p_window BIGINT, p_channel TEXT)
        RETURNS TABLE (id TEXT, seq BIGINT)
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
      AS $append$
      #variable_conflict use_column
      DECLARE
        claimed TEXT[];
      BEGIN
        -- Shared by every append; a batch takes it exclusively for a moment to learn its horizon
        -- (see intake_next_batch). Taken before nextval, so that no seq is handed out without it.
        PERFORM pg_advisory_xact_lock_shared(hashtextextended('trailwire:intake-append:' || current_schema(), 0));
        WITH keyed AS (
          INSERT INTO intake_idempotency AS k (partner_id, idempotency_key, id, received_at)
          SELECT i.partner_id, i.idempotency_key, i.id, i.received_at
          FROM unnest(p_ids, p_partners, p_keys, p_received) AS i (id, partner_id, idempotency_key, received_at)
          WHERE i.idempotency_key IS NOT NULL
          ON CONFLICT (partner_id, idempotency_key) DO UPDATE SET id = excluded.id, received_at = excluded.received_at
            WHERE k.received_at <= excluded.received_at - p_window
          RETURNING k.id)
        SELECT coalesce(array_agg(keyed.id), '{}') INTO claimed FROM keyed;
        RETURN QUERY
          WITH stored AS (
            INSERT INTO intake_log (part, seq, id, partner_id, product, vin, payload, received_at, idempotency_key)
            SELECT intake_partition(i.vin), nextval('intake_log_seq'), i.id, i.partner_id, i.product, i.vin, i.payload, i.received_at, i.idempotency_key
            FROM unnest(p_ids, p_partners, p_products, p_vins, p_payloads, p_received, p_keys) WITH ORDINALITY
              AS i (id, partner_id, product, vin, payload, received_at, idempotency_key, position)
            WHERE i.idempotency_key IS NULL OR i.id = ANY(claimed)
            ORDER BY i.position
            RETURNING intake_log.id, intake_log.seq)
          SELECT s.id, s.seq FROM stored s;
        IF FOUND THEN PERFORM pg_notify(p_channel, current_schema()); END IF;
      END
      $append$;

      -- Opens a batch, in one round trip; why it is correct is explained at BATCHES in
      -- adapters/postgres/intake-queue.ts. The partitions it answers rows of stay leased (session
      -- advisory locks of this connection) until the batch ends; the others are let go here.
      CREATE FUNCTION intake_next_batch(p_now BIGINT, p_limit INTEGER, p_max_parts INTEGER)
        RETURNS TABLE (kind TEXT, part SMALLINT, seq BIGINT, id TEXT, partner_id TEXT, product TEXT, vin TEXT, payload TEXT,
                       received_at BIGINT, idempotency_key TEXT, attempts INTEGER)
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
      AS $batch$
      #variable_conflict use_column
      DECLARE
        append_lock CONSTANT BIGINT := hashtextextended('trailwire:intake-append:' || current_schema(), 0);
        part_lock CONSTANT TEXT := 'trailwire:intake-part:' || current_schema() || ':';
        horizon BIGINT;
        candidate RECORD;
        leased SMALLINT[] := '{}';
        picked_kinds TEXT[];
        picked_parts SMALLINT[];
        picked_seqs BIGINT[];
        picked_attempts INTEGER[];
      BEGIN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
          RAISE EXCEPTION 'intake_next_batch needs READ COMMITTED (a fresh snapshot per statement), not %',
            current_setting('transaction_isolation');
        END IF;
        -- 1. The horizon: once no append is in flight, every seq up to the sequence's last value
        --    belongs to an append that has committed (or rolled back). Held for an instant only.
        PERFORM pg_advisory_lock(append_lock);
        SELECT s.last_value INTO horizon FROM intake_log_seq s;
        PERFORM pg_advisory_unlock(append_lock);

        -- 2. Lease the partitions with work, oldest work first, skipping those another batch holds.
        FOR candidate IN
          SELECT w.part, f.first_seq FROM intake_partitions w
          CROSS JOIN LATERAL (SELECT least(
              (SELECT l.seq FROM intake_log l WHERE l.part = w.part AND l.seq > w.watermark AND l.seq <= horizon ORDER BY l.seq LIMIT 1),
              (SELECT min(k.seq) FROM intake_parked k WHERE k.part = w.part AND k.state = 'retry' AND k.next_attempt_at <= p_now)) AS first_seq) f
          WHERE f.first_seq IS NOT NULL
          ORDER BY f.first_seq
        LOOP
          EXIT WHEN cardinality(leased) >= p_max_parts;
          IF pg_try_advisory_lock(hashtextextended(part_lock || candidate.part, 0)) THEN
            leased := leased || candidate.part;
          END IF;
        END LOOP;
        IF cardinality(leased) = 0 THEN RETURN; END IF;

        -- 3. A new statement, so a new snapshot: it sees the last batch committed in each leased
        --    partition (a batch lets go of its lease only after its commit). Due retries first
        --    (a parked payload waits while an earlier one of its VIN is not due), then what follows
        --    each watermark, up to the horizon; the oldest p_limit of them.
        WITH due AS (
          SELECT 'parked'::text AS kind, k.part, k.seq, k.attempts, 0 AS rank FROM intake_parked k
          WHERE k.part = ANY(leased) AND k.state = 'retry' AND k.next_attempt_at <= p_now
            AND NOT EXISTS (SELECT 1 FROM intake_parked e
                            WHERE e.part = k.part AND e.vin = k.vin AND e.state = 'retry' AND e.seq < k.seq AND e.next_attempt_at > p_now)
        ), fresh AS (
          SELECT 'log'::text AS kind, l.part, l.seq, 0 AS attempts, 1 AS rank
          FROM intake_partitions w CROSS JOIN LATERAL (
            SELECT l.part, l.seq FROM intake_log l
            WHERE l.part = w.part AND l.seq > w.watermark AND l.seq <= horizon ORDER BY l.seq LIMIT p_limit) l
          WHERE w.part = ANY(leased)
        ), picked AS (
          SELECT * FROM (SELECT * FROM due UNION ALL SELECT * FROM fresh) c ORDER BY c.rank, c.seq LIMIT p_limit
        )
        SELECT array_agg(p.kind ORDER BY p.seq), array_agg(p.part ORDER BY p.seq), array_agg(p.seq ORDER BY p.seq), array_agg(p.attempts ORDER BY p.seq)
          INTO picked_kinds, picked_parts, picked_seqs, picked_attempts FROM picked p;

        -- 4. Let go of the leased partitions that gave nothing.
        PERFORM pg_advisory_unlock(hashtextextended(part_lock || l.part, 0))
          FROM unnest(leased) AS l (part) WHERE NOT l.part = ANY(coalesce(picked_parts, '{}'));

        -- 5. The rows, in log order. A log payload whose VIN has a parked retry that is not in this
        --    batch is held back (parked behind it at the commit).
        RETURN QUERY
          SELECT CASE WHEN c.kind = 'log' AND EXISTS (
                   SELECT 1 FROM intake_parked k
                   WHERE k.part = c.part AND k.vin = l.vin AND k.state = 'retry' AND NOT k.seq = ANY(picked_seqs)) THEN 'held' ELSE c.kind END,
                 c.part, c.seq, l.id, l.partner_id, l.product, l.vin, l.payload, l.received_at, l.idempotency_key, c.attempts
          FROM unnest(picked_kinds, picked_parts, picked_seqs, picked_attempts) WITH ORDINALITY AS c (kind, part, seq, attempts, position)
          JOIN intake_log l ON l.part = c.part AND l.seq = c.seq
          ORDER BY c.position;
      END
      $batch$;
    `,
  },
  {
    // The batch policy moves to the core (issue 38, core/intake-batch-plan.ts), as on SQLite and
    // the partitioned queue: SQL keeps the storage primitives only. The batch's function leases
    // partitions (advisory locks: see BATCHES in adapters/postgres/intake-queue.ts) and reads what
    // the plan picks from — due retries, what follows the watermarks up to the horizon, and for
    // each payload past a watermark the retries its VIN still has waiting — and no longer decides
    // which payloads are held back. Replaced under a new name: a process of the earlier version
    // (which the migration list refuses to start on this schema) finds no function it misreads.
    name: '0004_intake_batch_reads_candidates',
    up: `
      DROP FUNCTION intake_next_batch(BIGINT, INTEGER, INTEGER);

      -- One round trip a batch. The partitions it answers rows of stay leased (session advisory
      -- locks of this connection) until the batch ends; the others are let go here.
      CREATE FUNCTION intake_batch_candidates(p_now BIGINT, p_limit INTEGER, p_max_parts INTEGER)
        RETURNS TABLE (kind TEXT, part SMALLINT, seq BIGINT, id TEXT, partner_id TEXT, product TEXT, vin TEXT, payload TEXT,
                       received_at BIGINT, idempotency_key TEXT, attempts INTEGER, waiting INTEGER)
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
      AS $candidates$
      #variable_conflict use_column
      DECLARE
        append_lock CONSTANT BIGINT := hashtextextended('trailwire:intake-append:' || current_schema(), 0);
        part_lock CONSTANT TEXT := 'trailwire:intake-part:' || current_schema() || ':';
        horizon BIGINT;
        candidate RECORD;
        leased SMALLINT[] := '{}';
        read_kinds TEXT[];
        read_parts SMALLINT[];
        read_seqs BIGINT[];
        read_attempts INTEGER[];
      BEGIN
        IF current_setting('transaction_isolation') <> 'read committed' THEN
          RAISE EXCEPTION 'intake_batch_candidates needs READ COMMITTED (a fresh snapshot per statement), not %',
            current_setting('transaction_isolation');
        END IF;
        -- 1. The horizon: once no append is in flight, every seq up to the sequence's last value
        --    belongs to an append that has committed (or rolled back). Held for an instant only.
        PERFORM pg_advisory_lock(append_lock);
        SELECT s.last_value INTO horizon FROM intake_log_seq s;
        PERFORM pg_advisory_unlock(append_lock);

        -- 2. Lease the partitions with work, oldest work first, skipping those another batch holds.
        FOR candidate IN
          SELECT w.part, f.first_seq FROM intake_partitions w
          CROSS JOIN LATERAL (SELECT least(
              (SELECT l.seq FROM intake_log l WHERE l.part = w.part AND l.seq > w.watermark AND l.seq <= horizon ORDER BY l.seq LIMIT 1),
              (SELECT min(k.seq) FROM intake_parked k WHERE k.part = w.part AND k.state = 'retry' AND k.next_attempt_at <= p_now)) AS first_seq) f
          WHERE f.first_seq IS NOT NULL
          ORDER BY f.first_seq
        LOOP
          EXIT WHEN cardinality(leased) >= p_max_parts;
          IF pg_try_advisory_lock(hashtextextended(part_lock || candidate.part, 0)) THEN
            leased := leased || candidate.part;
          END IF;
        END LOOP;
        IF cardinality(leased) = 0 THEN RETURN; END IF;

        -- 3. A new statement, so a new snapshot: it sees the last batch committed in each leased
        --    partition (a batch lets go of its lease only after its commit). The due retries (a
        --    parked payload is not due while an earlier one of its VIN is not), then what follows
        --    each watermark up to the horizon: no more than a batch of p_limit can take, due first.
        WITH due AS (
          SELECT 'parked'::text AS kind, k.part, k.seq, k.attempts, 0 AS rank FROM intake_parked k
          WHERE k.part = ANY(leased) AND k.state = 'retry' AND k.next_attempt_at <= p_now
            AND NOT EXISTS (SELECT 1 FROM intake_parked e
                            WHERE e.part = k.part AND e.vin = k.vin AND e.state = 'retry' AND e.seq < k.seq AND e.next_attempt_at > p_now)
        ), fresh AS (
          SELECT 'log'::text AS kind, l.part, l.seq, 0 AS attempts, 1 AS rank
          FROM intake_partitions w CROSS JOIN LATERAL (
            SELECT l.part, l.seq FROM intake_log l
            WHERE l.part = w.part AND l.seq > w.watermark AND l.seq <= horizon ORDER BY l.seq LIMIT p_limit) l
          WHERE w.part = ANY(leased)
        ), read AS (
          SELECT * FROM (SELECT * FROM due UNION ALL SELECT * FROM fresh) c ORDER BY c.rank, c.seq LIMIT p_limit
        )
        SELECT array_agg(r.kind ORDER BY r.seq), array_agg(r.part ORDER BY r.seq), array_agg(r.seq ORDER BY r.seq), array_agg(r.attempts ORDER BY r.seq)
          INTO read_kinds, read_parts, read_seqs, read_attempts FROM read r;

        -- 4. Let go of the leased partitions that gave nothing.
        PERFORM pg_advisory_unlock(hashtextextended(part_lock || l.part, 0))
          FROM unnest(leased) AS l (part) WHERE NOT l.part = ANY(coalesce(read_parts, '{}'));

        -- 5. The rows, in log order; each payload past a watermark with the retries its VIN has
        --    waiting (due or not), which the plan holds it behind unless the batch takes them.
        RETURN QUERY
          SELECT c.kind, c.part, c.seq, l.id, l.partner_id, l.product, l.vin, l.payload, l.received_at, l.idempotency_key, c.attempts,
                 CASE WHEN c.kind = 'log' THEN (SELECT count(*)::int FROM intake_parked k
                                                WHERE k.part = c.part AND k.vin = l.vin AND k.state = 'retry') END
          FROM unnest(read_kinds, read_parts, read_seqs, read_attempts) WITH ORDINALITY AS c (kind, part, seq, attempts, position)
          JOIN intake_log l ON l.part = c.part AND l.seq = c.seq
          ORDER BY c.position;
      END
      $candidates$;
    `,
  },
];
