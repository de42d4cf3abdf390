/**
 * Schema migrations of the embedded SQLite database. Each component that keeps tables in the file
 * (the store here, the durable intake queue later) owns an ordered list of named migrations and
 * applies it with `applyMigrations`; what was applied is recorded per component in the
 * `trailwire_migrations` table, so the components evolve independently in one file. Several processes
 * (a `serve` and a CLI command) may open the same file at once: the check and the changes happen in one
 * `BEGIN IMMEDIATE` transaction, so exactly one of them applies a migration and the others see it done.
 *
 * Times are INTEGER epoch milliseconds. Every id-ordered list has an index that starts with its
 * filter and ends with the id, and every telemetry table a UNIQUE (source, timestamp) index whose
 * implicit trailing column is the rowid `seq`: the (source, timestamp, seq) keyset index of time pages.
 */
import type Database from 'better-sqlite3';
import { TrailwireError } from '../../core/errors.ts';
import { WEBHOOK_TABLES_MIGRATION } from './webhook-tables.ts';

export interface Migration {
  /** Unique within its component and never renamed once released, e.g. `0001_store_schema`. */
  name: string;
  /** A SQL script, or a function for a change SQL alone cannot express. Runs inside the transaction, foreign keys not enforced (see `applyMigrations`). */
  up: string | ((db: Database.Database) => void);
}

/**
 * Applies the migrations of `component` that the database has not seen yet, in order, in one
 * immediate transaction. Answers the names it applied (empty when the schema was current). Throws
 * `TrailwireError('internal')` when the database holds migrations this code does not know (a file
 * written by a newer Trailwire, or a renamed migration), rather than guessing.
 */
export function applyMigrations(db: Database.Database, component: string, migrations: readonly Migration[]): string[] {
  assertWellFormed(component, migrations);
  // A migration that rebuilds a table others refer to (SQLite's way of changing a column) drops the
  // old one first, which foreign-key enforcement would refuse: migrations run with it off, as SQLite's
  // documented procedure does, and end with a check that every reference still resolves. The pragma
  // takes effect only outside a transaction, so it is switched here, around it.
  const enforced = db.pragma('foreign_keys', { simple: true }) === 1;
  if (enforced) db.pragma('foreign_keys = OFF');
  try {
    return migrateWithoutForeignKeys(db, component, migrations);
  } finally {
    if (enforced) db.pragma('foreign_keys = ON');
  }
}

function migrateWithoutForeignKeys(db: Database.Database, component: string, migrations: readonly Migration[]): string[] {
  const migrate = db.transaction((): string[] => {
    db.exec(`CREATE TABLE IF NOT EXISTS trailwire_migrations (
      component  TEXT NOT NULL,
      position   INTEGER NOT NULL,
      name       TEXT NOT NULL,
      applied_at INTEGER NOT NULL,
      PRIMARY KEY (component, position)
    ) STRICT`);
    // Read inside the write lock: another process may have migrated while we waited for it.
    const applied = db
      .prepare<[string], { name: string }>('SELECT name FROM trailwire_migrations WHERE component = ? ORDER BY position')
      .all(component)
      .map((row) => row.name);
    applied.forEach((name, position) => {
      if (migrations[position]?.name !== name) {
        throw new TrailwireError(
          'internal',
          `database has migration "${name}" of "${component}" at position ${position + 1}, which this version of Trailwire does not know`,
        );
      }
    });
    const record = db.prepare<[string, number, string, number]>(
      'INSERT INTO trailwire_migrations (component, position, name, applied_at) VALUES (?, ?, ?, ?)',
    );
    const pending = migrations.slice(applied.length);
    pending.forEach((migration, index) => {
      if (typeof migration.up === 'string') db.exec(migration.up);
      else migration.up(db);
      record.run(component, applied.length + index, migration.name, Date.now());
    });
    if (pending.length > 0) {
      const broken = db.pragma('foreign_key_check') as { table: string; parent: string }[];
      if (broken.length > 0)
        throw new TrailwireError('internal', `migrations of "${component}" left ${broken.length} rows of ${broken[0]!.table} referring to no ${broken[0]!.parent}`);
    }
    return pending.map((migration) => migration.name);
  });
  return migrate.immediate();
}

function assertWellFormed(component: string, migrations: readonly Migration[]): void {
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
export const STORE_COMPONENT = 'store';

/** The store's schema, oldest first. Append new migrations; never edit a released one. */
export const STORE_MIGRATIONS: readonly Migration[] = [
  {
    name: '0001_store_schema',
    up: `
      CREATE TABLE partners (
        id          TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        product     TEXT NOT NULL,
        key_hash    TEXT NOT NULL UNIQUE,
        key_version INTEGER NOT NULL DEFAULT 1,
        created_at  INTEGER NOT NULL,
        rotated_at  INTEGER
      ) STRICT;

      CREATE TABLE customers (
        id          TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        key_hash    TEXT NOT NULL UNIQUE,
        key_version INTEGER NOT NULL DEFAULT 1,
        created_at  INTEGER NOT NULL,
        rotated_at  INTEGER
      ) STRICT;

      CREATE TABLE signing_keys (
        kid             TEXT PRIMARY KEY,
        alg             TEXT NOT NULL CHECK (alg IN ('RS256', 'ES256')),
        private_key_pem TEXT NOT NULL,
        created_at      INTEGER NOT NULL
      ) STRICT;

      CREATE TABLE secrets (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
      ) STRICT;

      -- AUTOINCREMENT: a fleet id is never reused, and stays a positive int32 (the proto's fleet_id).
      CREATE TABLE fleets (
        id          INTEGER PRIMARY KEY AUTOINCREMENT CHECK (id BETWEEN 1 AND 2147483647),
        customer_id TEXT NOT NULL REFERENCES customers (id),
        name        TEXT NOT NULL,
        created_at  INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX fleets_by_customer ON fleets (customer_id, id);

      CREATE TABLE trailers (
        id              TEXT PRIMARY KEY,
        fleet_id        INTEGER REFERENCES fleets (id),
        unit_id         TEXT,
        vin             TEXT NOT NULL UNIQUE,
        active          INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
        status_name     TEXT NOT NULL CHECK (status_name IN ('OK', 'Warning', 'Faulted')),
        status_date     INTEGER NOT NULL,
        faulted_devices INTEGER NOT NULL DEFAULT 0,
        warning_devices INTEGER NOT NULL DEFAULT 0,
        gps_timestamp   INTEGER,
        gps_lat         REAL,
        gps_long        REAL,
        gps_speed       REAL,
        gps_heading     TEXT,
        created_at      INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX trailers_by_fleet ON trailers (fleet_id, id);
      -- activeOnly pages read only active rows, however many inactive ones a fleet has.
      CREATE INDEX trailers_active_by_fleet ON trailers (fleet_id, id) WHERE active = 1;

      CREATE TABLE gps_fixes (
        seq        INTEGER PRIMARY KEY,
        trailer_id TEXT NOT NULL REFERENCES trailers (id),
        timestamp  INTEGER NOT NULL,
        lat        REAL NOT NULL,
        long       REAL NOT NULL,
        speed      REAL NOT NULL,
        heading    TEXT NOT NULL,
        UNIQUE (trailer_id, timestamp)
      ) STRICT;

      CREATE TABLE devices (
        id           TEXT PRIMARY KEY,
        trailer_id   TEXT NOT NULL REFERENCES trailers (id),
        kind         TEXT NOT NULL,
        serial       TEXT NOT NULL,
        position     TEXT,
        active       INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
        is_warning   INTEGER NOT NULL DEFAULT 0 CHECK (is_warning IN (0, 1)),
        is_fault     INTEGER NOT NULL DEFAULT 0 CHECK (is_fault IN (0, 1)),
        last_seen_at INTEGER,
        created_at   INTEGER NOT NULL,
        UNIQUE (trailer_id, kind, serial)
      ) STRICT;
      CREATE INDEX devices_by_trailer ON devices (trailer_id, id);
      CREATE INDEX devices_active_by_trailer ON devices (trailer_id, id) WHERE active = 1;

      CREATE TABLE device_readings (
        seq        INTEGER PRIMARY KEY,
        device_id  TEXT NOT NULL REFERENCES devices (id),
        timestamp  INTEGER NOT NULL,
        metrics    TEXT NOT NULL,
        is_warning INTEGER NOT NULL CHECK (is_warning IN (0, 1)),
        is_fault   INTEGER NOT NULL CHECK (is_fault IN (0, 1)),
        UNIQUE (device_id, timestamp)
      ) STRICT;

      -- customer_id copies the owner of the trailer's fleet so that a customer's cargosafe list is an
      -- index range; reads still join through fleets, so a stale copy could hide a unit, never leak one.
      CREATE TABLE cargosafe_units (
        id               TEXT PRIMARY KEY,
        trailer_id       TEXT NOT NULL REFERENCES trailers (id),
        serial           TEXT NOT NULL,
        customer_id      TEXT REFERENCES customers (id),
        active           INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
        last_seen_at     INTEGER,
        door_open        INTEGER CHECK (door_open IN (0, 1)),
        load_percent     REAL,
        temperature_c    REAL,
        humidity_percent REAL,
        created_at       INTEGER NOT NULL,
        UNIQUE (trailer_id, serial)
      ) STRICT;
      CREATE INDEX cargosafe_units_by_customer ON cargosafe_units (customer_id, id);

      CREATE TRIGGER cargosafe_units_follow_trailer_fleet AFTER UPDATE OF fleet_id ON trailers
      BEGIN
        UPDATE cargosafe_units
           SET customer_id = (SELECT customer_id FROM fleets WHERE id = NEW.fleet_id)
         WHERE trailer_id = NEW.id;
      END;

      CREATE TABLE cargosafe_readings (
        seq              INTEGER PRIMARY KEY,
        unit_id          TEXT NOT NULL REFERENCES cargosafe_units (id),
        timestamp        INTEGER NOT NULL,
        door_open        INTEGER NOT NULL CHECK (door_open IN (0, 1)),
        load_percent     REAL NOT NULL,
        temperature_c    REAL NOT NULL,
        humidity_percent REAL NOT NULL,
        UNIQUE (unit_id, timestamp)
      ) STRICT;
    `,
  },
  {
    // The operator-change feed (core/trailer-changes.ts): one row per change, read by every serving process.
    name: '0002_trailer_changes',
    up: `
      CREATE TABLE trailer_changes (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        trailer_id TEXT NOT NULL,
        at         INTEGER NOT NULL
      ) STRICT;
      -- Pruning by age, as each note is written, seeks rather than scans.
      CREATE INDEX trailer_changes_at ON trailer_changes (at);
    `,
  },
  {
    // The signing-key lifecycle (issue 17): a key kept in a file has no private key here, only its
    // public key; rotation retires keys and --revoke-previous revokes them. SQLite cannot drop a NOT
    // NULL, so the small table is rebuilt.
    name: '0003_signing_key_lifecycle',
    up: `
      CREATE TABLE signing_keys_next (
        kid             TEXT PRIMARY KEY,
        alg             TEXT NOT NULL CHECK (alg IN ('RS256', 'ES256')),
        private_key_pem TEXT,
        public_key_pem  TEXT,
        created_at      INTEGER NOT NULL,
        retired_at      INTEGER,
        revoked_at      INTEGER,
        CHECK (private_key_pem IS NOT NULL OR public_key_pem IS NOT NULL)
      ) STRICT;
      INSERT INTO signing_keys_next (rowid, kid, alg, private_key_pem, created_at)
        SELECT rowid, kid, alg, private_key_pem, created_at FROM signing_keys;
      DROP TABLE signing_keys;
      ALTER TABLE signing_keys_next RENAME TO signing_keys;
    `,
  },
  {
    // Issue 13: a GPS fix names its trailer by an integer key instead of the trailer's 36-character
    // id. The (trailer, timestamp) index that every fix is inserted into — at a random place, one
    // page per fix — holds three times as many entries a page and compares integers, and the latest
    // fix moves into the trailer's row by its rowid: processing a fix took half the CPU
    // (bench/intake-processing.ts). The key is the trailer's rowid made explicit (an INTEGER PRIMARY
    // KEY, which VACUUM keeps), so both tables are rebuilt; a fix keeps its seq, and with it the
    // time-page cursors handed out before.
    name: '0004_trailer_keys',
    up: `
      CREATE TABLE trailers_next (
        key             INTEGER PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        fleet_id        INTEGER REFERENCES fleets (id),
        unit_id         TEXT,
        vin             TEXT NOT NULL UNIQUE,
        active          INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
        status_name     TEXT NOT NULL CHECK (status_name IN ('OK', 'Warning', 'Faulted')),
        status_date     INTEGER NOT NULL,
        faulted_devices INTEGER NOT NULL DEFAULT 0,
        warning_devices INTEGER NOT NULL DEFAULT 0,
        gps_timestamp   INTEGER,
        gps_lat         REAL,
        gps_long        REAL,
        gps_speed       REAL,
        gps_heading     TEXT,
        created_at      INTEGER NOT NULL
      ) STRICT;
      INSERT INTO trailers_next (key, id, fleet_id, unit_id, vin, active, status_name, status_date, faulted_devices,
          warning_devices, gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading, created_at)
        SELECT rowid, id, fleet_id, unit_id, vin, active, status_name, status_date, faulted_devices,
          warning_devices, gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading, created_at
        FROM trailers ORDER BY rowid;

      CREATE TABLE gps_fixes_next (
        seq         INTEGER PRIMARY KEY,
        trailer_key INTEGER NOT NULL REFERENCES trailers (key),
        timestamp   INTEGER NOT NULL,
        lat         REAL NOT NULL,
        long        REAL NOT NULL,
        speed       REAL NOT NULL,
        heading     TEXT NOT NULL,
        UNIQUE (trailer_key, timestamp)
      ) STRICT;
      INSERT INTO gps_fixes_next (seq, trailer_key, timestamp, lat, long, speed, heading)
        SELECT g.seq, t.key, g.timestamp, g.lat, g.long, g.speed, g.heading
        FROM gps_fixes g JOIN trailers_next t ON t.id = g.trailer_id ORDER BY g.seq;

      -- Dropping a table drops its indexes and triggers too: they are made again below.
      DROP TABLE gps_fixes;
      DROP TABLE trailers;
      ALTER TABLE trailers_next RENAME TO trailers;
      ALTER TABLE gps_fixes_next RENAME TO gps_fixes;
      CREATE INDEX trailers_by_fleet ON trailers (fleet_id, id);
      -- activeOnly pages read only active rows, however many inactive ones a fleet has.
      CREATE INDEX trailers_active_by_fleet ON trailers (fleet_id, id) WHERE active = 1;
      -- Dropped with the old table: as 0001 made it.
      CREATE TRIGGER cargosafe_units_follow_trailer_fleet AFTER UPDATE OF fleet_id ON trailers
      BEGIN
        UPDATE cargosafe_units
           SET customer_id = (SELECT customer_id FROM fleets WHERE id = NEW.fleet_id)
         WHERE trailer_id = NEW.id;
      END;
    `,
  },
  {
    // Issue 29: a customer's grants of partners, and the operator's per-partner intake overrides
    // (core/partner-intake-rules.ts). Both are read by every serving process, briefly cached.
    name: '0005_partner_policies',
    up: `
      CREATE TABLE partner_grants (
        customer_id TEXT NOT NULL REFERENCES customers (id),
        partner_id  TEXT NOT NULL REFERENCES partners (id),
        created_at  INTEGER NOT NULL,
        PRIMARY KEY (customer_id, partner_id)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX partner_grants_by_partner ON partner_grants (partner_id, customer_id);

      CREATE TABLE partner_intake_limits (
        partner_id            TEXT PRIMARY KEY REFERENCES partners (id),
        intake_requests       INTEGER CHECK (intake_requests >= 1),
        intake_window_seconds INTEGER CHECK (intake_window_seconds >= 1),
        new_vins_per_day      INTEGER CHECK (new_vins_per_day >= 0),
        updated_at            INTEGER NOT NULL,
        CHECK ((intake_requests IS NULL) = (intake_window_seconds IS NULL))
      ) STRICT;
    `,
  },
  // Issue 40: webhook endpoints, their outbox and deliveries (adapters/sqlite/webhook-tables.ts).
  WEBHOOK_TABLES_MIGRATION,
];
