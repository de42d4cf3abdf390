/**
 * The PostgreSQL store's telemetry write (`applyTelemetryBatch` of `TelemetryWriteStore`): the
 * canonical records of many payloads, of many VINs, in one transaction with a fixed number of
 * set-based statements whatever the batch's size — one `unnest` upsert per kind of record, one
 * `UPDATE … FROM unnest(…)` per kind of latest state, and one per batch for the trailers (their
 * latest fix and their status, recomputed once per trailer; a trailer the batch creates is inserted
 * with its latest fix). What applying the items one after another would leave is worked out in
 * memory first (`reduceLatest`), so each row is written once.
 *
 * Locking, and why batches never deadlock: the batch first inserts its unknown VINs' trailers in VIN
 * order (a racing insert of the same VIN waits for the other transaction, then does nothing), then
 * locks its other trailers in id order (`FOR NO KEY UPDATE`; the ones it inserted no other
 * transaction sees before it commits). Everything written after that belongs to
 * those trailers, so two batches only ever wait for each other in one order. Every other writer of a
 * trailer's devices or units (`setDeviceActive`, `assignTrailer`) locks the trailer first too.
 */
import type pg from 'pg';
import { type CanonicalCargosafeReading, type CanonicalDeviceReading, MAX_READING_LEAD_MS } from '../../core/canonical.ts';
import type { IdGenerator } from '../../core/clock.ts';
import { TrailwireError } from '../../core/errors.ts';
import type { GpsFix } from '../../core/model.ts';
import type { AppliedTelemetry, TelemetryBatch } from '../../core/store.ts';
import { countDeviceStates, deriveTrailerStatus, type TrailerStatus } from '../../core/trailer-status.ts';
import { queryRows, queryRun, quoteSchema, type Statement } from './pool.ts';
import { expandStateCounts, type StateCountRow, toFleet, toTrailer, type TrailerRow } from '../sql/rows.ts';

/** Writes `items` on `client`, inside the caller's transaction; answers each trailer's state after them, by VIN. */
export async function writeTelemetryBatch(
  client: pg.PoolClient,
  sql: TelemetryStatements,
  ids: IdGenerator,
  items: readonly TelemetryBatch[],
  knownVins: KnownVins,
): Promise<Map<string, AppliedTelemetry>> {
  // Each VIN's latest fix, worked out first: a trailer the batch creates is inserted with it.
  const latestFix = new Map<string, GpsFix>();
  for (const { vin, at, telemetry } of items) for (const fix of telemetry.gps) reduceLatest(latestFix, vin, fix, at);
  const trailers = await lockTrailers(client, sql, ids, items, knownVins, latestFix);
  const trailerOf = (vin: string) => trailers.get(vin)!;

  // --- GPS fixes: stored (last received wins at one instant).
  const fixes = new LastWins<{ trailerId: string; fix: GpsFix }>();
  for (const { vin, telemetry } of items) {
    const { row } = trailerOf(vin);
    for (const fix of telemetry.gps) fixes.set(`${row.id}\u0000${fix.timestamp}`, { trailerId: row.id, fix });
  }
  if (fixes.size > 0) {
    const rows = fixes.values();
    await queryRun(client, sql.upsertFixes, [
      rows.map((r) => r.trailerId),
      rows.map((r) => r.fix.timestamp),
      rows.map((r) => r.fix.lat),
      rows.map((r) => r.fix.long),
      rows.map((r) => r.fix.speed),
      rows.map((r) => r.fix.heading),
    ]);
  }

  // --- Devices: created on first sight, readings stored, each device's latest state moved.
  const deviceReadings = items.flatMap(({ vin, at, telemetry }) => telemetry.devices.map((reading) => ({ trailer: trailerOf(vin), at, reading })));
  if (deviceReadings.length > 0) {
    const deviceIds = await findOrCreate(
      client,
      sql.findOrCreateDevices,
      deviceReadings.map(({ trailer, at, reading }) => ({ key: deviceKey(trailer.row.id, reading), values: [trailer.row.id, ids(), reading.kind, reading.serial, reading.position, at] })),
      (row: { id: string; trailer_id: string; kind: string; serial: string }) => deviceKey(row.trailer_id, row),
    );
    const readings = new LastWins<{ deviceId: string; reading: CanonicalDeviceReading }>();
    const moves = new Map<string, DeviceMove>();
    for (const { trailer, at, reading } of deviceReadings) {
      const deviceId = deviceIds.get(deviceKey(trailer.row.id, reading))!;
      readings.set(`${deviceId}\u0000${reading.timestamp}`, { deviceId, reading });
      reduceDeviceMove(moves, deviceId, reading, at);
      trailer.recount = true;
    }
    const rows = readings.values();
    await queryRun(client, sql.upsertDeviceReadings, [
      rows.map((r) => r.deviceId),
      rows.map((r) => r.reading.timestamp),
      rows.map((r) => JSON.stringify(r.reading.metrics)),
      rows.map((r) => r.reading.state.isWarning),
      rows.map((r) => r.reading.state.isFault),
    ]);
    if (moves.size > 0) {
      const moved = [...moves.entries()];
      await queryRun(client, sql.moveDeviceStates, [
        moved.map(([id]) => id),
        moved.map(([, move]) => move.newest.timestamp),
        moved.map(([, move]) => move.newest.state.isWarning),
        moved.map(([, move]) => move.newest.state.isFault),
        moved.map(([, move]) => move.positioned?.timestamp ?? null),
        moved.map(([, move]) => move.positioned?.position ?? null),
      ]);
    }
  }

  // --- Cargosafe units: created on first sight (in the customer of the trailer's fleet), readings stored, latest moved.
  const unitReadings = items.flatMap(({ vin, at, telemetry }) => telemetry.cargosafe.map((reading) => ({ trailer: trailerOf(vin), at, reading })));
  if (unitReadings.length > 0) {
    const unitIds = await findOrCreate(
      client,
      sql.findOrCreateUnits,
      unitReadings.map(({ trailer, at, reading }) => ({ key: unitKey(trailer.row.id, reading.serial), values: [trailer.row.id, ids(), reading.serial, trailer.row.fleet_id, at] })),
      (row: { id: string; trailer_id: string; serial: string }) => unitKey(row.trailer_id, row.serial),
    );
    const readings = new LastWins<{ unitId: string; reading: CanonicalCargosafeReading }>();
    const latest = new Map<string, CanonicalCargosafeReading>();
    for (const { trailer, at, reading } of unitReadings) {
      const unitId = unitIds.get(unitKey(trailer.row.id, reading.serial))!;
      readings.set(`${unitId}\u0000${reading.timestamp}`, { unitId, reading });
      reduceLatest(latest, unitId, reading, at);
    }
    const columns = (rows: Array<[string, CanonicalCargosafeReading]>) => [
      rows.map(([id]) => id),
      rows.map(([, r]) => r.timestamp),
      rows.map(([, r]) => r.doorOpen),
      rows.map(([, r]) => r.loadPercent),
      rows.map(([, r]) => r.temperatureC),
      rows.map(([, r]) => r.humidityPercent),
    ];
    await queryRun(client, sql.upsertUnitReadings, columns(readings.values().map((r) => [r.unitId, r.reading])));
    if (latest.size > 0) await queryRun(client, sql.moveUnitsLatest, columns([...latest.entries()]));
  }

  // --- The trailers: latest fix and status, in one statement; answered with their fleets. A trailer
  // the batch created holds its latest fix already: only a status recount writes it again.
  const touched = [...trailers.values()];
  const statuses = await recountStatuses(client, sql, touched.filter((trailer) => trailer.recount));
  const rewritten = touched.filter((trailer) => trailer.createdRow === undefined || trailer.recount);
  const after =
    rewritten.length === 0
      ? []
      : await queryRows<TrailerAfterRow>(client, sql.updateTrailers, [
          rewritten.map((t) => t.row.id),
          rewritten.map((t) => latestFix.get(t.row.vin)?.timestamp ?? null),
          rewritten.map((t) => latestFix.get(t.row.vin)?.lat ?? null),
          rewritten.map((t) => latestFix.get(t.row.vin)?.long ?? null),
          rewritten.map((t) => latestFix.get(t.row.vin)?.speed ?? null),
          rewritten.map((t) => latestFix.get(t.row.vin)?.heading ?? null),
          rewritten.map((t) => statuses.get(t.row.id)?.statusName ?? null),
          rewritten.map((t) => statuses.get(t.row.id)?.statusDate ?? null),
          rewritten.map((t) => statuses.get(t.row.id)?.faultedDevices ?? null),
          rewritten.map((t) => statuses.get(t.row.id)?.warningDevices ?? null),
        ]);
  const byId = new Map(after.map((row) => [row.id, row]));
  const applied = new Map<string, AppliedTelemetry>();
  for (const [vin, trailer] of trailers) {
    const row = byId.get(trailer.row.id) ?? trailer.createdRow;
    if (row === undefined) throw new TrailwireError('internal', `trailer ${vin} vanished while it was locked`);
    const fleet = row.fleet_id === null ? null : toFleet({ id: row.fleet_id, customer_id: row.f_customer_id!, name: row.f_name!, created_at: row.f_created_at! });
    const status = statuses.get(trailer.row.id);
    applied.set(vin, { trailer: toTrailer(row), fleet, createdTrailer: trailer.createdRow !== undefined, statusChanged: status !== undefined && status.statusName !== trailer.row.status_name });
  }
  return applied;
}

/** What the batch needs of a locked trailer; its whole row comes back from the update (`updateTrailers`). */
type LockedTrailerRow = Pick<TrailerRow, 'id' | 'vin' | 'fleet_id' | 'status_name' | 'status_date'>;

interface LockedTrailer {
  row: LockedTrailerRow;
  /** The whole row, as inserted, of a trailer this batch created (no other transaction sees it: it is not locked). */
  createdRow: TrailerAfterRow | undefined;
  /** Its devices changed: recount its status. */
  recount: boolean;
  /** The `at` of its last item: the status date if its status changes. */
  at: number;
}

/**
 * VINs whose trailer is known to exist (a trailer is never deleted), so that a batch of known VINs
 * skips the creating statement. Forgotten all at once past `limit`, to bound the memory.
 */
export class KnownVins {
  private readonly vins = new Set<string>();
  constructor(private readonly limit = 200_000) {}
  has(vin: string): boolean {
    return this.vins.has(vin);
  }
  addAll(vins: Iterable<string>): void {
    for (const vin of vins) {
      if (this.vins.size >= this.limit) this.vins.clear();
      this.vins.add(vin);
    }
  }
}

/**
 * Creates the unknown VINs' trailers (in VIN order) with their latest fix, then locks every other
 * trailer of the batch (in id order). A trailer inserted with its state is written once: inserted
 * and then updated, the first sights' trailers cost a second row version each, and their pages,
 * filled by the inserts, had room for few of them in place (issue 41).
 */
async function lockTrailers(
  client: pg.PoolClient,
  sql: TelemetryStatements,
  ids: IdGenerator,
  items: readonly TelemetryBatch[],
  knownVins: KnownVins,
  latestFix: ReadonlyMap<string, GpsFix>,
): Promise<Map<string, LockedTrailer>> {
  const firstAt = new Map<string, number>();
  const lastAt = new Map<string, number>();
  for (const { vin, at } of items) {
    if (!firstAt.has(vin)) firstAt.set(vin, at);
    lastAt.set(vin, at);
  }
  const vins = [...firstAt.keys()].sort();
  const unknown = vins.filter((vin) => !knownVins.has(vin));
  const fixOf = (vin: string) => latestFix.get(vin);
  const created =
    unknown.length === 0
      ? []
      : await queryRows<TrailerAfterRow>(client, sql.createTrailers, [
          unknown.map(() => ids()),
          unknown,
          unknown.map((vin) => firstAt.get(vin)!),
          unknown.map((vin) => fixOf(vin)?.timestamp ?? null),
          unknown.map((vin) => fixOf(vin)?.lat ?? null),
          unknown.map((vin) => fixOf(vin)?.long ?? null),
          unknown.map((vin) => fixOf(vin)?.speed ?? null),
          unknown.map((vin) => fixOf(vin)?.heading ?? null),
        ]);
  const createdRows = new Map(created.map((row) => [row.vin, row]));
  // A VIN another transaction created meanwhile is not ours: it is locked like any other.
  const existing = vins.filter((vin) => !createdRows.has(vin));
  const rows = existing.length === 0 ? [] : await queryRows<LockedTrailerRow>(client, sql.lockTrailers, [existing]);
  if (rows.length !== existing.length) throw new TrailwireError('internal', 'a trailer vanished while its telemetry was being written');
  // Only once the batch commits would a created trailer be there for others; the caller adds them then.
  knownVins.addAll(rows.map((row) => row.vin));
  // Keyed in the batch's order of first appearance.
  const byVin = new Map<string, LockedTrailerRow>([...rows, ...created].map((row) => [row.vin, row]));
  return new Map(
    [...firstAt.keys()].map((vin) => [vin, { row: byVin.get(vin)!, createdRow: createdRows.get(vin), recount: false, at: lastAt.get(vin)! }]),
  );
}

/** Each recounted trailer's new status, from its active devices' states; the rules are the core's. */
async function recountStatuses(client: pg.PoolClient, sql: TelemetryStatements, trailers: LockedTrailer[]): Promise<Map<string, TrailerStatus>> {
  const statuses = new Map<string, TrailerStatus>();
  if (trailers.length === 0) return statuses;
  const counted = await queryRows<StateCountRow & { trailer_id: string }>(client, sql.deviceStateCounts, [trailers.map((t) => t.row.id)]);
  for (const trailer of trailers) {
    const counts = countDeviceStates(expandStateCounts(counted.filter((row) => row.trailer_id === trailer.row.id)));
    statuses.set(trailer.row.id, deriveTrailerStatus({ statusName: trailer.row.status_name, statusDate: trailer.row.status_date }, counts, trailer.at));
  }
  return statuses;
}

/**
 * Inserts the rows not seen yet (the first of each key) and answers every key's id: the new ones
 * from RETURNING, the others from the snapshot the statement started with.
 */
async function findOrCreate<R extends { id: string }>(
  client: pg.PoolClient,
  statement: Statement,
  wanted: Array<{ key: string; values: unknown[] }>,
  keyOf: (row: R) => string,
): Promise<Map<string, string>> {
  const first = new Map<string, unknown[]>();
  for (const { key, values } of wanted) if (!first.has(key)) first.set(key, values);
  const rows = [...first.values()];
  const columns = rows[0]!.map((_, column) => rows.map((values) => values[column]));
  const found = await queryRows<R>(client, statement, columns);
  const ids = new Map(found.map((row) => [keyOf(row), row.id]));
  if (ids.size !== first.size) throw new TrailwireError('internal', 'devices or cargosafe units changed while their trailer was locked');
  return ids;
}

/**
 * Keeps, per key, what applying readings one by one leaves as the latest: each reading at or after
 * the latest so far (last received wins at one instant) and not dated beyond the allowed lead.
 * Stored latest states are then moved only to a reading at or after their own time, which gives the
 * same result as applying the batch's readings one after another.
 */
function reduceLatest<T extends { timestamp: number }>(latest: Map<string, T>, key: string, reading: T, at: number): void {
  if (reading.timestamp > at + MAX_READING_LEAD_MS) return;
  const current = latest.get(key);
  if (current === undefined || reading.timestamp >= current.timestamp) latest.set(key, reading);
}

interface DeviceMove {
  /** The reading whose state the device ends with, if it is at or after what is stored. */
  newest: CanonicalDeviceReading;
  /** The newest of the readings that would move the device and name a position. */
  positioned: CanonicalDeviceReading | undefined;
}

/**
 * `reduceLatest` for a device, whose position moves only with a reading that names one: the
 * readings that move the device are those at or after every earlier one, and of those the ones at or
 * after the stored reading are a suffix, so the device ends with the last mover's state and the
 * position of the last mover that names one — if that mover is at or after the stored reading.
 */
function reduceDeviceMove(moves: Map<string, DeviceMove>, deviceId: string, reading: CanonicalDeviceReading, at: number): void {
  if (reading.timestamp > at + MAX_READING_LEAD_MS) return;
  const move = moves.get(deviceId);
  if (move !== undefined && reading.timestamp < move.newest.timestamp) return;
  moves.set(deviceId, { newest: reading, positioned: reading.position !== null ? reading : move?.positioned });
}

/** Rows by key, each the last one set, in the order keys were first set: one row per upsert key. */
class LastWins<T> {
  private readonly rows = new Map<string, T>();
  set(key: string, row: T): void {
    this.rows.set(key, row);
  }
  get size(): number {
    return this.rows.size;
  }
  values(): T[] {
    return [...this.rows.values()];
  }
}

const deviceKey = (trailerId: string, device: { kind: string; serial: string }): string => `${trailerId}\u0000${device.kind}\u0000${device.serial}`;
const unitKey = (trailerId: string, serial: string): string => `${trailerId}\u0000${serial}`;

interface TrailerAfterRow extends TrailerRow {
  f_customer_id: string | null;
  f_name: string | null;
  f_created_at: number | null;
}

const TRAILER_COLUMNS = `t.id, t.fleet_id, t.unit_id, t.vin, t.active, t.status_name, t.status_date, t.faulted_devices,
  t.warning_devices, t.gps_timestamp, t.gps_lat, t.gps_long, t.gps_speed, t.gps_heading, t.created_at`;

/** Keeps a stored latest value unless the batch's candidate (`m.<column>`) is at or after it. */
const moveFix = (column: string) =>
  `CASE WHEN m.gps_timestamp IS NOT NULL AND (t.gps_timestamp IS NULL OR t.gps_timestamp <= m.gps_timestamp) THEN m.${column} ELSE t.${column} END`;

/** The statements of the telemetry write on `schema`, each named for `pg` to prepare once per connection. */
export function telemetryStatements(schema: string) {
  const s = quoteSchema(schema);
  const statements = {
    // With its latest fix (null columns without one), answered whole, as the update answers a row
    // (a new trailer is in no fleet): the batch writes it no more unless its status is recounted.
    createTrailers: `INSERT INTO ${s}.trailers AS t (id, fleet_id, unit_id, vin, status_name, status_date, created_at,
        gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading)
      SELECT n.id, NULL, NULL, n.vin, 'OK', n.at, n.at, n.gps_timestamp, n.gps_lat, n.gps_long, n.gps_speed, n.gps_heading
      FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::float8[], $6::float8[], $7::float8[], $8::text[])
        WITH ORDINALITY AS n (id, vin, at, gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading, position)
      ORDER BY n.position
      ON CONFLICT (vin) DO NOTHING
      RETURNING ${TRAILER_COLUMNS}, NULL::text AS f_customer_id, NULL::text AS f_name, NULL::bigint AS f_created_at`,
    // FOR NO KEY UPDATE: the write changes no key, so it does not block inserts that merely reference a trailer.
    // Only the columns the batch reads before its update, which answers the whole rows (a third of
    // the columns: the driver parses every field of every row, issue 41).
    lockTrailers: `SELECT t.id, t.vin, t.fleet_id, t.status_name, t.status_date FROM ${s}.trailers t
      WHERE t.vin = ANY($1::text[]) ORDER BY t.id FOR NO KEY UPDATE`,
    // One row per (trailer, timestamp) (see LastWins); an identical repeat writes nothing and keeps its seq.
    upsertFixes: `INSERT INTO ${s}.gps_fixes (trailer_id, timestamp, lat, long, speed, heading)
      SELECT f.trailer_id, f.timestamp, f.lat, f.long, f.speed, f.heading
      FROM unnest($1::text[], $2::bigint[], $3::float8[], $4::float8[], $5::float8[], $6::text[])
        WITH ORDINALITY AS f (trailer_id, timestamp, lat, long, speed, heading, position)
      ORDER BY f.position
      ON CONFLICT (trailer_id, timestamp) DO UPDATE
        SET lat = excluded.lat, long = excluded.long, speed = excluded.speed, heading = excluded.heading
        WHERE (gps_fixes.lat, gps_fixes.long, gps_fixes.speed, gps_fixes.heading)
          IS DISTINCT FROM (excluded.lat, excluded.long, excluded.speed, excluded.heading)`,
    findOrCreateDevices: `WITH wanted AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
          AS w (trailer_id, id, kind, serial, position, at)
      ), created AS (
        INSERT INTO ${s}.devices (id, trailer_id, kind, serial, position, created_at)
        SELECT w.id, w.trailer_id, w.kind, w.serial, w.position, w.at FROM wanted w
        ON CONFLICT (trailer_id, kind, serial) DO NOTHING
        RETURNING id, trailer_id, kind, serial
      )
      SELECT id, trailer_id, kind, serial FROM created
      UNION ALL
      SELECT d.id, d.trailer_id, d.kind, d.serial FROM ${s}.devices d
      JOIN wanted w ON w.trailer_id = d.trailer_id AND w.kind = d.kind AND w.serial = d.serial`,
    // json has no equality: its text (kept as written) tells a correction from a repeat.
    upsertDeviceReadings: `INSERT INTO ${s}.device_readings (device_id, timestamp, metrics, is_warning, is_fault)
      SELECT r.device_id, r.timestamp, r.metrics, r.is_warning, r.is_fault
      FROM unnest($1::text[], $2::bigint[], $3::json[], $4::boolean[], $5::boolean[])
        WITH ORDINALITY AS r (device_id, timestamp, metrics, is_warning, is_fault, position)
      ORDER BY r.position
      ON CONFLICT (device_id, timestamp) DO UPDATE
        SET metrics = excluded.metrics, is_warning = excluded.is_warning, is_fault = excluded.is_fault
        WHERE (device_readings.metrics::text, device_readings.is_warning, device_readings.is_fault)
          IS DISTINCT FROM (excluded.metrics::text, excluded.is_warning, excluded.is_fault)`,
    // One row per device (see reduceDeviceMove).
    moveDeviceStates: `UPDATE ${s}.devices d
      SET is_warning = m.is_warning, is_fault = m.is_fault, last_seen_at = m.timestamp,
          position = CASE WHEN m.position_timestamp IS NOT NULL AND (d.last_seen_at IS NULL OR d.last_seen_at <= m.position_timestamp)
                          THEN m.position ELSE d.position END
      FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::boolean[], $5::bigint[], $6::text[])
        AS m (id, timestamp, is_warning, is_fault, position_timestamp, position)
      WHERE d.id = m.id AND (d.last_seen_at IS NULL OR d.last_seen_at <= m.timestamp)`,
    deviceStateCounts: `SELECT trailer_id, is_warning, is_fault, COUNT(*)::integer AS n FROM ${s}.devices
      WHERE trailer_id = ANY($1::text[]) AND active GROUP BY trailer_id, is_warning, is_fault`,
    // A new unit copies the customer of its (locked) trailer's fleet.
    findOrCreateUnits: `WITH wanted AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::bigint[]) AS w (trailer_id, id, serial, fleet_id, at)
      ), created AS (
        INSERT INTO ${s}.cargosafe_units (id, trailer_id, serial, customer_id, created_at)
        SELECT w.id, w.trailer_id, w.serial, (SELECT f.customer_id FROM ${s}.fleets f WHERE f.id = w.fleet_id), w.at FROM wanted w
        ON CONFLICT (trailer_id, serial) DO NOTHING
        RETURNING id, trailer_id, serial
      )
      SELECT id, trailer_id, serial FROM created
      UNION ALL
      SELECT u.id, u.trailer_id, u.serial FROM ${s}.cargosafe_units u JOIN wanted w ON w.trailer_id = u.trailer_id AND w.serial = u.serial`,
    upsertUnitReadings: `INSERT INTO ${s}.cargosafe_readings (unit_id, timestamp, door_open, load_percent, temperature_c, humidity_percent)
      SELECT r.unit_id, r.timestamp, r.door_open, r.load_percent, r.temperature_c, r.humidity_percent
      FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::float8[], $5::float8[], $6::float8[])
        WITH ORDINALITY AS r (unit_id, timestamp, door_open, load_percent, temperature_c, humidity_percent, position)
      ORDER BY r.position
      ON CONFLICT (unit_id, timestamp) DO UPDATE
        SET door_open = excluded.door_open, load_percent = excluded.load_percent,
            temperature_c = excluded.temperature_c, humidity_percent = excluded.humidity_percent
        WHERE (cargosafe_readings.door_open, cargosafe_readings.load_percent, cargosafe_readings.temperature_c, cargosafe_readings.humidity_percent)
          IS DISTINCT FROM (excluded.door_open, excluded.load_percent, excluded.temperature_c, excluded.humidity_percent)`,
    moveUnitsLatest: `UPDATE ${s}.cargosafe_units u
      SET last_seen_at = m.timestamp, door_open = m.door_open, load_percent = m.load_percent,
          temperature_c = m.temperature_c, humidity_percent = m.humidity_percent
      FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::float8[], $5::float8[], $6::float8[])
        AS m (id, timestamp, door_open, load_percent, temperature_c, humidity_percent)
      WHERE u.id = m.id AND (u.last_seen_at IS NULL OR u.last_seen_at <= m.timestamp)`,
    // Every trailer of the batch, once: its latest fix (a null candidate keeps it) and its status
    // (null: not recounted), answered with its fleet — joined once, not a subquery per column and
    // row (issue 41: three index reads a trailer of a customer's fleet, about a third of the statement).
    updateTrailers: `WITH updated AS (
        UPDATE ${s}.trailers t SET
          gps_timestamp = ${moveFix('gps_timestamp')}, gps_lat = ${moveFix('gps_lat')}, gps_long = ${moveFix('gps_long')},
          gps_speed = ${moveFix('gps_speed')}, gps_heading = ${moveFix('gps_heading')},
          status_name = coalesce(m.status_name, t.status_name), status_date = coalesce(m.status_date, t.status_date),
          faulted_devices = coalesce(m.faulted_devices, t.faulted_devices), warning_devices = coalesce(m.warning_devices, t.warning_devices)
        FROM unnest($1::text[], $2::bigint[], $3::float8[], $4::float8[], $5::float8[], $6::text[], $7::text[], $8::bigint[], $9::integer[], $10::integer[])
          AS m (id, gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading, status_name, status_date, faulted_devices, warning_devices)
        WHERE t.id = m.id
        RETURNING ${TRAILER_COLUMNS}
      )
      SELECT ${TRAILER_COLUMNS}, f.customer_id AS f_customer_id, f.name AS f_name, f.created_at AS f_created_at
      FROM updated t LEFT JOIN ${s}.fleets f ON f.id = t.fleet_id`,
  };
  // Prefixed apart from the store's other statements, with which they share the pool's connections.
  // The lock stays prepared, unlike the owners' lookup (`Statement`): planned for a batch's hundreds
  // of VINs, it scanned the whole table (1.3 ms at 14,800 trailers, growing with the fleet), where the
  // prepared plan reads the index.
  return Object.fromEntries(
    Object.entries(statements).map(([key, text]) => [key, { name: `trailwire_telemetry_${key}`, text }]),
  ) as Record<keyof typeof statements, Statement>;
}

export type TelemetryStatements = ReturnType<typeof telemetryStatements>;
