/**
 * The embedded store: `TrailwireStore` on one SQLite file through better-sqlite3, the default backend
 * of a single Trailwire process (contract 11). The file runs in WAL mode so that a `serve` process and
 * CLI commands can use it at the same time; every write that reads first takes the write lock up front
 * (`BEGIN IMMEDIATE`), and other processes wait up to `busyTimeoutMs` for it. Statements are prepared
 * once, customer isolation is part of every read query (a join through `fleets.customer_id`), and each
 * page is one index range, so its cost does not grow with its depth. Trailer status policy stays in the
 * core: the store counts device states in SQL and calls `deriveTrailerStatus`.
 */
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { type CanonicalCargosafeReading, type CanonicalDeviceReading, MAX_READING_LEAD_MS } from '../../core/canonical.ts';
import { randomIds, type IdGenerator } from '../../core/clock.ts';
import { storageFaultError } from './storage-faults.ts';
import { SqliteWebhookTables } from './webhook-tables.ts';
import { webhookEventsOf, type WebhookOutboxEvent } from '../../core/webhook-events.ts';
import { TrailwireError } from '../../core/errors.ts';
import type {
  Audience,
  CargosafeReading,
  CargosafeUnit,
  Customer,
  Device,
  DeviceReading,
  Fleet,
  GpsFix,
  Heading,
  Partner,
  Principal,
  StatusName,
  Trailer,
} from '../../core/model.ts';
import type {
  ActiveFilter,
  AppliedTelemetry,
  IdPageQuery,
  NewCustomer,
  NewPartner,
  NewTrailer,
  OperatorTrailer,
  PartnerGrant,
  PartnerGrantQuery,
  PartnerIntakeLimits,
  Sequenced,
  StoredSigningKey,
  TelemetryBatch,
  TimePageQuery,
  TrailerChange,
  TrailerImportChange,
  TrailerScope,
  TrailwireStore,
  VinOwner,
  NewWebhookEndpoint,
  WebhookAttemptOutcome,
  WebhookBatching,
} from '../../core/store.ts';
import { TRAILER_CHANGE_RETENTION_MS } from '../../core/store.ts';
import { countDeviceStates, deriveTrailerStatus } from '../../core/trailer-status.ts';
import { createOwnerOnly, restrictSidecars } from './file-modes.ts';
import { applyMigrations, STORE_COMPONENT, STORE_MIGRATIONS } from './migrations.ts';
import { TrailerRowCache } from './trailer-row-cache.ts';
import {
  compareKeys,
  expandStateCounts,
  isTrue,
  toCargosafeReading,
  toCargosafeUnit,
  toCustomer,
  toCustomerPrincipal,
  toDevice,
  toFleet,
  toFleetOrNull,
  toGpsFix,
  toOperatorTrailer,
  toPartner,
  toPartnerPrincipal,
  toTrailer,
  toTrailerOrNull,
  withoutUndefined,
  type CargosafeReadingRow,
  type CargosafeUnitRow,
  type DeviceRow,
  type FleetRow,
  type GpsRow,
  type OperatorTrailerRow,
  type PartnerRow,
  type PrincipalRow,
  type SqlBool,
  type StateCountRow,
  type TrailerRow,
  SIGNING_KEY_COLUMNS,
  type SigningKeyRow,
  signingKeyValues,
  toStoredSigningKey,
  partnerIntakeLimitsValues,
  type PartnerGrantRow,
  type PartnerIntakeLimitsRow,
  toPartnerGrant,
  toPartnerIntakeLimits,
} from '../sql/rows.ts';

/**
 * What a committed write survives. `'process'`: a crash or `kill -9` of the process (WAL with
 * `synchronous=NORMAL`). `'power'`: also an OS crash or power loss (`synchronous=FULL`, an fsync per
 * commit).
 */
export type SqliteDurability = 'process' | 'power';

export interface SqliteStoreOptions {
  /** Path of the database file; its parent directory is created. `':memory:'` gives a private in-memory database (tests). Required. */
  file: string;
  /** What a committed write survives. Default `'process'`. */
  durability?: SqliteDurability;
  /** How long a statement waits for another connection's lock before failing, in ms. Default 5000. */
  busyTimeoutMs?: number;
  /** Ids of the trailers, devices and cargosafe units that `applyTelemetry` creates. Default: random UUIDs. */
  ids?: IdGenerator;
}

export const DEFAULT_SQLITE_STORE_OPTIONS = {
  durability: 'process',
  busyTimeoutMs: 5000,
  ids: randomIds,
} as const satisfies Omit<Required<SqliteStoreOptions>, 'file'>;

/** The SQLite store, with its connection exposed for modules that share the file (the intake queue). */
export interface SqliteStore extends TrailwireStore {
  readonly db: Database.Database;
  /** The database file (`:memory:` for a private in-memory database). */
  readonly file: string;
  /** What a commit survives (see `SqliteStoreOptions.durability`). */
  readonly durability: SqliteDurability;
}

/** Checks the options, naming the first bad field, and fills in the defaults. */
export function resolveSqliteStoreOptions(options: SqliteStoreOptions): Required<SqliteStoreOptions> {
  if (typeof options !== 'object' || options === null) throw badOption('options', 'must be an object');
  // Checked field by field below: callers from plain JavaScript or config files can pass anything.
  const resolved = { ...DEFAULT_SQLITE_STORE_OPTIONS, ...withoutUndefined(options) } as Required<SqliteStoreOptions>;
  if (typeof resolved.file !== 'string' || resolved.file.trim() === '') {
    throw badOption('file', 'must be a non-empty path (or ":memory:")');
  }
  if (resolved.durability !== 'process' && resolved.durability !== 'power') {
    throw badOption('durability', `must be "process" or "power" (got ${JSON.stringify(resolved.durability)})`);
  }
  if (!Number.isSafeInteger(resolved.busyTimeoutMs) || resolved.busyTimeoutMs < 0) {
    throw badOption('busyTimeoutMs', `must be a non-negative integer of milliseconds (got ${String(resolved.busyTimeoutMs)})`);
  }
  if (typeof resolved.ids !== 'function') throw badOption('ids', 'must be a function that returns a new id');
  return resolved;
}

/**
 * The page size of a new file: 8 KiB rather than SQLite's 4 KiB. Processing dirties pages scattered
 * over the whole fleet (a trailer's row, its fix-index leaf), about one per payload, and each is one
 * WAL frame written at commit and copied back at checkpoint; with pages twice as large a batch
 * writes the same bytes in half the frames, and processing took 11–13 µs a payload instead of 14–15
 * (`npm run bench -- intake-processing`, several runs each). Paging reads are as fast or faster
 * (`read-paging`: 0.57–0.60 ms p50 against 0.67–0.71).
 */
export const NEW_FILE_PAGE_SIZE = 8192;

/**
 * Opens (creating if needed) the database file, configures the connection and applies the store's
 * pending migrations. Safe while other processes have the same file open.
 */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SqliteStore> {
  const resolved = resolveSqliteStoreOptions(options);
  const onDisk = resolved.file !== ':memory:';
  // Owner-only: the file holds key hashes and, by default, the token-signing key (file-modes.ts).
  const created = onDisk && !existsSync(resolved.file);
  if (onDisk) createOwnerOnly(resolved.file);
  const db = new Database(resolved.file, { timeout: resolved.busyTimeoutMs });
  try {
    // Only an empty file takes a page size (a file's pages keep the size they were written with).
    if (db.pragma('page_count', { simple: true }) === 0) db.pragma(`page_size = ${NEW_FILE_PAGE_SIZE}`);
    // WAL lets readers run beside the one writer, and with synchronous=NORMAL a commit is safe from a
    // process crash without an fsync; FULL adds the fsync that power loss needs.
    await switchToWal(db, resolved.busyTimeoutMs);
    if (created) restrictSidecars(resolved.file);
    db.pragma(`synchronous = ${resolved.durability === 'power' ? 'FULL' : 'NORMAL'}`);
    db.pragma('foreign_keys = ON');
    // An intake batch writes its telemetry in a savepoint (so that one bad payload can be found and
    // failed alone), and SQLite copies every page a savepoint changes to a statement journal first.
    // Past 64 KiB that journal spills to a temporary file: ~20 KB of writes and five write calls per
    // payload here, which writeback then flushes to the disk, for pages the batch's commit makes
    // obsolete at once. In memory it holds at most the pages one batch changes (a few MB), freed when
    // the batch ends.
    db.pragma('temp_store = MEMORY');
    applyMigrations(db, STORE_COMPONENT, STORE_MIGRATIONS);
    return new SqliteTrailwireStore(db, resolved.file, resolved.durability, prepareStoreStatements(db), resolved.ids);
  } catch (error) {
    db.close();
    throw error;
  }
}

/** Far enough in the past that no device is stale: a device read without `staleBefore`. */
const NEVER_STALE = Number.MIN_SAFE_INTEGER;

/** A trailer a batch write touches: its id and key, and what to do once its items are written. */
interface TouchedTrailer {
  id: string;
  /** The integer its GPS fixes name it by (`0004_trailer_keys`). */
  key: number;
  created: boolean;
  /** Its devices changed: recount its status after the batch. */
  recount: boolean;
  /** The processing time of its last item. */
  at: number;
  /** Its row as of its last fix move, while nothing else changed it. */
  row: TrailerRow | undefined;
}

class SqliteTrailwireStore implements SqliteStore {
  private readonly trailersByVin = new Map<string, TrailerIdentity>();
  private readonly trailerRows: TrailerRowCache;
  private readonly applyTelemetryTransaction: Database.Transaction<(items: readonly TelemetryBatch[]) => Map<string, AppliedTelemetry>>;
  private readonly setDeviceActiveTransaction: Database.Transaction<(deviceId: string, active: boolean, at: number) => Trailer | null>;
  private readonly noteTrailerChangeTransaction: Database.Transaction<(trailerId: string, at: number) => void>;
  private readonly importTrailersTransaction: Database.Transaction<(fleetId: number, changes: readonly TrailerImportChange[], at: number) => void>;
  /** The customers' webhook endpoints, outbox and deliveries, in this file (`webhook-tables.ts`). */
  readonly webhooks: SqliteWebhookTables;

  constructor(
    readonly db: Database.Database,
    readonly file: string,
    readonly durability: SqliteDurability,
    private readonly sql: Statements,
    private readonly ids: IdGenerator,
  ) {
    this.trailerRows = new TrailerRowCache(() => sql.dataVersion.get()!);
    this.webhooks = new SqliteWebhookTables(db);
    this.applyTelemetryTransaction = db.transaction((items: readonly TelemetryBatch[]) => this.writeTelemetry(items));
    this.setDeviceActiveTransaction = db.transaction((deviceId: string, active: boolean, at: number) => this.switchDevice(deviceId, active, at));
    this.noteTrailerChangeTransaction = db.transaction((trailerId: string, at: number) => {
      this.sql.insertTrailerChange.run(trailerId, at);
      this.sql.pruneTrailerChanges.run(at - TRAILER_CHANGE_RETENTION_MS);
    });
    this.importTrailersTransaction = db.transaction((fleetId: number, changes: readonly TrailerImportChange[], at: number) =>
      this.writeImport(fleetId, changes, at),
    );
  }

  // --- principals -------------------------------------------------------------------------------

  async createPartner(input: NewPartner): Promise<Partner> {
    const row = insertOrExplain(
      () => this.sql.insertPartner.get(input.id, input.name, input.product, input.keyHash, input.createdAt),
      { conflict: `a partner with id ${input.id} or the same key already exists` },
    );
    return toPartner(row!);
  }

  async createCustomer(input: NewCustomer): Promise<Customer> {
    const row = insertOrExplain(
      () => this.sql.insertCustomer.get(input.id, input.name, input.keyHash, input.createdAt),
      { conflict: `a customer with id ${input.id} or the same key already exists` },
    );
    return toCustomer(row!);
  }

  async findPrincipalByKeyHash(audience: Audience, keyHash: string): Promise<Principal | null> {
    return audience === 'partners'
      ? toPartnerPrincipal(this.sql.partnerByKeyHash.get(keyHash))
      : toCustomerPrincipal(this.sql.customerByKeyHash.get(keyHash));
  }

  async getPrincipal(audience: Audience, id: string): Promise<Principal | null> {
    return audience === 'partners'
      ? toPartnerPrincipal(this.sql.partnerById.get(id))
      : toCustomerPrincipal(this.sql.customerById.get(id));
  }

  async rotateKey(audience: Audience, id: string, newKeyHash: string, rotatedAt: number, expectedVersion: number): Promise<number | null> {
    const rotate = audience === 'partners' ? this.sql.rotatePartnerKey : this.sql.rotateCustomerKey;
    // One UPDATE ... RETURNING: the hash and the version change together or not at all.
    const row = insertOrExplain(() => rotate.get(newKeyHash, rotatedAt, id, expectedVersion), {
      conflict: `the new key of ${audience} ${id} collides with an existing key`,
    });
    return row?.key_version ?? null;
  }

  // --- secrets ----------------------------------------------------------------------------------

  async listSigningKeys(): Promise<StoredSigningKey[]> {
    return this.sql.signingKeys.all().map(toStoredSigningKey);
  }

  async saveSigningKey(key: StoredSigningKey): Promise<void> {
    this.sql.insertSigningKey.run(...signingKeyValues(key));
  }

  async promoteSigningKey(key: StoredSigningKey, at: number): Promise<void> {
    this.db.transaction(() => {
      if (this.sql.insertSigningKey.run(...signingKeyValues(key)).changes === 1) this.sql.retireOtherSigningKeys.run(at, key.kid);
    }).immediate();
  }

  async revokeRetiredSigningKeys(at: number): Promise<string[]> {
    return this.sql.revokeRetiredSigningKeys.all(at).map((row) => row.kid);
  }

  async getOrCreateSecret(name: string, candidate: string): Promise<string> {
    // The first INSERT wins across every connection; everyone then reads the winner.
    this.sql.insertSecret.run(name, candidate);
    return this.sql.secretByName.get(name)!.value;
  }

  // --- fleet administration ---------------------------------------------------------------------

  async createFleet(input: { customerId: string; name: string; createdAt: number }): Promise<Fleet> {
    const row = insertOrExplain(() => this.sql.insertFleet.get(input.customerId, input.name, input.createdAt), {
      missing: `no customer ${input.customerId}`,
    });
    return toFleet(row!);
  }

  async getFleetById(fleetId: number): Promise<Fleet | null> {
    return toFleetOrNull(this.sql.fleetById.get(fleetId));
  }

  async findTrailerByVin(vin: string): Promise<Trailer | null> {
    return toTrailerOrNull(this.sql.trailerByVin.get(vin));
  }

  async createTrailer(input: NewTrailer): Promise<Trailer> {
    const row = insertOrExplain(
      () => this.sql.insertTrailer.get(input.id, input.fleetId, input.unitId, input.vin, input.createdAt, input.createdAt),
      { conflict: `a trailer with VIN ${input.vin} (or id ${input.id}) already exists`, missing: `no fleet ${input.fleetId}` },
    );
    return toTrailer(row!);
  }

  async assignTrailer(trailerId: string, fleetId: number, unitId: string | null): Promise<Trailer> {
    this.trailerRows.clear();
    const row = insertOrExplain(() => this.sql.assignTrailer.get(fleetId, unitId, trailerId), {
      missing: `no fleet ${fleetId}`,
    });
    if (row === undefined) throw new TrailwireError('not_found', `no trailer ${trailerId}`);
    return toTrailer(row);
  }

  async importTrailers(fleetId: number, changes: readonly TrailerImportChange[], at: number): Promise<void> {
    this.trailerRows.clear();
    try {
      this.importTrailersTransaction.immediate(fleetId, changes, at);
    } catch (error) {
      throw storageFaultError(error, 'the store') ?? error;
    }
  }

  /** The body of `importTrailers`, in its transaction: each change only while its trailer is as planned. */
  private writeImport(fleetId: number, changes: readonly TrailerImportChange[], at: number): void {
    const { sql } = this;
    const moved = (trailerId: string) => new TrailwireError('conflict', `trailer ${trailerId} changed while the import was planned; nothing was applied, run it again`);
    for (const change of changes) {
      const active = change.active ? 1 : 0;
      if (change.kind === 'create') {
        insertOrExplain(() => sql.importTrailer.run(change.id, fleetId, change.unitId, change.vin, active, at, at), {
          conflict: `VIN ${change.vin} was registered while the import was planned; nothing was applied, run it again`,
          missing: `no fleet ${fleetId}`,
        });
      } else if (change.kind === 'assign') {
        const assigned = insertOrExplain(() => sql.importAssignTrailer.run(fleetId, change.unitId, active, change.trailerId), { missing: `no fleet ${fleetId}` });
        if (assigned.changes === 0) throw moved(change.trailerId);
      } else if (sql.importUpdateTrailer.run(change.unitId, active, change.trailerId, fleetId).changes === 0) {
        throw moved(change.trailerId);
      }
      sql.insertTrailerChange.run(change.kind === 'create' ? change.id : change.trailerId, at);
    }
    sql.pruneTrailerChanges.run(at - TRAILER_CHANGE_RETENTION_MS);
  }

  async setTrailerActive(trailerId: string, active: boolean): Promise<boolean> {
    this.trailerRows.clear();
    return this.sql.setTrailerActive.run(active ? 1 : 0, trailerId).changes > 0;
  }

  async noteTrailerChange(trailerId: string, at: number): Promise<void> {
    this.noteTrailerChangeTransaction.immediate(trailerId, at);
  }

  async latestTrailerChange(): Promise<number> {
    return this.sql.latestTrailerChange.get()?.seq ?? 0;
  }

  async trailerChangesAfter(afterSeq: number, limit: number): Promise<TrailerChange[]> {
    const changes: TrailerChange[] = [];
    for (const { seq, trailer_id } of this.sql.trailerChangesAfter.all(afterSeq, limit)) {
      const row = this.sql.trailerById.get(trailer_id);
      if (!row) continue;
      changes.push({ seq, trailer: toTrailer(row), fleet: row.fleet_id === null ? null : toFleetOrNull(this.sql.fleetById.get(row.fleet_id)) });
    }
    return changes;
  }

  // --- partner policies -------------------------------------------------------------------------

  async addPartnerGrant(grant: PartnerGrant): Promise<boolean> {
    const result = insertOrExplain(() => this.sql.insertPartnerGrant.run(grant.customerId, grant.partnerId, grant.createdAt), {
      missing: `no customer ${grant.customerId} or no partner ${grant.partnerId}`,
    });
    return result.changes > 0;
  }

  async removePartnerGrant(customerId: string, partnerId: string): Promise<boolean> {
    return this.sql.deletePartnerGrant.run(customerId, partnerId).changes > 0;
  }

  async listPartnerGrants(query: PartnerGrantQuery): Promise<PartnerGrant[]> {
    const { customerId, partnerId } = query;
    const rows =
      customerId !== undefined && partnerId !== undefined
        ? this.sql.partnerGrant.all(customerId, partnerId)
        : customerId !== undefined
          ? this.sql.customerPartnerGrants.all(customerId)
          : partnerId !== undefined
            ? this.sql.partnerPartnerGrants.all(partnerId)
            : this.sql.allPartnerGrants.all();
    return rows.map(toPartnerGrant);
  }

  async setPartnerIntakeLimits(limits: PartnerIntakeLimits): Promise<void> {
    if (limits.intake === null && limits.newVinsPerDay === null) {
      if (!this.sql.partnerById.get(limits.partnerId)) throw new TrailwireError('not_found', `no partner ${limits.partnerId}`);
      this.sql.deletePartnerIntakeLimits.run(limits.partnerId);
      return;
    }
    insertOrExplain(
      () =>
        this.sql.upsertPartnerIntakeLimits.run(...partnerIntakeLimitsValues(limits)),
      { missing: `no partner ${limits.partnerId}` },
    );
  }

  async getPartnerIntakeLimits(partnerId: string): Promise<PartnerIntakeLimits | null> {
    const row = this.sql.partnerIntakeLimits.get(partnerId);
    return row ? toPartnerIntakeLimits(row) : null;
  }

  async vinOwner(vin: string): Promise<VinOwner> {
    const row = this.sql.vinOwner.get(vin);
    return row === undefined ? { known: false, customerId: null } : { known: true, customerId: row.customer_id };
  }

  async setDeviceActive(deviceId: string, active: boolean, at: number): Promise<Trailer | null> {
    this.trailerRows.clear();
    return this.setDeviceActiveTransaction.immediate(deviceId, active, at);
  }

  /** Switches the device and recounts its trailer at once, so the status never counts a switched-off device. */
  private switchDevice(deviceId: string, active: boolean, at: number): Trailer | null {
    const { sql } = this;
    const device = sql.deviceTrailerId.get(deviceId);
    if (device === undefined) return null;
    sql.setDeviceActive.run(active ? 1 : 0, deviceId);
    this.recountTrailerStatus(device.trailer_id, at);
    return toTrailer(sql.trailerById.get(device.trailer_id)!);
  }

  /** Recomputes a trailer's device counts and status from its devices; the rules are the core's. */
  /** Recounts the trailer's status; answers whether its name changed. */
  private recountTrailerStatus(trailerId: string, at: number): boolean {
    const { sql } = this;
    const trailer = sql.trailerById.get(trailerId)!;
    // Counts cover every device whose operator flag is on; the counting and naming rules are the core's.
    const counts = countDeviceStates(expandStateCounts(sql.deviceStateCounts.all(trailerId)));
    const status = deriveTrailerStatus({ statusName: trailer.status_name, statusDate: trailer.status_date }, counts, at);
    sql.updateTrailerStatus.run(status.statusName, status.statusDate, status.faultedDevices, status.warningDevices, trailerId);
    return status.statusName !== trailer.status_name;
  }

  // --- customer reads ---------------------------------------------------------------------------

  async listFleets(customerId: string, page: IdPageQuery<number>): Promise<Fleet[]> {
    return this.sql.customerFleets.all(customerId, page.afterId ?? 0, page.limit).map(toFleet);
  }

  async getFleet(customerId: string, fleetId: number): Promise<Fleet | null> {
    return toFleetOrNull(this.sql.customerFleet.get(fleetId, customerId));
  }

  async listTrailers(customerId: string, fleetId: number, page: IdPageQuery & ActiveFilter): Promise<Trailer[]> {
    const list = page.activeOnly ? this.sql.customerActiveTrailers : this.sql.customerTrailers;
    return list.all(fleetId, customerId, page.afterId ?? '', page.limit).map(toTrailer);
  }

  async getTrailer(customerId: string, trailerId: string): Promise<Trailer | null> {
    return toTrailerOrNull(this.sql.customerTrailer.get(trailerId, customerId));
  }

  async listGps(customerId: string, trailerId: string, page: TimePageQuery): Promise<Sequenced<GpsFix>[]> {
    return this.sql.customerGps.all({ ...timeBounds(page), customerId, sourceId: trailerId }).map((row) => ({
      key: { timestamp: row.timestamp, seq: row.seq },
      record: toGpsFix(row),
    }));
  }

  async nextFleetTrailerWithGps(customerId: string, fleetId: number, afterTrailerId: string, range: { from: number; to: number }): Promise<Trailer | null> {
    return toTrailerOrNull(this.sql.nextFleetTrailerWithGps.get({ fleetId, customerId, afterId: afterTrailerId, from: range.from, to: range.to }));
  }

  async listDevices(customerId: string, trailerId: string, page: IdPageQuery & ActiveFilter): Promise<Device[]> {
    const list = page.activeOnly ? this.sql.customerActiveDevices : this.sql.customerDevices;
    return list
      .all({ trailerId, customerId, afterId: page.afterId ?? '', limit: page.limit, staleBefore: page.staleBefore })
      .map(toDevice);
  }

  async getDevice(customerId: string, deviceId: string, staleBefore: number = NEVER_STALE): Promise<Device | null> {
    const row = this.sql.customerDevice.get({ deviceId, customerId, staleBefore });
    return row === undefined ? null : toDevice(row);
  }

  async listDeviceReadings(customerId: string, deviceId: string, page: TimePageQuery): Promise<Sequenced<DeviceReading>[]> {
    return this.sql.customerDeviceReadings.all({ ...timeBounds(page), customerId, sourceId: deviceId }).map((row) => ({
      key: { timestamp: row.timestamp, seq: row.seq },
      record: {
        deviceId: row.device_id,
        timestamp: row.timestamp,
        metrics: JSON.parse(row.metrics) as Record<string, number>,
        state: { isWarning: isTrue(row.is_warning), isFault: isTrue(row.is_fault) },
      },
    }));
  }

  async listCargosafe(customerId: string, page: IdPageQuery): Promise<CargosafeUnit[]> {
    return this.sql.customerUnits.all({ customerId, afterId: page.afterId ?? '', limit: page.limit }).map(toCargosafeUnit);
  }

  async getCargosafe(customerId: string, unitId: string): Promise<CargosafeUnit | null> {
    const row = this.sql.customerUnit.get(unitId, customerId);
    return row === undefined ? null : toCargosafeUnit(row);
  }

  async listCargosafeReadings(customerId: string, unitId: string, page: TimePageQuery): Promise<Sequenced<CargosafeReading>[]> {
    return this.sql.customerUnitReadings.all({ ...timeBounds(page), customerId, sourceId: unitId }).map((row) => ({
      key: { timestamp: row.timestamp, seq: row.seq },
      record: toCargosafeReading(row.unit_id, row),
    }));
  }

  // --- operator reads (the `trailwire ... list` commands) -----------------------------------------

  async listCustomers(page: IdPageQuery): Promise<Customer[]> {
    return this.sql.operatorCustomers.all(page.afterId ?? '', page.limit).map(toCustomer);
  }

  async listPartners(page: IdPageQuery): Promise<Partner[]> {
    return this.sql.operatorPartners.all(page.afterId ?? '', page.limit).map(toPartner);
  }

  async listAllFleets(query: IdPageQuery<number> & { customerId?: string }): Promise<Fleet[]> {
    const rows =
      query.customerId === undefined
        ? this.sql.operatorFleets.all(query.afterId ?? 0, query.limit)
        : this.sql.customerFleets.all(query.customerId, query.afterId ?? 0, query.limit);
    return rows.map(toFleet);
  }

  async listAllTrailers(query: IdPageQuery & { scope: TrailerScope }): Promise<OperatorTrailer[]> {
    const afterId = query.afterId ?? '';
    const { scope } = query;
    const rows =
      scope.kind === 'fleet'
        ? this.sql.operatorFleetTrailers.all(scope.fleetId, afterId, query.limit)
        : scope.kind === 'unassigned'
          ? this.sql.operatorUnassignedTrailers.all(afterId, query.limit)
          : this.sql.operatorTrailers.all(afterId, query.limit);
    return rows.map(toOperatorTrailer);
  }

  async getAnyTrailer(trailerId: string): Promise<OperatorTrailer | null> {
    const row = this.sql.operatorTrailer.get(trailerId);
    return row === undefined ? null : toOperatorTrailer(row);
  }

  async listTrailerDevices(trailerId: string, page: IdPageQuery): Promise<Device[]> {
    return this.sql.operatorDevices.all(trailerId, page.afterId ?? '', page.limit).map(toDevice);
  }

  async listTrailerGps(trailerId: string, page: TimePageQuery): Promise<Sequenced<GpsFix>[]> {
    return this.sql.operatorGps.all({ ...timeBounds(page), sourceId: trailerId }).map((row) => ({
      key: { timestamp: row.timestamp, seq: row.seq },
      record: toGpsFix(row),
    }));
  }

  // --- telemetry writes -------------------------------------------------------------------------

  async applyTelemetry(item: TelemetryBatch): Promise<AppliedTelemetry> {
    return (await this.applyTelemetryBatch([item])).get(item.vin)!;
  }

  async applyTelemetryBatch(items: readonly TelemetryBatch[]): Promise<Map<string, AppliedTelemetry>> {
    // Inside a caller's transaction (an intake batch on this connection) this is a savepoint.
    if (items.length === 0) return new Map();
    try {
      return this.applyTelemetryTransaction.immediate(items);
    } catch (error) {
      // A full or failing disk is the store's fault, not the payloads': the worker abandons the round.
      throw storageFaultError(error, 'the store') ?? error;
    }
  }

  /**
   * The body of `applyTelemetryBatch`, in its transaction: each item in order, each trailer looked
   * up once, and each trailer's status recounted and read back once, after its last item.
   */
  private writeTelemetry(items: readonly TelemetryBatch[]): Map<string, AppliedTelemetry> {
    const { sql } = this;
    this.trailerRows.validate();
    const touched = new Map<string, TouchedTrailer>();
    for (const { vin, at } of items) {
      if (touched.has(vin)) continue;
      const known = this.trailersByVin.get(vin) ?? sql.trailerIdentityByVin.get(vin);
      // Only a trailer found is remembered: one created here is rolled back with a failed batch.
      if (known !== undefined) this.rememberTrailer(vin, known);
      const { id, key } = known ?? this.insertMetTrailer(vin, at);
      touched.set(vin, { id, key, created: known === undefined, recount: false, at, row: undefined });
    }
    // In trailer order (each VIN's items keeping theirs): neighbouring writes then land on
    // neighbouring index pages, which halves the cost of a batch of many trailers. Each item's
    // trailer is looked up once, before the sort, not twice per comparison.
    const ordered = items.map((item) => ({ item, trailer: touched.get(item.vin)! })).sort((a, b) => a.trailer.key - b.trailer.key);
    for (const {
      item: { at, telemetry },
      trailer,
    } of ordered) {
      trailer.at = at;
      const trailerId = trailer.id;
      const latestAllowed = at + MAX_READING_LEAD_MS;

      let newest: GpsFix | undefined;
      for (const fix of telemetry.gps) {
        sql.upsertFix.run(trailer.key, fix.timestamp, fix.lat, fix.long, fix.speed, fix.heading);
        // The last of equal timestamps wins, as in the history; a fix from the future never becomes latest.
        if (fix.timestamp <= latestAllowed && (!newest || fix.timestamp >= newest.timestamp)) newest = fix;
      }
      if (newest) this.moveLatestFix(trailer, newest);

      if (telemetry.devices.length > 0) {
        const deviceIds = new Map<string, string>();
        for (const reading of telemetry.devices) {
          const deviceId = this.findOrCreateDevice(deviceIds, trailerId, reading, at);
          const warning = reading.state.isWarning ? 1 : 0;
          const fault = reading.state.isFault ? 1 : 0;
          sql.upsertDeviceReading.run(deviceId, reading.timestamp, JSON.stringify(reading.metrics), warning, fault);
          // Only a reading at or after the device's own moves its state, so late payloads cannot roll it back.
          if (reading.timestamp <= latestAllowed) sql.moveDeviceState.run(warning, fault, reading.position, reading.timestamp, deviceId, reading.timestamp);
        }
        trailer.recount = true;
      }

      if (telemetry.cargosafe.length > 0) {
        const unitIds = new Map<string, string>();
        for (const reading of telemetry.cargosafe) {
          const unitId = this.findOrCreateUnit(unitIds, trailerId, reading, at);
          const values = cargosafeValues(reading);
          sql.upsertUnitReading.run(unitId, reading.timestamp, ...values);
          if (reading.timestamp <= latestAllowed) sql.moveUnitLatest.run(reading.timestamp, ...values, unitId, reading.timestamp);
        }
      }
      if (telemetry.devices.length > 0 || telemetry.cargosafe.length > 0) trailer.row = undefined;
    }

    const applied = new Map<string, AppliedTelemetry>();
    const fleets = new Map<number, Fleet | null>();
    const events: WebhookOutboxEvent[] = [];
    // Without endpoints (most stores) a batch pays one probe, and builds no event JSON.
    const toWebhooks = this.webhooks.anyEndpoint();
    for (const [vin, trailer] of touched) {
      const statusChanged = trailer.recount && this.recountTrailerStatus(trailer.id, trailer.at);
      // The row the last fix move left is current unless something else changed it since.
      const after = (!trailer.recount && trailer.row) || sql.trailerById.get(trailer.id)!;
      // A created trailer goes with a rolled-back batch, and a recounted status may: neither is kept.
      if (trailer.created || trailer.recount) this.trailerRows.forget(trailer.key);
      else this.trailerRows.set(trailer.key, after);
      let fleet: Fleet | null = null;
      if (after.fleet_id !== null) {
        if (!fleets.has(after.fleet_id)) fleets.set(after.fleet_id, toFleetOrNull(sql.fleetById.get(after.fleet_id)));
        fleet = fleets.get(after.fleet_id)!;
      }
      applied.set(vin, { trailer: toTrailer(after), fleet, createdTrailer: trailer.created, statusChanged });
      if (toWebhooks) events.push(...webhookEventsOf(applied.get(vin)!, trailer.at));
    }
    this.webhooks.writeOutbox(events, Math.max(...items.map((item) => item.at)));
    return applied;
  }

  /**
   * Creates the trailer of a VIN met for the first time, unassigned. A plain INSERT: its key is the
   * rowid, so nothing is read back (an `INSERT … RETURNING` runs as a trigger, with a statement
   * journal opened and closed around it).
   */
  private insertMetTrailer(vin: string, at: number): TrailerIdentity {
    const id = this.ids();
    return { id, key: Number(this.sql.insertMetTrailer.run(id, vin, at, at).lastInsertRowid) };
  }

  /**
   * Moves the trailer's latest fix to `fix` where `fix` is newer, and keeps the row it then has in
   * `trailer.row` (left as it was when the stored fix is newer and the row came from the cache: read
   * again at the end of the batch). The rest of the row is known from this batch, or was seen by an
   * earlier one (`trailer-row-cache.ts`), or is read by key before the move: a plain read and a plain
   * UPDATE, not an `UPDATE … RETURNING`, which SQLite runs as a trigger writing a temporary table,
   * with a statement journal opened and closed around it in the batch's transaction.
   *
   * The row takes the fix in place rather than as a copy: the cached row of a trailer lives until its
   * next payload, so a copy per payload survived two scavenges each and was promoted, to die in the old
   * space (processing 20,000 VINs six times: scavenges 253 and 383 ms with copies, 144 and 181 in place,
   * and 9.8–13.3 µs a payload instead of 10.5–14.1 after the first two passes). The row never leaves
   * the store (`toTrailer` copies it), and its fix columns are never trusted from the cache anyway.
   */
  private moveLatestFix(trailer: TouchedTrailer, fix: GpsFix): void {
    const cached = trailer.row ?? (trailer.created ? undefined : this.trailerRows.get(trailer.key));
    const known = cached ?? trailerRowOf(this.sql.trailerValuesByKey.get(trailer.key)!);
    if (this.sql.moveLatestFix.run(fix.timestamp, fix.lat, fix.long, fix.speed, fix.heading, trailer.key, fix.timestamp).changes > 0) {
      known.gps_timestamp = fix.timestamp;
      known.gps_lat = fix.lat;
      known.gps_long = fix.long;
      known.gps_speed = fix.speed;
      known.gps_heading = fix.heading;
      trailer.row = known;
    }
    // Read in this transaction and left unchanged by the move: the row as it is.
    else if (cached === undefined) trailer.row = known;
  }

  /**
   * A VIN's trailer id and key never change and trailers are never deleted, so the batch write
   * remembers what it found rather than look each up again (bounded: forgotten all at once past a million).
   */
  private rememberTrailer(vin: string, trailer: TrailerIdentity): void {
    if (this.trailersByVin.size >= 1_000_000) this.trailersByVin.clear();
    this.trailersByVin.set(vin, trailer);
  }

  private findOrCreateDevice(cache: Map<string, string>, trailerId: string, reading: CanonicalDeviceReading, at: number): string {
    const key = `${reading.kind}\u0000${reading.serial}`;
    let id = cache.get(key) ?? this.sql.deviceIdByKey.get(trailerId, reading.kind, reading.serial)?.id;
    if (id === undefined) {
      id = this.ids();
      this.sql.insertDevice.run(id, trailerId, reading.kind, reading.serial, reading.position, at);
    }
    cache.set(key, id);
    return id;
  }

  private findOrCreateUnit(cache: Map<string, string>, trailerId: string, reading: CanonicalCargosafeReading, at: number): string {
    let id = cache.get(reading.serial) ?? this.sql.unitIdByKey.get(trailerId, reading.serial)?.id;
    if (id === undefined) {
      id = this.ids();
      this.sql.insertUnit.run(id, trailerId, reading.serial, trailerId, at);
    }
    cache.set(reading.serial, id);
    return id;
  }

  // --- lifecycle --------------------------------------------------------------------------------

  async ping(): Promise<void> {
    if (!this.db.open) throw new TrailwireError('unavailable', 'the SQLite store is closed');
    this.sql.ping.get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

// --- statements -----------------------------------------------------------------------------------

interface DeviceReadingRow {
  seq: number;
  device_id: string;
  timestamp: number;
  metrics: string;
  is_warning: number;
  is_fault: number;
}
/** Named parameters of a time page (see `timeBounds`). */
interface TimePageParams {
  sourceId: string;
  customerId: string;
  to: number;
  afterTimestamp: number;
  afterSeq: number;
  limit: number;
}
interface DevicePageParams {
  trailerId: string;
  customerId: string;
  afterId: string;
  limit: number;
  staleBefore: number;
}

const TRAILER_COLUMNS = `t.id, t.fleet_id, t.unit_id, t.vin, t.active, t.status_name, t.status_date, t.faulted_devices,
  t.warning_devices, t.gps_timestamp, t.gps_lat, t.gps_long, t.gps_speed, t.gps_heading, t.created_at`;

/** A trailer row as a raw statement answers it: the values of TRAILER_COLUMNS, in their order. */
type TrailerRowValues = [string, number | null, string | null, string, SqlBool, StatusName, number, number, number, number | null, number | null, number | null, number | null, Heading | null, number];

function trailerRowOf(values: TrailerRowValues): TrailerRow {
  const [id, fleet_id, unit_id, vin, active, status_name, status_date, faulted_devices, warning_devices, gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading, created_at] = values;
  return { id, fleet_id, unit_id, vin, active, status_name, status_date, faulted_devices, warning_devices, gps_timestamp, gps_lat, gps_long, gps_speed, gps_heading, created_at };
}

/** What names a trailer: its id, and the key its GPS fixes name it by. */
interface TrailerIdentity {
  id: string;
  key: number;
}

/**
 * A device is active when its operator flag is on and it has reported since `staleBefore`, or, never
 * having reported, was created since then. `active` on every returned Device uses this same rule, so the
 * field and the `activeOnly` filter always agree.
 */
const DEVICE_COLUMNS = `d.id, d.trailer_id, d.kind, d.serial, d.position, d.is_warning, d.is_fault, d.last_seen_at,
  d.created_at, (d.active = 1 AND COALESCE(d.last_seen_at, d.created_at) >= :staleBefore) AS effective_active`;

const UNIT_COLUMNS = `u.id, u.trailer_id, u.serial, u.active, u.last_seen_at, u.door_open, u.load_percent,
  u.temperature_c, u.humidity_percent, u.created_at`;

/**
 * Time pages: strictly after (afterTimestamp, afterSeq) and before `to`, in (timestamp, seq) order, on
 * the UNIQUE (source, timestamp) index whose implicit last column is the rowid `seq`. The seek starts at
 * the cursor: `timestamp >= :afterTimestamp` repeats the row value's first column as a plain bound, so
 * the seek does not hang on the planner's row-value support. There is deliberately no `timestamp >= :from`
 * beside it: SQLite seeks on one lower bound, and on that one it would walk every row up to the cursor,
 * so a deep page would cost its depth. `timeBounds` folds `from` into the cursor instead.
 */
const TIME_PAGE = `g.timestamp >= :afterTimestamp AND g.timestamp < :to AND (g.timestamp, g.seq) > (:afterTimestamp, :afterSeq)
  ORDER BY g.timestamp, g.seq LIMIT :limit`;

/**
 * The SQL of every statement the store prepares, by name (for the query-plan test). Typed loosely on
 * purpose: the statements' own types name a namespace of better-sqlite3's declarations that a
 * published declaration file cannot reach.
 */
export function storeStatementSources(db: Database.Database): Record<string, string> {
  return Object.fromEntries(Object.entries(prepareStoreStatements(db)).map(([name, statement]) => [name, statement.source]));
}

/** Prepares every statement of the store once per connection. */
function prepareStoreStatements(db: Database.Database) {
  return {
    ping: db.prepare('SELECT 1'),

    insertPartner: db.prepare<[string, string, string, string, number], PartnerRow>(
      'INSERT INTO partners (id, name, product, key_hash, created_at) VALUES (?, ?, ?, ?, ?) RETURNING *',
    ),
    insertCustomer: db.prepare<[string, string, string, number], PrincipalRow>(
      'INSERT INTO customers (id, name, key_hash, created_at) VALUES (?, ?, ?, ?) RETURNING *',
    ),
    partnerByKeyHash: db.prepare<[string], PartnerRow>('SELECT * FROM partners WHERE key_hash = ?'),
    customerByKeyHash: db.prepare<[string], PrincipalRow>('SELECT * FROM customers WHERE key_hash = ?'),
    partnerById: db.prepare<[string], PartnerRow>('SELECT * FROM partners WHERE id = ?'),
    customerById: db.prepare<[string], PrincipalRow>('SELECT * FROM customers WHERE id = ?'),
    rotatePartnerKey: db.prepare<[string, number, string, number], { key_version: number }>(
      'UPDATE partners SET key_hash = ?, rotated_at = ?, key_version = key_version + 1 WHERE id = ? AND key_version = ? RETURNING key_version',
    ),
    rotateCustomerKey: db.prepare<[string, number, string, number], { key_version: number }>(
      'UPDATE customers SET key_hash = ?, rotated_at = ?, key_version = key_version + 1 WHERE id = ? AND key_version = ? RETURNING key_version',
    ),

    signingKeys: db.prepare<[], SigningKeyRow>(
      `SELECT ${SIGNING_KEY_COLUMNS} FROM signing_keys ORDER BY created_at, rowid`,
    ),
    insertSigningKey: db.prepare<[string, string, string | null, string | null, number]>(
      'INSERT OR IGNORE INTO signing_keys (kid, alg, private_key_pem, public_key_pem, created_at) VALUES (?, ?, ?, ?, ?)',
    ),
    retireOtherSigningKeys: db.prepare<[number, string]>('UPDATE signing_keys SET retired_at = ? WHERE kid <> ? AND retired_at IS NULL'),
    revokeRetiredSigningKeys: db.prepare<[number], { kid: string }>(
      'UPDATE signing_keys SET revoked_at = ? WHERE retired_at IS NOT NULL AND revoked_at IS NULL RETURNING kid',
    ),
    insertSecret: db.prepare<[string, string]>('INSERT OR IGNORE INTO secrets (name, value) VALUES (?, ?)'),
    secretByName: db.prepare<[string], { value: string }>('SELECT value FROM secrets WHERE name = ?'),

    insertFleet: db.prepare<[string, string, number], FleetRow>(
      'INSERT INTO fleets (customer_id, name, created_at) VALUES (?, ?, ?) RETURNING *',
    ),
    fleetById: db.prepare<[number], FleetRow>('SELECT * FROM fleets WHERE id = ?'),
    customerFleet: db.prepare<[number, string], FleetRow>('SELECT * FROM fleets WHERE id = ? AND customer_id = ?'),
    customerFleets: db.prepare<[string, number, number], FleetRow>(
      'SELECT * FROM fleets WHERE customer_id = ? AND id > ? ORDER BY id LIMIT ?',
    ),

    trailerById: db.prepare<[string], TrailerRow>(`SELECT ${TRAILER_COLUMNS} FROM trailers t WHERE t.id = ?`),
    trailerByVin: db.prepare<[string], TrailerRow>(`SELECT ${TRAILER_COLUMNS} FROM trailers t WHERE t.vin = ?`),
    trailerIdentityByVin: db.prepare<[string], TrailerIdentity>('SELECT id, key FROM trailers WHERE vin = ?'),
    insertTrailer: db.prepare<[string, number | null, string | null, string, number, number], TrailerRow & TrailerIdentity>(
      `INSERT INTO trailers (id, fleet_id, unit_id, vin, status_name, status_date, created_at)
       VALUES (?, ?, ?, ?, 'OK', ?, ?) RETURNING key, ${TRAILER_COLUMNS.replaceAll('t.', '')}`,
    ),
    insertMetTrailer: db.prepare<[string, string, number, number]>(
      `INSERT INTO trailers (id, vin, status_name, status_date, created_at) VALUES (?, ?, 'OK', ?, ?)`,
    ),
    assignTrailer: db.prepare<[number, string | null, string], TrailerRow>(
      `UPDATE trailers SET fleet_id = ?, unit_id = ? WHERE id = ? RETURNING ${TRAILER_COLUMNS.replaceAll('t.', '')}`,
    ),
    setTrailerActive: db.prepare<[number, string]>('UPDATE trailers SET active = ? WHERE id = ?'),
    importTrailer: db.prepare<[string, number, string | null, string, number, number, number]>(
      `INSERT INTO trailers (id, fleet_id, unit_id, vin, active, status_name, status_date, created_at) VALUES (?, ?, ?, ?, ?, 'OK', ?, ?)`,
    ),
    importAssignTrailer: db.prepare<[number, string | null, number, string]>(
      'UPDATE trailers SET fleet_id = ?, unit_id = ?, active = ? WHERE id = ? AND fleet_id IS NULL',
    ),
    importUpdateTrailer: db.prepare<[string | null, number, string, number]>('UPDATE trailers SET unit_id = ?, active = ? WHERE id = ? AND fleet_id = ?'),
    insertTrailerChange: db.prepare<[string, number]>('INSERT INTO trailer_changes (trailer_id, at) VALUES (?, ?)'),
    pruneTrailerChanges: db.prepare<[number]>('DELETE FROM trailer_changes WHERE at < ?'),
    latestTrailerChange: db.prepare<[], { seq: number }>('SELECT MAX(seq) AS seq FROM trailer_changes'),
    trailerChangesAfter: db.prepare<[number, number], { seq: number; trailer_id: string }>(
      'SELECT seq, trailer_id FROM trailer_changes WHERE seq > ? ORDER BY seq LIMIT ?',
    ),
    customerTrailer: db.prepare<[string, string], TrailerRow>(
      `SELECT ${TRAILER_COLUMNS} FROM trailers t JOIN fleets f ON f.id = t.fleet_id WHERE t.id = ? AND f.customer_id = ?`,
    ),
    // Each trailer of the fleet after the given id is one probe of gps_fixes' (trailer_key, timestamp) index.
    nextFleetTrailerWithGps: db.prepare<{ fleetId: number; customerId: string; afterId: string; from: number; to: number }, TrailerRow>(
      `SELECT ${TRAILER_COLUMNS} FROM trailers t JOIN fleets f ON f.id = t.fleet_id
       WHERE t.fleet_id = :fleetId AND f.customer_id = :customerId AND t.id > :afterId
         AND EXISTS (SELECT 1 FROM gps_fixes g WHERE g.trailer_key = t.key AND g.timestamp >= :from AND g.timestamp < :to)
       ORDER BY t.id LIMIT 1`,
    ),
    customerTrailers: db.prepare<[number, string, string, number], TrailerRow>(
      `SELECT ${TRAILER_COLUMNS} FROM trailers t JOIN fleets f ON f.id = t.fleet_id
       WHERE t.fleet_id = ? AND f.customer_id = ? AND t.id > ? ORDER BY t.id LIMIT ?`,
    ),
    // The literal `t.active = 1` lets SQLite use the partial index trailers_active_by_fleet.
    customerActiveTrailers: db.prepare<[number, string, string, number], TrailerRow>(
      `SELECT ${TRAILER_COLUMNS} FROM trailers t JOIN fleets f ON f.id = t.fleet_id
       WHERE t.fleet_id = ? AND f.customer_id = ? AND t.active = 1 AND t.id > ? ORDER BY t.id LIMIT ?`,
    ),
    // A fix becomes the trailer's latest only when it is at least as new as the one there (a late fix leaves it).
    moveLatestFix: db.prepare<[number, number, number, number, string, number, number]>(
      `UPDATE trailers SET gps_timestamp = ?, gps_lat = ?, gps_long = ?, gps_speed = ?, gps_heading = ?
       WHERE key = ? AND (gps_timestamp IS NULL OR gps_timestamp <= ?)`,
    ),
    // Answers the row as values (see trailerRowOf): better-sqlite3 builds a row object property by
    // property, which cost more than the update itself here.
    trailerValuesByKey: db.prepare<[number], TrailerRowValues>(`SELECT ${TRAILER_COLUMNS} FROM trailers t WHERE t.key = ?`).raw(),
    dataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
    updateTrailerStatus: db.prepare<[string, number, number, number, string]>(
      'UPDATE trailers SET status_name = ?, status_date = ?, faulted_devices = ?, warning_devices = ? WHERE id = ?',
    ),
    deviceStateCounts: db.prepare<[string], StateCountRow>(
      `SELECT is_warning, is_fault, COUNT(*) AS n FROM devices WHERE trailer_id = ? AND active = 1
       GROUP BY is_warning, is_fault`,
    ),

    // Last received wins at one instant; an identical repeat writes nothing (and keeps its seq).
    upsertFix: db.prepare<[number, number, number, number, number, string]>(
      `INSERT INTO gps_fixes (trailer_key, timestamp, lat, long, speed, heading) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (trailer_key, timestamp) DO UPDATE SET lat = excluded.lat, long = excluded.long, speed = excluded.speed, heading = excluded.heading
       WHERE (lat, long, speed, heading) IS NOT (excluded.lat, excluded.long, excluded.speed, excluded.heading)`,
    ),
    customerGps: db.prepare<TimePageParams, GpsRow & { seq: number }>(
      `SELECT g.seq, g.timestamp, g.lat, g.long, g.speed, g.heading
       FROM trailers t JOIN fleets f ON f.id = t.fleet_id JOIN gps_fixes g ON g.trailer_key = t.key
       WHERE t.id = :sourceId AND f.customer_id = :customerId AND ${TIME_PAGE}`,
    ),

    deviceIdByKey: db.prepare<[string, string, string], { id: string }>(
      'SELECT id FROM devices WHERE trailer_id = ? AND kind = ? AND serial = ?',
    ),
    insertDevice: db.prepare<[string, string, string, string, string | null, number]>(
      'INSERT INTO devices (id, trailer_id, kind, serial, position, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    moveDeviceState: db.prepare<[number, number, string | null, number, string, number]>(
      `UPDATE devices SET is_warning = ?, is_fault = ?, position = COALESCE(?, position), last_seen_at = ?
       WHERE id = ? AND (last_seen_at IS NULL OR last_seen_at <= ?)`,
    ),
    upsertDeviceReading: db.prepare<[string, number, string, number, number]>(
      `INSERT INTO device_readings (device_id, timestamp, metrics, is_warning, is_fault) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (device_id, timestamp) DO UPDATE SET metrics = excluded.metrics, is_warning = excluded.is_warning, is_fault = excluded.is_fault
       WHERE (metrics, is_warning, is_fault) IS NOT (excluded.metrics, excluded.is_warning, excluded.is_fault)`,
    ),
    setDeviceActive: db.prepare<[number, string]>('UPDATE devices SET active = ? WHERE id = ?'),
    deviceTrailerId: db.prepare<[string], { trailer_id: string }>('SELECT trailer_id FROM devices WHERE id = ?'),
    customerDevice: db.prepare<{ deviceId: string; customerId: string; staleBefore: number }, DeviceRow>(
      `SELECT ${DEVICE_COLUMNS} FROM devices d JOIN trailers t ON t.id = d.trailer_id JOIN fleets f ON f.id = t.fleet_id
       WHERE d.id = :deviceId AND f.customer_id = :customerId`,
    ),
    customerDevices: db.prepare<DevicePageParams, DeviceRow>(
      `SELECT ${DEVICE_COLUMNS} FROM devices d JOIN trailers t ON t.id = d.trailer_id JOIN fleets f ON f.id = t.fleet_id
       WHERE d.trailer_id = :trailerId AND t.id = :trailerId AND f.customer_id = :customerId AND d.id > :afterId
       ORDER BY d.id LIMIT :limit`,
    ),
    // Staleness depends on the query's time, so no index can hold it; the partial index bounds the scan
    // to this trailer's enabled devices (a few dozen sensors), not the table.
    customerActiveDevices: db.prepare<DevicePageParams, DeviceRow>(
      `SELECT ${DEVICE_COLUMNS} FROM devices d JOIN trailers t ON t.id = d.trailer_id JOIN fleets f ON f.id = t.fleet_id
       WHERE d.trailer_id = :trailerId AND t.id = :trailerId AND f.customer_id = :customerId AND d.active = 1
         AND COALESCE(d.last_seen_at, d.created_at) >= :staleBefore AND d.id > :afterId
       ORDER BY d.id LIMIT :limit`,
    ),
    customerDeviceReadings: db.prepare<TimePageParams, DeviceReadingRow>(
      `SELECT g.seq, g.device_id, g.timestamp, g.metrics, g.is_warning, g.is_fault
       FROM device_readings g JOIN devices d ON d.id = g.device_id JOIN trailers t ON t.id = d.trailer_id
         JOIN fleets f ON f.id = t.fleet_id
       WHERE d.id = :sourceId AND g.device_id = :sourceId AND f.customer_id = :customerId AND ${TIME_PAGE}`,
    ),

    unitIdByKey: db.prepare<[string, string], { id: string }>('SELECT id FROM cargosafe_units WHERE trailer_id = ? AND serial = ?'),
    insertUnit: db.prepare<[string, string, string, string, number]>(
      `INSERT INTO cargosafe_units (id, trailer_id, serial, customer_id, created_at)
       VALUES (?, ?, ?, (SELECT f.customer_id FROM trailers t JOIN fleets f ON f.id = t.fleet_id WHERE t.id = ?), ?)`,
    ),
    upsertUnitReading: db.prepare<[string, number, number, number, number, number]>(
      `INSERT INTO cargosafe_readings (unit_id, timestamp, door_open, load_percent, temperature_c, humidity_percent)
       VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (unit_id, timestamp) DO UPDATE SET door_open = excluded.door_open, load_percent = excluded.load_percent,
         temperature_c = excluded.temperature_c, humidity_percent = excluded.humidity_percent
       WHERE (door_open, load_percent, temperature_c, humidity_percent)
         IS NOT (excluded.door_open, excluded.load_percent, excluded.temperature_c, excluded.humidity_percent)`,
    ),
    moveUnitLatest: db.prepare<[number, number, number, number, number, string, number]>(
      `UPDATE cargosafe_units SET last_seen_at = ?, door_open = ?, load_percent = ?, temperature_c = ?, humidity_percent = ?
       WHERE id = ? AND (last_seen_at IS NULL OR last_seen_at <= ?)`,
    ),
    // customer_id selects the index range; the join through fleets is what decides visibility.
    customerUnit: db.prepare<[string, string], CargosafeUnitRow>(
      `SELECT ${UNIT_COLUMNS} FROM cargosafe_units u JOIN trailers t ON t.id = u.trailer_id JOIN fleets f ON f.id = t.fleet_id
       WHERE u.id = ? AND f.customer_id = ?`,
    ),
    customerUnits: db.prepare<{ customerId: string; afterId: string; limit: number }, CargosafeUnitRow>(
      `SELECT ${UNIT_COLUMNS} FROM cargosafe_units u JOIN trailers t ON t.id = u.trailer_id JOIN fleets f ON f.id = t.fleet_id
       WHERE u.customer_id = :customerId AND f.customer_id = :customerId AND u.id > :afterId ORDER BY u.id LIMIT :limit`,
    ),
    customerUnitReadings: db.prepare<TimePageParams, CargosafeReadingRow>(
      `SELECT g.seq, g.unit_id, g.timestamp, g.door_open, g.load_percent, g.temperature_c, g.humidity_percent
       FROM cargosafe_readings g JOIN cargosafe_units u ON u.id = g.unit_id JOIN trailers t ON t.id = u.trailer_id
         JOIN fleets f ON f.id = t.fleet_id
       WHERE u.id = :sourceId AND g.unit_id = :sourceId AND f.customer_id = :customerId AND ${TIME_PAGE}`,
    ),

    ...prepareOperatorStatements(db),
    ...preparePartnerPolicyStatements(db),
  };
}

/**
 * The newest report of a trailer's devices and of its cargosafe units, each one index range of that
 * trailer (`toOperatorTrailer` takes the newest of these and the latest fix).
 */
const OPERATOR_TRAILER_COLUMNS = `${TRAILER_COLUMNS},
  (SELECT MAX(d.last_seen_at) FROM devices d WHERE d.trailer_id = t.id) AS devices_seen_at,
  (SELECT MAX(u.last_seen_at) FROM cargosafe_units u WHERE u.trailer_id = t.id) AS units_seen_at`;

/** The operator's reads: across customers, so none joins through `fleets.customer_id`. */
function prepareOperatorStatements(db: Database.Database) {
  return {
    operatorCustomers: db.prepare<[string, number], PrincipalRow>('SELECT * FROM customers WHERE id > ? ORDER BY id LIMIT ?'),
    operatorPartners: db.prepare<[string, number], PartnerRow>('SELECT * FROM partners WHERE id > ? ORDER BY id LIMIT ?'),
    operatorFleets: db.prepare<[number, number], FleetRow>('SELECT * FROM fleets WHERE id > ? ORDER BY id LIMIT ?'),
    operatorTrailers: db.prepare<[string, number], OperatorTrailerRow>(
      `SELECT ${OPERATOR_TRAILER_COLUMNS} FROM trailers t WHERE t.id > ? ORDER BY t.id LIMIT ?`,
    ),
    operatorFleetTrailers: db.prepare<[number, string, number], OperatorTrailerRow>(
      `SELECT ${OPERATOR_TRAILER_COLUMNS} FROM trailers t WHERE t.fleet_id = ? AND t.id > ? ORDER BY t.id LIMIT ?`,
    ),
    // `IS NULL` is an equality on trailers_by_fleet (fleet_id, id): the unassigned VINs are one index range.
    operatorUnassignedTrailers: db.prepare<[string, number], OperatorTrailerRow>(
      `SELECT ${OPERATOR_TRAILER_COLUMNS} FROM trailers t WHERE t.fleet_id IS NULL AND t.id > ? ORDER BY t.id LIMIT ?`,
    ),
    operatorTrailer: db.prepare<[string], OperatorTrailerRow>(`SELECT ${OPERATOR_TRAILER_COLUMNS} FROM trailers t WHERE t.id = ?`),
    operatorDevices: db.prepare<[string, string, number], DeviceRow>(
      `SELECT d.id, d.trailer_id, d.kind, d.serial, d.position, d.is_warning, d.is_fault, d.last_seen_at, d.created_at,
         d.active AS effective_active
       FROM devices d WHERE d.trailer_id = ? AND d.id > ? ORDER BY d.id LIMIT ?`,
    ),
    operatorGps: db.prepare<Omit<TimePageParams, 'customerId'>, GpsRow & { seq: number }>(
      `SELECT g.seq, g.timestamp, g.lat, g.long, g.speed, g.heading
       FROM trailers t JOIN gps_fixes g ON g.trailer_key = t.key WHERE t.id = :sourceId AND ${TIME_PAGE}`,
    ),
  };
}

/** The customers' grants of partners and the per-partner intake overrides (issue 29). */
function preparePartnerPolicyStatements(db: Database.Database) {
  return {
    insertPartnerGrant: db.prepare<[string, string, number]>(
      'INSERT INTO partner_grants (customer_id, partner_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
    ),
    deletePartnerGrant: db.prepare<[string, string]>('DELETE FROM partner_grants WHERE customer_id = ? AND partner_id = ?'),
    partnerGrant: db.prepare<[string, string], PartnerGrantRow>('SELECT * FROM partner_grants WHERE customer_id = ? AND partner_id = ?'),
    customerPartnerGrants: db.prepare<[string], PartnerGrantRow>('SELECT * FROM partner_grants WHERE customer_id = ? ORDER BY partner_id'),
    partnerPartnerGrants: db.prepare<[string], PartnerGrantRow>(
      'SELECT * FROM partner_grants INDEXED BY partner_grants_by_partner WHERE partner_id = ? ORDER BY customer_id',
    ),
    allPartnerGrants: db.prepare<[], PartnerGrantRow>('SELECT * FROM partner_grants ORDER BY customer_id, partner_id'),
    upsertPartnerIntakeLimits: db.prepare<[string, number | null, number | null, number | null, number]>(
      `INSERT INTO partner_intake_limits (partner_id, intake_requests, intake_window_seconds, new_vins_per_day, updated_at)
       VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (partner_id) DO UPDATE SET intake_requests = excluded.intake_requests,
         intake_window_seconds = excluded.intake_window_seconds, new_vins_per_day = excluded.new_vins_per_day,
         updated_at = excluded.updated_at`,
    ),
    deletePartnerIntakeLimits: db.prepare<[string]>('DELETE FROM partner_intake_limits WHERE partner_id = ?'),
    partnerIntakeLimits: db.prepare<[string], PartnerIntakeLimitsRow>('SELECT * FROM partner_intake_limits WHERE partner_id = ?'),
    vinOwner: db.prepare<[string], { customer_id: string | null }>('SELECT f.customer_id FROM trailers t LEFT JOIN fleets f ON f.id = t.fleet_id WHERE t.vin = ?'),
  };
}

type Statements = ReturnType<typeof prepareStoreStatements>;

// --- mapping --------------------------------------------------------------------------------------

/**
 * The page's lower bound as one key: (from, 0) precedes every row at or after `from` (seq, a rowid,
 * starts at 1), and a cursor before `from` is overtaken by it, so `from <= timestamp` holds either way.
 */
function timeBounds(page: TimePageQuery): Omit<TimePageParams, 'sourceId' | 'customerId'> {
  const start = { timestamp: page.from, seq: 0 };
  const after = page.after !== undefined && compareKeys(page.after, start) > 0 ? page.after : start;
  return { to: page.to, afterTimestamp: after.timestamp, afterSeq: after.seq, limit: page.limit };
}



function cargosafeValues(reading: CanonicalCargosafeReading): [number, number, number, number] {
  return [reading.doorOpen ? 1 : 0, reading.loadPercent, reading.temperatureC, reading.humidityPercent];
}













// --- errors ---------------------------------------------------------------------------------------

/**
 * Puts the file in WAL mode (a persistent setting: a file already in WAL is left alone). Switching
 * needs the file to itself, and SQLite answers SQLITE_BUSY at once, without its busy handler, while
 * another process is opening the same new file; so this retries until `busyTimeoutMs`.
 */
async function switchToWal(db: Database.Database, busyTimeoutMs: number): Promise<void> {
  const deadline = Date.now() + busyTimeoutMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    try {
      if (db.pragma('journal_mode', { simple: true }) !== 'wal') db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if (!(error instanceof Database.SqliteError && error.code === 'SQLITE_BUSY') || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** Runs a write, turning constraint failures into the store's errors: a duplicate is a conflict, a dangling reference not_found. */
function insertOrExplain<T>(write: () => T, explain: { conflict?: string; missing?: string }): T {
  try {
    return write();
  } catch (error) {
    if (error instanceof Database.SqliteError) {
      const duplicate = error.code === 'SQLITE_CONSTRAINT_UNIQUE' || error.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
      if (duplicate && explain.conflict !== undefined) throw new TrailwireError('conflict', explain.conflict, { cause: error });
      if (error.code === 'SQLITE_CONSTRAINT_FOREIGNKEY' && explain.missing !== undefined) {
        throw new TrailwireError('not_found', explain.missing, { cause: error });
      }
    }
    throw error;
  }
}

function badOption(field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `SqliteStoreOptions.${field} ${message}`, {
    errors: [{ path: field, message }],
  });
}

