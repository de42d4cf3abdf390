/**
 * The scale-out store: `TrailwireStore` on PostgreSQL through a `pg` pool, so that any number of
 * Trailwire processes share one fleet (contract 11). Its semantics are the SQLite store's, rule for
 * rule: customer isolation is part of every read query (through `fleets.customer_id`), each
 * page is one index range, and trailer status policy stays in the core (`deriveTrailerStatus`).
 * What differs is concurrency: instead of one writer at a time, each telemetry write locks its
 * trailers' rows first, so writes for different trailers run in parallel while writes for one trailer
 * (and its assignment to a fleet) take turns; the telemetry write itself, many VINs in a fixed number
 * of set-based statements, is `telemetry-writes.ts`. The lookups intake makes per request (a VIN's
 * owner, a customer's grants) are asked together per event-loop turn, one statement for the turn's
 * keys (`TurnLookup`), so that a busy intake costs the database a round trip a turn, whatever the
 * fleet's size. Every statement names its schema, so several stores,
 * or a store and the tests of another, can live in one database. The pool is exposed for the modules
 * that share the schema (the intake queue).
 */
import type pg from 'pg';
import { webhookEventsOf } from '../../core/webhook-events.ts';
import { PostgresWebhookTables } from './webhook-tables.ts';
import { type Clock, randomIds, systemClock, type IdGenerator } from '../../core/clock.ts';
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
  Partner,
  Principal,
  Trailer,
} from '../../core/model.ts';
import type {
  NewWebhookEndpoint,
  WebhookAttemptOutcome,
  WebhookBatching,
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
} from '../../core/store.ts';
import { TRAILER_CHANGE_RETENTION_MS } from '../../core/store.ts';
import { TurnLookup } from '../../core/turn-lookup.ts';
import { countDeviceStates, deriveTrailerStatus } from '../../core/trailer-status.ts';
import { applyPostgresMigrations, POSTGRES_STORE_COMPONENT, POSTGRES_STORE_MIGRATIONS } from './migrations.ts';
import { KnownVins, telemetryStatements, type TelemetryStatements, writeTelemetryBatch } from './telemetry-writes.ts';
import { createPostgresPool, isSchemaName, queryRow, queryRows, queryRun, quoteSchema, type Statement, withTransaction, writeOrExplain } from './pool.ts';
import {
  compareKeys,
  expandStateCounts,
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

export interface PostgresStoreOptions {
  /** A `postgres://` URL of the database. Required. */
  connectionString: string;
  /** The schema holding Trailwire's tables; created (with the tables) when missing. A lower-case identifier. Default `'public'`. */
  schema?: string;
  /** Connections in the pool at most (shared with the intake queue). Default 10. */
  poolSize?: number;
  /** How long to wait for a new connection before failing, in ms. Default 5000. */
  connectTimeoutMs?: number;
  /**
   * How long a query may go unanswered before it fails as `store_unavailable` (and its connection is
   * dropped), in ms: a database that stops answering costs a request this long at most. Migrations
   * are exempt. Default 10,000.
   */
  queryTimeoutMs?: number;
  /** Ids of the trailers, devices and cargosafe units that `applyTelemetry` creates. Default: random UUIDs. */
  ids?: IdGenerator;
  /** Times the store's own caches (how long it trusts that no webhook endpoint exists). Default: the system clock. */
  clock?: Clock;
}

export const DEFAULT_POSTGRES_STORE_OPTIONS = {
  schema: 'public',
  poolSize: 10,
  connectTimeoutMs: 5000,
  queryTimeoutMs: 10_000,
  ids: randomIds,
  clock: systemClock,
} as const satisfies Omit<Required<PostgresStoreOptions>, 'connectionString'>;

/** The PostgreSQL store, with its pool and schema exposed for modules that share them (the intake queue). */
export interface PostgresStore extends TrailwireStore {
  readonly pool: pg.Pool;
  readonly schema: string;
}

/** Checks the options, naming the first bad field, and fills in the defaults. */
export function resolvePostgresStoreOptions(options: PostgresStoreOptions): Required<PostgresStoreOptions> {
  if (typeof options !== 'object' || options === null) throw badOption('options', 'must be an object');
  // Checked field by field below: callers from plain JavaScript or config files can pass anything.
  const resolved = { ...DEFAULT_POSTGRES_STORE_OPTIONS, ...withoutUndefined(options) } as Required<PostgresStoreOptions>;
  if (typeof resolved.connectionString !== 'string' || !/^postgres(ql)?:\/\//.test(resolved.connectionString)) {
    throw badOption('connectionString', 'must be a postgres:// or postgresql:// URL');
  }
  if (!isSchemaName(resolved.schema)) {
    throw badOption('schema', `must be a lower-case identifier of at most 63 characters (got ${JSON.stringify(resolved.schema)})`);
  }
  if (!Number.isSafeInteger(resolved.poolSize) || resolved.poolSize < 1) {
    throw badOption('poolSize', `must be a positive integer (got ${String(resolved.poolSize)})`);
  }
  if (!Number.isSafeInteger(resolved.connectTimeoutMs) || resolved.connectTimeoutMs < 1) {
    throw badOption('connectTimeoutMs', `must be a positive integer of milliseconds (got ${String(resolved.connectTimeoutMs)})`);
  }
  if (!Number.isSafeInteger(resolved.queryTimeoutMs) || resolved.queryTimeoutMs < 1) {
    throw badOption('queryTimeoutMs', `must be a positive integer of milliseconds (got ${String(resolved.queryTimeoutMs)})`);
  }
  if (typeof resolved.ids !== 'function') throw badOption('ids', 'must be a function that returns a new id');
  if (typeof resolved.clock?.now !== 'function') throw badOption('clock', 'must have a now() that answers epoch milliseconds');
  return resolved;
}

/**
 * Connects, creates the schema if needed and applies the store's pending migrations. Safe while other
 * processes open the same schema at the same moment.
 */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<PostgresStore> {
  const resolved = resolvePostgresStoreOptions(options);
  const pool = createPostgresPool(resolved);
  try {
    await applyPostgresMigrations(pool, resolved.schema, POSTGRES_STORE_COMPONENT, POSTGRES_STORE_MIGRATIONS);
    return new PostgresTrailwireStore(pool, resolved.schema, storeStatements(resolved.schema), resolved.ids, resolved.clock);
  } catch (error) {
    await pool.end();
    throw error;
  }
}

/** Far enough in the past that no device is stale: a device read without `staleBefore`. */
const NEVER_STALE = Number.MIN_SAFE_INTEGER;

/** Anything that runs a query: the pool, or the one connection of a transaction. */

class PostgresTrailwireStore implements PostgresStore {
  private closing: Promise<void> | undefined;
  private readonly knownVins = new KnownVins();
  private readonly owners = new TurnLookup<string, VinOwner>(
    async (vins) => {
      const rows = await queryRows<{ vin: string; customer_id: string | null }>(this.pool, this.sql.vinOwners, [vins]);
      return new Map(rows.map((row) => [row.vin, { known: true, customerId: row.customer_id }]));
    },
    () => ({ known: false, customerId: null }),
  );
  private readonly grantsOfCustomers = new TurnLookup<string, PartnerGrant[]>(
    async (customerIds) => {
      const grants = new Map<string, PartnerGrant[]>();
      for (const row of await queryRows<PartnerGrantRow>(this.pool, this.sql.customersPartnerGrants, [customerIds])) {
        const grant = toPartnerGrant(row);
        grants.set(grant.customerId, [...(grants.get(grant.customerId) ?? []), grant]);
      }
      return grants;
    },
    () => [],
  );

  constructor(
    readonly pool: pg.Pool,
    readonly schema: string,
    private readonly sql: Statements,
    private readonly ids: IdGenerator,
    clock: Clock,
    private readonly telemetry: TelemetryStatements = telemetryStatements(schema),
    /** The customers' webhook endpoints, outbox and deliveries, in this schema (`webhook-tables.ts`). */
    readonly webhooks = new PostgresWebhookTables(pool, schema, clock),
  ) {}

  // --- principals -------------------------------------------------------------------------------

  async createPartner(input: NewPartner): Promise<Partner> {
    const row = await writeOrExplain(
      () => queryRow<PartnerRow>(this.pool, this.sql.insertPartner, [input.id, input.name, input.product, input.keyHash, input.createdAt]),
      { conflict: `a partner with id ${input.id} or the same key already exists` },
    );
    return toPartner(row!);
  }

  async createCustomer(input: NewCustomer): Promise<Customer> {
    const row = await writeOrExplain(
      () => queryRow<PrincipalRow>(this.pool, this.sql.insertCustomer, [input.id, input.name, input.keyHash, input.createdAt]),
      { conflict: `a customer with id ${input.id} or the same key already exists` },
    );
    return toCustomer(row!);
  }

  async findPrincipalByKeyHash(audience: Audience, keyHash: string): Promise<Principal | null> {
    return audience === 'partners'
      ? toPartnerPrincipal(await queryRow<PartnerRow>(this.pool, this.sql.partnerByKeyHash, [keyHash]))
      : toCustomerPrincipal(await queryRow<PrincipalRow>(this.pool, this.sql.customerByKeyHash, [keyHash]));
  }

  async getPrincipal(audience: Audience, id: string): Promise<Principal | null> {
    return audience === 'partners'
      ? toPartnerPrincipal(await queryRow<PartnerRow>(this.pool, this.sql.partnerById, [id]))
      : toCustomerPrincipal(await queryRow<PrincipalRow>(this.pool, this.sql.customerById, [id]));
  }

  async rotateKey(audience: Audience, id: string, newKeyHash: string, rotatedAt: number, expectedVersion: number): Promise<number | null> {
    const rotate = audience === 'partners' ? this.sql.rotatePartnerKey : this.sql.rotateCustomerKey;
    // One UPDATE ... RETURNING: the hash and the version change together or not at all, and of two
    // concurrent rotations the second re-checks the version after the first commits.
    const row = await writeOrExplain(() => queryRow<{ key_version: number }>(this.pool, rotate, [newKeyHash, rotatedAt, id, expectedVersion]), {
      conflict: `the new key of ${audience} ${id} collides with an existing key`,
    });
    return row?.key_version ?? null;
  }

  // --- secrets ----------------------------------------------------------------------------------

  async listSigningKeys(): Promise<StoredSigningKey[]> {
    return (await queryRows<SigningKeyRow>(this.pool, this.sql.signingKeys, [])).map(toStoredSigningKey);
  }

  async saveSigningKey(key: StoredSigningKey): Promise<void> {
    await queryRun(this.pool, this.sql.insertSigningKey, signingKeyValues(key));
  }

  async promoteSigningKey(key: StoredSigningKey, at: number): Promise<void> {
    // One statement, so one transaction: the insert and the retirement of the others commit together.
    await queryRun(this.pool, this.sql.promoteSigningKey, [...signingKeyValues(key), at]);
  }

  async revokeRetiredSigningKeys(at: number): Promise<string[]> {
    return (await queryRows<{ kid: string }>(this.pool, this.sql.revokeRetiredSigningKeys, [at])).map((row) => row.kid);
  }

  async getOrCreateSecret(name: string, candidate: string): Promise<string> {
    // Two statements, not one: a racing INSERT waits for the winner to commit, and only a statement
    // started after that wait sees the winner's row.
    await queryRun(this.pool, this.sql.insertSecret, [name, candidate]);
    return (await queryRow<{ value: string }>(this.pool, this.sql.secretByName, [name]))!.value;
  }

  // --- fleet administration ---------------------------------------------------------------------

  async createFleet(input: { customerId: string; name: string; createdAt: number }): Promise<Fleet> {
    const row = await writeOrExplain(() => queryRow<FleetRow>(this.pool, this.sql.insertFleet, [input.customerId, input.name, input.createdAt]), {
      missing: `no customer ${input.customerId}`,
    });
    return toFleet(row!);
  }

  async getFleetById(fleetId: number): Promise<Fleet | null> {
    return toFleetOrNull(await queryRow<FleetRow>(this.pool, this.sql.fleetById, [fleetId]));
  }

  async findTrailerByVin(vin: string): Promise<Trailer | null> {
    return toTrailerOrNull(await queryRow<TrailerRow>(this.pool, this.sql.trailerByVin, [vin]));
  }

  async createTrailer(input: NewTrailer): Promise<Trailer> {
    const row = await writeOrExplain(
      () => queryRow<TrailerRow>(this.pool, this.sql.insertTrailer, [input.id, input.fleetId, input.unitId, input.vin, input.createdAt]),
      { conflict: `a trailer with VIN ${input.vin} (or id ${input.id}) already exists`, missing: `no fleet ${input.fleetId}` },
    );
    return toTrailer(row!);
  }

  async assignTrailer(trailerId: string, fleetId: number, unitId: string | null): Promise<Trailer> {
    return withTransaction(this.pool, async (client) => {
      // The UPDATE waits for a telemetry write holding the trailer's row; the units are updated by a
      // later statement, which therefore also sees a unit that write has just created.
      const row = await writeOrExplain(() => queryRow<TrailerRow>(client, this.sql.assignTrailer, [fleetId, unitId, trailerId]), {
        missing: `no fleet ${fleetId}`,
      });
      if (row === undefined) throw new TrailwireError('not_found', `no trailer ${trailerId}`);
      await queryRun(client, this.sql.unitsFollowTrailer, [trailerId, fleetId]);
      return toTrailer(row);
    });
  }

  async importTrailers(fleetId: number, changes: readonly TrailerImportChange[], at: number): Promise<void> {
    // One statement per kind of change (arrays unnested), so ten thousand lines are a few round trips.
    const creates = changes.filter((change) => change.kind === 'create');
    const ofKind = (kind: 'assign' | 'update') => changes.filter((change) => change.kind === kind) as Exclude<TrailerImportChange, { kind: 'create' }>[];
    const assigns = ofKind('assign');
    const updates = ofKind('update');
    const columns = (rows: readonly { unitId: string | null; active: boolean }[]) => [rows.map((row) => row.unitId), rows.map((row) => row.active)];
    const moved = 'a trailer of the import changed while it was planned; nothing was applied, run it again';
    await withTransaction(this.pool, async (client) => {
      if (creates.length > 0)
        await writeOrExplain(
          () => queryRun(client, this.sql.importCreateTrailers, [fleetId, creates.map((row) => row.id), creates.map((row) => row.vin), ...columns(creates), at]),
          { conflict: `a VIN of the import was registered while it was planned; nothing was applied, run it again`, missing: `no fleet ${fleetId}` },
        );
      for (const [rows, statement] of [
        [assigns, this.sql.importAssignTrailers],
        [updates, this.sql.importUpdateTrailers],
      ] as const) {
        if (rows.length === 0) continue;
        const changed = await writeOrExplain(() => queryRun(client, statement, [fleetId, rows.map((row) => row.trailerId), ...columns(rows)]), { missing: `no fleet ${fleetId}` });
        if (changed !== rows.length) throw new TrailwireError('conflict', moved);
      }
      // The units follow their trailer's fleet, as in assignTrailer: after the UPDATE that waited for any telemetry write.
      if (assigns.length > 0) await queryRun(client, this.sql.unitsFollowTrailers, [assigns.map((row) => row.trailerId), fleetId]);
      await queryRun(client, this.sql.lockTrailerChanges, []);
      await queryRun(client, this.sql.insertTrailerChanges, [changes.map((change) => (change.kind === 'create' ? change.id : change.trailerId)), at]);
      await queryRun(client, this.sql.pruneTrailerChanges, [at - TRAILER_CHANGE_RETENTION_MS]);
    });
  }

  async setTrailerActive(trailerId: string, active: boolean): Promise<boolean> {
    return (await queryRun(this.pool, this.sql.setTrailerActive, [active, trailerId])) > 0;
  }

  async noteTrailerChange(trailerId: string, at: number): Promise<void> {
    await withTransaction(this.pool, async (client) => {
      // Readers take notes after the last seq they saw, so seqs must commit in order: a sequence
      // hands them out at insert, not at commit. Notes are rare (operator commands): one at a time.
      await queryRun(client, this.sql.lockTrailerChanges, []);
      await queryRun(client, this.sql.insertTrailerChange, [trailerId, at]);
      await queryRun(client, this.sql.pruneTrailerChanges, [at - TRAILER_CHANGE_RETENTION_MS]);
    });
  }

  async latestTrailerChange(): Promise<number> {
    return Number((await queryRow<{ seq: string | null }>(this.pool, this.sql.latestTrailerChange, []))?.seq ?? 0);
  }

  async trailerChangesAfter(afterSeq: number, limit: number): Promise<TrailerChange[]> {
    // One statement a page: a bulk registration (issue 41: 20,000 trailers) is that many changes,
    // which every serving process reads, and two lookups per change kept each reading for minutes.
    const rows = await queryRows<TrailerRow & { seq: number; fleet_customer_id: string | null; fleet_name: string | null; fleet_created_at: number | null }>(
      this.pool,
      this.sql.trailerChangesAfter,
      [afterSeq, limit],
    );
    return rows.map((row) => ({
      seq: Number(row.seq),
      trailer: toTrailer(row),
      fleet:
        row.fleet_id === null || row.fleet_customer_id === null
          ? null
          : toFleet({ id: row.fleet_id, customer_id: row.fleet_customer_id, name: row.fleet_name!, created_at: row.fleet_created_at! }),
    }));
  }

  // --- partner policies -------------------------------------------------------------------------

  async addPartnerGrant(grant: PartnerGrant): Promise<boolean> {
    const added = await writeOrExplain(() => queryRun(this.pool, this.sql.insertPartnerGrant, [grant.customerId, grant.partnerId, grant.createdAt]), {
      missing: `no customer ${grant.customerId} or no partner ${grant.partnerId}`,
    });
    return added > 0;
  }

  async removePartnerGrant(customerId: string, partnerId: string): Promise<boolean> {
    return (await queryRun(this.pool, this.sql.deletePartnerGrant, [customerId, partnerId])) > 0;
  }

  async listPartnerGrants(query: PartnerGrantQuery): Promise<PartnerGrant[]> {
    const { customerId, partnerId } = query;
    // A customer's grants, what intake asks: with the other customers' asked in the same turn.
    if (customerId !== undefined && partnerId === undefined) return [...(await this.grantsOfCustomers.get(customerId))];
    const rows =
      customerId !== undefined && partnerId !== undefined
        ? await queryRows<PartnerGrantRow>(this.pool, this.sql.partnerGrant, [customerId, partnerId])
        : partnerId !== undefined
          ? await queryRows<PartnerGrantRow>(this.pool, this.sql.partnerPartnerGrants, [partnerId])
          : await queryRows<PartnerGrantRow>(this.pool, this.sql.allPartnerGrants, []);
    return rows.map(toPartnerGrant);
  }

  async setPartnerIntakeLimits(limits: PartnerIntakeLimits): Promise<void> {
    if (limits.intake === null && limits.newVinsPerDay === null) {
      if (!(await this.getPrincipal('partners', limits.partnerId))) throw new TrailwireError('not_found', `no partner ${limits.partnerId}`);
      await queryRun(this.pool, this.sql.deletePartnerIntakeLimits, [limits.partnerId]);
      return;
    }
    await writeOrExplain(
      () =>
        queryRun(this.pool, this.sql.upsertPartnerIntakeLimits, partnerIntakeLimitsValues(limits)),
      { missing: `no partner ${limits.partnerId}` },
    );
  }

  async getPartnerIntakeLimits(partnerId: string): Promise<PartnerIntakeLimits | null> {
    const row = await queryRow<PartnerIntakeLimitsRow>(this.pool, this.sql.partnerIntakeLimits, [partnerId]);
    return row ? toPartnerIntakeLimits(row) : null;
  }

  vinOwner(vin: string): Promise<VinOwner> {
    return this.owners.get(vin);
  }

  async setDeviceActive(deviceId: string, active: boolean, at: number): Promise<Trailer | null> {
    const device = await queryRow<{ trailer_id: string }>(this.pool, this.sql.deviceTrailerId, [deviceId]);
    if (device === undefined) return null;
    return withTransaction(this.pool, async (client) => {
      // The trailer first, as applyTelemetry does, so the two never wait for each other in a cycle.
      const trailer = await queryRow<TrailerRow>(client, this.sql.lockTrailerById, [device.trailer_id]);
      if (trailer === undefined) return null;
      await queryRun(client, this.sql.setDeviceActive, [active, deviceId]);
      await this.recountTrailerStatus(client, trailer, at);
      return toTrailer((await queryRow<TrailerRow>(client, this.sql.trailerById, [trailer.id]))!);
    });
  }

  /** Recomputes a locked trailer's device counts and status from its devices; the rules are the core's. */
  private async recountTrailerStatus(client: pg.PoolClient, trailer: TrailerRow, at: number): Promise<void> {
    const counted = await queryRows<StateCountRow>(client, this.sql.deviceStateCounts, [trailer.id]);
    const counts = countDeviceStates(expandStateCounts(counted));
    const status = deriveTrailerStatus({ statusName: trailer.status_name, statusDate: trailer.status_date }, counts, at);
    await queryRun(client, this.sql.updateTrailerStatus, [status.statusName, status.statusDate, status.faultedDevices, status.warningDevices, trailer.id]);
  }

  // --- customer reads ---------------------------------------------------------------------------

  async listFleets(customerId: string, page: IdPageQuery<number>): Promise<Fleet[]> {
    return (await queryRows<FleetRow>(this.pool, this.sql.customerFleets, [customerId, page.afterId ?? 0, page.limit])).map(toFleet);
  }

  async getFleet(customerId: string, fleetId: number): Promise<Fleet | null> {
    return toFleetOrNull(await queryRow<FleetRow>(this.pool, this.sql.customerFleet, [fleetId, customerId]));
  }

  async listTrailers(customerId: string, fleetId: number, page: IdPageQuery & ActiveFilter): Promise<Trailer[]> {
    const list = page.activeOnly ? this.sql.customerActiveTrailers : this.sql.customerTrailers;
    return (await queryRows<TrailerRow>(this.pool, list, [fleetId, customerId, page.afterId ?? '', page.limit])).map(toTrailer);
  }

  async getTrailer(customerId: string, trailerId: string): Promise<Trailer | null> {
    return toTrailerOrNull(await queryRow<TrailerRow>(this.pool, this.sql.customerTrailer, [trailerId, customerId]));
  }

  async listGps(customerId: string, trailerId: string, page: TimePageQuery): Promise<Sequenced<GpsFix>[]> {
    const rows = await queryRows<GpsRow>(this.pool, this.sql.customerGps, [trailerId, customerId, ...timeBounds(page)]);
    return rows.map((row) => ({ key: { timestamp: row.timestamp, seq: row.seq }, record: toGpsFix(row) }));
  }

  async nextFleetTrailerWithGps(customerId: string, fleetId: number, afterTrailerId: string, range: { from: number; to: number }): Promise<Trailer | null> {
    return toTrailerOrNull(await queryRow<TrailerRow>(this.pool, this.sql.nextFleetTrailerWithGps, [fleetId, customerId, afterTrailerId, range.from, range.to]));
  }

  async listDevices(customerId: string, trailerId: string, page: IdPageQuery & ActiveFilter): Promise<Device[]> {
    const list = page.activeOnly ? this.sql.customerActiveDevices : this.sql.customerDevices;
    return (await queryRows<DeviceRow>(this.pool, list, [trailerId, customerId, page.afterId ?? '', page.limit, page.staleBefore])).map(toDevice);
  }

  async getDevice(customerId: string, deviceId: string, staleBefore: number = NEVER_STALE): Promise<Device | null> {
    const row = await queryRow<DeviceRow>(this.pool, this.sql.customerDevice, [deviceId, customerId, staleBefore]);
    return row === undefined ? null : toDevice(row);
  }

  async listDeviceReadings(customerId: string, deviceId: string, page: TimePageQuery): Promise<Sequenced<DeviceReading>[]> {
    const rows = await queryRows<DeviceReadingRow>(this.pool, this.sql.customerDeviceReadings, [deviceId, customerId, ...timeBounds(page)]);
    return rows.map((row) => ({
      key: { timestamp: row.timestamp, seq: row.seq },
      record: {
        deviceId: row.device_id,
        timestamp: row.timestamp,
        metrics: row.metrics,
        state: { isWarning: row.is_warning, isFault: row.is_fault },
      },
    }));
  }

  async listCargosafe(customerId: string, page: IdPageQuery): Promise<CargosafeUnit[]> {
    return (await queryRows<CargosafeUnitRow>(this.pool, this.sql.customerUnits, [customerId, page.afterId ?? '', page.limit])).map(toCargosafeUnit);
  }

  async getCargosafe(customerId: string, unitId: string): Promise<CargosafeUnit | null> {
    const row = await queryRow<CargosafeUnitRow>(this.pool, this.sql.customerUnit, [unitId, customerId]);
    return row === undefined ? null : toCargosafeUnit(row);
  }

  async listCargosafeReadings(customerId: string, unitId: string, page: TimePageQuery): Promise<Sequenced<CargosafeReading>[]> {
    const rows = await queryRows<CargosafeReadingRow>(this.pool, this.sql.customerUnitReadings, [unitId, customerId, ...timeBounds(page)]);
    return rows.map((row) => ({ key: { timestamp: row.timestamp, seq: row.seq }, record: toCargosafeReading(row.unit_id, row) }));
  }

  // --- operator reads (the `trailwire ... list` commands) -----------------------------------------

  async listCustomers(page: IdPageQuery): Promise<Customer[]> {
    return (await queryRows<PrincipalRow>(this.pool, this.sql.operatorCustomers, [page.afterId ?? '', page.limit])).map(toCustomer);
  }

  async listPartners(page: IdPageQuery): Promise<Partner[]> {
    return (await queryRows<PartnerRow>(this.pool, this.sql.operatorPartners, [page.afterId ?? '', page.limit])).map(toPartner);
  }

  async listAllFleets(query: IdPageQuery<number> & { customerId?: string }): Promise<Fleet[]> {
    const rows =
      query.customerId === undefined
        ? await queryRows<FleetRow>(this.pool, this.sql.operatorFleets, [query.afterId ?? 0, query.limit])
        : await queryRows<FleetRow>(this.pool, this.sql.customerFleets, [query.customerId, query.afterId ?? 0, query.limit]);
    return rows.map(toFleet);
  }

  async listAllTrailers(query: IdPageQuery & { scope: TrailerScope }): Promise<OperatorTrailer[]> {
    const afterId = query.afterId ?? '';
    const { scope } = query;
    const rows =
      scope.kind === 'fleet'
        ? await queryRows<OperatorTrailerRow>(this.pool, this.sql.operatorFleetTrailers, [scope.fleetId, afterId, query.limit])
        : await queryRows<OperatorTrailerRow>(this.pool, scope.kind === 'unassigned' ? this.sql.operatorUnassignedTrailers : this.sql.operatorTrailers, [
            afterId,
            query.limit,
          ]);
    return rows.map(toOperatorTrailer);
  }

  async getAnyTrailer(trailerId: string): Promise<OperatorTrailer | null> {
    const row = await queryRow<OperatorTrailerRow>(this.pool, this.sql.operatorTrailer, [trailerId]);
    return row === undefined ? null : toOperatorTrailer(row);
  }

  async listTrailerDevices(trailerId: string, page: IdPageQuery): Promise<Device[]> {
    return (await queryRows<DeviceRow>(this.pool, this.sql.operatorDevices, [trailerId, page.afterId ?? '', page.limit])).map(toDevice);
  }

  async listTrailerGps(trailerId: string, page: TimePageQuery): Promise<Sequenced<GpsFix>[]> {
    const rows = await queryRows<GpsRow>(this.pool, this.sql.operatorGps, [trailerId, ...timeBounds(page)]);
    return rows.map((row) => ({ key: { timestamp: row.timestamp, seq: row.seq }, record: toGpsFix(row) }));
  }

  // --- telemetry writes -------------------------------------------------------------------------

  async applyTelemetry(item: TelemetryBatch): Promise<AppliedTelemetry> {
    return (await this.applyTelemetryBatch([item])).get(item.vin)!;
  }

  async applyTelemetryBatch(items: readonly TelemetryBatch[]): Promise<Map<string, AppliedTelemetry>> {
    if (items.length === 0) return new Map();
    const applied = await withTransaction(this.pool, async (client) => {
      const written = await writeTelemetryBatch(client, this.telemetry, this.ids, items, this.knownVins);
      if (!(await this.webhooks.anyEndpoint(client))) return written;
      // The webhook events go to the outbox in the write's own transaction (contract 14).
      const atOf = new Map(items.map((item) => [item.vin, item.at]));
      const events = [...written].flatMap(([vin, state]) => webhookEventsOf(state, atOf.get(vin)!));
      await this.webhooks.writeOutbox(client, events, Math.max(...atOf.values()));
      return written;
    });
    // Committed: the trailers it created exist for everyone now.
    this.knownVins.addAll(applied.keys());
    return applied;
  }

  // --- lifecycle --------------------------------------------------------------------------------

  async ping(): Promise<void> {
    if (this.closing !== undefined) throw new TrailwireError('unavailable', 'the PostgreSQL store is closed');
    try {
      await this.pool.query('SELECT 1');
    } catch (error) {
      throw new TrailwireError('unavailable', 'the PostgreSQL store does not answer', { cause: error });
    }
  }

  async close(): Promise<void> {
    this.closing ??= this.pool.end();
    await this.closing;
  }
}

/**
 * The page's lower bound as one key, as the SQLite store does: (from, 0) precedes every row at or after
 * `from` (seq, an identity, starts at 1), and a cursor before `from` is overtaken by it. Answers the
 * statement's [afterTimestamp, afterSeq, to, limit] parameters.
 */
function timeBounds(page: TimePageQuery): [number, number, number, number] {
  const start = { timestamp: page.from, seq: 0 };
  const after = page.after !== undefined && compareKeys(page.after, start) > 0 ? page.after : start;
  return [after.timestamp, after.seq, page.to, page.limit];
}


// --- statements -----------------------------------------------------------------------------------

interface DeviceReadingRow {
  seq: number;
  device_id: string;
  timestamp: number;
  metrics: Record<string, number>;
  is_warning: boolean;
  is_fault: boolean;
}

export type { Statement } from './pool.ts';

const TRAILER_COLUMNS = `t.id, t.fleet_id, t.unit_id, t.vin, t.active, t.status_name, t.status_date, t.faulted_devices,
  t.warning_devices, t.gps_timestamp, t.gps_lat, t.gps_long, t.gps_speed, t.gps_heading, t.created_at`;
const TRAILER_RETURNING = TRAILER_COLUMNS.replaceAll('t.', '');

/**
 * A device is active when its operator flag is on and it has reported since `staleBefore` (the
 * statement parameter passed in, e.g. `$5`), or, never having reported, was created since then. `active` on every
 * returned Device uses this same rule, so the field and the `activeOnly` filter always agree.
 */
const deviceColumns = (staleBefore: string) => `d.id, d.trailer_id, d.kind, d.serial, d.position, d.is_warning, d.is_fault,
  d.last_seen_at, d.created_at, (d.active AND COALESCE(d.last_seen_at, d.created_at) >= ${staleBefore}) AS effective_active`;

const UNIT_COLUMNS = `u.id, u.trailer_id, u.serial, u.active, u.last_seen_at, u.door_open, u.load_percent,
  u.temperature_c, u.humidity_percent, u.created_at`;

/**
 * Time pages, parameters $3..$6 = afterTimestamp, afterSeq, to, limit: strictly after the cursor and
 * before `to`, in (timestamp, seq) order, `from` being folded into the cursor by `timeBounds` as in the
 * SQLite store. Unlike SQLite, PostgreSQL seeks a row-value comparison by itself: it takes the first
 * column as the index condition `timestamp >= $3` on the UNIQUE (source, timestamp) index (the plan
 * test shows it). So there is deliberately no plain `timestamp >= $3` beside it: the planner would
 * count that bound twice, underestimate the rows, and for pages near the end of a range switch to
 * reading the whole rest of the range and sorting it.
 */
const TIME_PAGE = `g.timestamp < $5 AND (g.timestamp, g.seq) > ($3, $4) ORDER BY g.timestamp, g.seq LIMIT $6`;

/**
 * Reads of one source check the customer once, as a condition that does not depend on the row (an
 * uncorrelated EXISTS, run once before the scan): joined in, the check would shrink the planner's row
 * estimate for the page and tempt it away from the ordered index scan that a LIMIT wants.
 */
const ownsFleet = (s: string, fleetId: string, customerId: string) =>
  `EXISTS (SELECT 1 FROM ${s}.fleets f WHERE f.id = ${fleetId} AND f.customer_id = ${customerId})`;
const ownsTrailer = (s: string, trailerId: string, customerId: string) =>
  `EXISTS (SELECT 1 FROM ${s}.trailers t JOIN ${s}.fleets f ON f.id = t.fleet_id WHERE t.id = ${trailerId} AND f.customer_id = ${customerId})`;

/**
 * The newest report of a trailer's devices and of its cargosafe units, each one index range of that
 * trailer (`toOperatorTrailer` takes the newest of these and the latest fix).
 */
const operatorTrailerColumns = (s: string) => `${TRAILER_COLUMNS},
  (SELECT MAX(d.last_seen_at) FROM ${s}.devices d WHERE d.trailer_id = t.id) AS devices_seen_at,
  (SELECT MAX(u.last_seen_at) FROM ${s}.cargosafe_units u WHERE u.trailer_id = t.id) AS units_seen_at`;

/** The operator's reads: across customers, so none checks a `customer_id`. `s` is the quoted schema. */
function operatorStatements(s: string) {
  return {
    operatorCustomers: `SELECT id, name, key_version, created_at, rotated_at FROM ${s}.customers WHERE id > $1 ORDER BY id LIMIT $2`,
    operatorPartners: `SELECT id, name, product, key_version, created_at, rotated_at FROM ${s}.partners WHERE id > $1 ORDER BY id LIMIT $2`,
    operatorFleets: `SELECT id, customer_id, name, created_at FROM ${s}.fleets WHERE id > $1 ORDER BY id LIMIT $2`,
    operatorTrailers: `SELECT ${operatorTrailerColumns(s)} FROM ${s}.trailers t WHERE t.id > $1 ORDER BY t.id LIMIT $2`,
    operatorFleetTrailers: `SELECT ${operatorTrailerColumns(s)} FROM ${s}.trailers t WHERE t.fleet_id = $1 AND t.id > $2 ORDER BY t.id LIMIT $3`,
    // `IS NULL` is an index condition on trailers_by_fleet (fleet_id, id): the unassigned VINs are one range.
    operatorUnassignedTrailers: `SELECT ${operatorTrailerColumns(s)} FROM ${s}.trailers t
      WHERE t.fleet_id IS NULL AND t.id > $1 ORDER BY t.id LIMIT $2`,
    operatorTrailer: `SELECT ${operatorTrailerColumns(s)} FROM ${s}.trailers t WHERE t.id = $1`,
    operatorDevices: `SELECT d.id, d.trailer_id, d.kind, d.serial, d.position, d.is_warning, d.is_fault, d.last_seen_at, d.created_at,
        d.active AS effective_active
      FROM ${s}.devices d WHERE d.trailer_id = $1 AND d.id > $2 ORDER BY d.id LIMIT $3`,
    // Parameters: trailer, then the time page's [afterTimestamp, afterSeq, to, limit] as in TIME_PAGE.
    operatorGps: `SELECT g.seq, g.timestamp, g.lat, g.long, g.speed, g.heading FROM ${s}.gps_fixes g
      WHERE g.trailer_id = $1 AND g.timestamp < $4 AND (g.timestamp, g.seq) > ($2, $3) ORDER BY g.timestamp, g.seq LIMIT $5`,
  };
}

/** Every statement of the store, its tables qualified with `schema` (exported for the query-plan test). */
export function storeStatements(schema: string) {
  const s = quoteSchema(schema);
  const statements = {
    insertPartner: `INSERT INTO ${s}.partners (id, name, product, key_hash, created_at) VALUES ($1, $2, $3, $4, $5)
      RETURNING id, name, product, key_version, created_at, rotated_at`,
    insertCustomer: `INSERT INTO ${s}.customers (id, name, key_hash, created_at) VALUES ($1, $2, $3, $4)
      RETURNING id, name, key_version, created_at, rotated_at`,
    partnerByKeyHash: `SELECT id, name, product, key_version, created_at, rotated_at FROM ${s}.partners WHERE key_hash = $1`,
    customerByKeyHash: `SELECT id, name, key_version, created_at, rotated_at FROM ${s}.customers WHERE key_hash = $1`,
    partnerById: `SELECT id, name, product, key_version, created_at, rotated_at FROM ${s}.partners WHERE id = $1`,
    customerById: `SELECT id, name, key_version, created_at, rotated_at FROM ${s}.customers WHERE id = $1`,
    rotatePartnerKey: `UPDATE ${s}.partners SET key_hash = $1, rotated_at = $2, key_version = key_version + 1
      WHERE id = $3 AND key_version = $4 RETURNING key_version`,
    rotateCustomerKey: `UPDATE ${s}.customers SET key_hash = $1, rotated_at = $2, key_version = key_version + 1
      WHERE id = $3 AND key_version = $4 RETURNING key_version`,

    signingKeys: `SELECT ${SIGNING_KEY_COLUMNS} FROM ${s}.signing_keys ORDER BY created_at, position`,
    insertSigningKey: `INSERT INTO ${s}.signing_keys (kid, alg, private_key_pem, public_key_pem, created_at) VALUES ($1, $2, $3, $4, $5)
      ON CONFLICT (kid) DO NOTHING`,
    promoteSigningKey: `WITH saved AS (
        INSERT INTO ${s}.signing_keys (kid, alg, private_key_pem, public_key_pem, created_at) VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (kid) DO NOTHING RETURNING kid)
      UPDATE ${s}.signing_keys SET retired_at = $6 WHERE kid <> $1 AND retired_at IS NULL AND EXISTS (SELECT 1 FROM saved)`,
    revokeRetiredSigningKeys: `UPDATE ${s}.signing_keys SET revoked_at = $1 WHERE retired_at IS NOT NULL AND revoked_at IS NULL RETURNING kid`,
    insertSecret: `INSERT INTO ${s}.secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
    secretByName: `SELECT value FROM ${s}.secrets WHERE name = $1`,

    insertFleet: `INSERT INTO ${s}.fleets (customer_id, name, created_at) VALUES ($1, $2, $3) RETURNING id, customer_id, name, created_at`,
    fleetById: `SELECT id, customer_id, name, created_at FROM ${s}.fleets WHERE id = $1`,
    customerFleet: `SELECT id, customer_id, name, created_at FROM ${s}.fleets WHERE id = $1 AND customer_id = $2`,
    customerFleets: `SELECT id, customer_id, name, created_at FROM ${s}.fleets WHERE customer_id = $1 AND id > $2 ORDER BY id LIMIT $3`,

    trailerById: `SELECT ${TRAILER_COLUMNS} FROM ${s}.trailers t WHERE t.id = $1`,
    trailerByVin: `SELECT ${TRAILER_COLUMNS} FROM ${s}.trailers t WHERE t.vin = $1`,
    lockTrailerById: `SELECT ${TRAILER_COLUMNS} FROM ${s}.trailers t WHERE t.id = $1 FOR NO KEY UPDATE`,
    insertTrailer: `INSERT INTO ${s}.trailers (id, fleet_id, unit_id, vin, status_name, status_date, created_at)
      VALUES ($1, $2, $3, $4, 'OK', $5, $5) RETURNING ${TRAILER_RETURNING}`,
    assignTrailer: `UPDATE ${s}.trailers SET fleet_id = $1, unit_id = $2 WHERE id = $3 RETURNING ${TRAILER_RETURNING}`,
    unitsFollowTrailer: `UPDATE ${s}.cargosafe_units SET customer_id = (SELECT customer_id FROM ${s}.fleets WHERE id = $2)
      WHERE trailer_id = $1`,
    setTrailerActive: `UPDATE ${s}.trailers SET active = $1 WHERE id = $2`,
    // A fleet import (importTrailers): $1 the fleet, then one array per column.
    importCreateTrailers: `INSERT INTO ${s}.trailers (id, fleet_id, unit_id, vin, active, status_name, status_date, created_at)
      SELECT u.id, $1, u.unit_id, u.vin, u.active, 'OK', $6, $6 FROM unnest($2::text[], $3::text[], $4::text[], $5::boolean[]) AS u(id, vin, unit_id, active)`,
    importAssignTrailers: `UPDATE ${s}.trailers t SET fleet_id = $1, unit_id = u.unit_id, active = u.active
      FROM unnest($2::text[], $3::text[], $4::boolean[]) AS u(id, unit_id, active) WHERE t.id = u.id AND t.fleet_id IS NULL`,
    importUpdateTrailers: `UPDATE ${s}.trailers t SET unit_id = u.unit_id, active = u.active
      FROM unnest($2::text[], $3::text[], $4::boolean[]) AS u(id, unit_id, active) WHERE t.id = u.id AND t.fleet_id = $1`,
    unitsFollowTrailers: `UPDATE ${s}.cargosafe_units SET customer_id = (SELECT customer_id FROM ${s}.fleets WHERE id = $2)
      WHERE trailer_id = ANY($1::text[])`,
    insertTrailerChanges: `INSERT INTO ${s}.trailer_changes (trailer_id, at) SELECT trailer_id, $2 FROM unnest($1::text[]) AS u(trailer_id)`,
    lockTrailerChanges: `LOCK TABLE ${s}.trailer_changes IN SHARE ROW EXCLUSIVE MODE`,
    insertTrailerChange: `INSERT INTO ${s}.trailer_changes (trailer_id, at) VALUES ($1, $2)`,
    pruneTrailerChanges: `DELETE FROM ${s}.trailer_changes WHERE at < $1`,
    latestTrailerChange: `SELECT MAX(seq) AS seq FROM ${s}.trailer_changes`,
    trailerChangesAfter: `SELECT c.seq, ${TRAILER_COLUMNS}, f.customer_id AS fleet_customer_id, f.name AS fleet_name, f.created_at AS fleet_created_at
      FROM ${s}.trailer_changes c JOIN ${s}.trailers t ON t.id = c.trailer_id LEFT JOIN ${s}.fleets f ON f.id = t.fleet_id
      WHERE c.seq > $1 ORDER BY c.seq LIMIT $2`,
    customerTrailer: `SELECT ${TRAILER_COLUMNS} FROM ${s}.trailers t JOIN ${s}.fleets f ON f.id = t.fleet_id
      WHERE t.id = $1 AND f.customer_id = $2`,
    // Each trailer of the fleet after $3 is one probe of gps_fixes' (trailer_id, timestamp) index.
    nextFleetTrailerWithGps: `SELECT ${TRAILER_COLUMNS} FROM ${s}.trailers t
      WHERE t.fleet_id = $1 AND ${ownsFleet(s, '$1', '$2')} AND t.id > $3
        AND EXISTS (SELECT 1 FROM ${s}.gps_fixes g WHERE g.trailer_id = t.id AND g.timestamp >= $4 AND g.timestamp < $5)
      ORDER BY t.id LIMIT 1`,
    customerTrailers: `SELECT ${TRAILER_COLUMNS} FROM ${s}.trailers t
      WHERE t.fleet_id = $1 AND ${ownsFleet(s, '$1', '$2')} AND t.id > $3 ORDER BY t.id LIMIT $4`,
    // The literal `t.active` lets PostgreSQL use the partial index trailers_active_by_fleet.
    customerActiveTrailers: `SELECT ${TRAILER_COLUMNS} FROM ${s}.trailers t
      WHERE t.fleet_id = $1 AND ${ownsFleet(s, '$1', '$2')} AND t.active AND t.id > $3 ORDER BY t.id LIMIT $4`,
    updateTrailerStatus: `UPDATE ${s}.trailers SET status_name = $1, status_date = $2, faulted_devices = $3, warning_devices = $4
      WHERE id = $5`,
    deviceStateCounts: `SELECT is_warning, is_fault, COUNT(*)::integer AS n FROM ${s}.devices WHERE trailer_id = $1 AND active
      GROUP BY is_warning, is_fault`,

    customerGps: `SELECT g.seq, g.timestamp, g.lat, g.long, g.speed, g.heading FROM ${s}.gps_fixes g
      WHERE g.trailer_id = $1 AND ${ownsTrailer(s, '$1', '$2')} AND ${TIME_PAGE}`,

    setDeviceActive: `UPDATE ${s}.devices SET active = $1 WHERE id = $2`,
    deviceTrailerId: `SELECT trailer_id FROM ${s}.devices WHERE id = $1`,
    customerDevice: `SELECT ${deviceColumns('$3')}
      FROM ${s}.devices d JOIN ${s}.trailers t ON t.id = d.trailer_id JOIN ${s}.fleets f ON f.id = t.fleet_id
      WHERE d.id = $1 AND f.customer_id = $2`,
    customerDevices: `SELECT ${deviceColumns('$5')} FROM ${s}.devices d
      WHERE d.trailer_id = $1 AND ${ownsTrailer(s, '$1', '$2')} AND d.id > $3 ORDER BY d.id LIMIT $4`,
    // Staleness depends on the query's time, so no index can hold it; the partial index bounds the scan
    // to this trailer's enabled devices (a few dozen sensors), not the table.
    customerActiveDevices: `SELECT ${deviceColumns('$5')} FROM ${s}.devices d
      WHERE d.trailer_id = $1 AND ${ownsTrailer(s, '$1', '$2')} AND d.active
        AND COALESCE(d.last_seen_at, d.created_at) >= $5 AND d.id > $3
      ORDER BY d.id LIMIT $4`,
    customerDeviceReadings: `SELECT g.seq, g.device_id, g.timestamp, g.metrics, g.is_warning, g.is_fault FROM ${s}.device_readings g
      WHERE g.device_id = $1
        AND EXISTS (SELECT 1 FROM ${s}.devices d JOIN ${s}.trailers t ON t.id = d.trailer_id JOIN ${s}.fleets f ON f.id = t.fleet_id
                    WHERE d.id = $1 AND f.customer_id = $2)
        AND ${TIME_PAGE}`,

    // customer_id selects the index range; the join through fleets is what decides visibility.
    customerUnit: `SELECT ${UNIT_COLUMNS}
      FROM ${s}.cargosafe_units u JOIN ${s}.trailers t ON t.id = u.trailer_id JOIN ${s}.fleets f ON f.id = t.fleet_id
      WHERE u.id = $1 AND f.customer_id = $2`,
    customerUnits: `SELECT ${UNIT_COLUMNS}
      FROM ${s}.cargosafe_units u JOIN ${s}.trailers t ON t.id = u.trailer_id JOIN ${s}.fleets f ON f.id = t.fleet_id
      WHERE u.customer_id = $1 AND f.customer_id = $1 AND u.id > $2 ORDER BY u.id LIMIT $3`,
    customerUnitReadings: `SELECT g.seq, g.unit_id, g.timestamp, g.door_open, g.load_percent, g.temperature_c, g.humidity_percent
      FROM ${s}.cargosafe_readings g
      WHERE g.unit_id = $1
        AND EXISTS (SELECT 1 FROM ${s}.cargosafe_units u JOIN ${s}.trailers t ON t.id = u.trailer_id JOIN ${s}.fleets f ON f.id = t.fleet_id
                    WHERE u.id = $1 AND f.customer_id = $2)
        AND ${TIME_PAGE}`,

    ...operatorStatements(s),

    // The customers' grants of partners and the per-partner intake overrides (issue 29).
    insertPartnerGrant: `INSERT INTO ${s}.partner_grants (customer_id, partner_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    deletePartnerGrant: `DELETE FROM ${s}.partner_grants WHERE customer_id = $1 AND partner_id = $2`,
    partnerGrant: `SELECT customer_id, partner_id, created_at FROM ${s}.partner_grants WHERE customer_id = $1 AND partner_id = $2`,
    customersPartnerGrants: `SELECT customer_id, partner_id, created_at FROM ${s}.partner_grants WHERE customer_id = ANY($1) ORDER BY customer_id, partner_id`,
    partnerPartnerGrants: `SELECT customer_id, partner_id, created_at FROM ${s}.partner_grants WHERE partner_id = $1 ORDER BY customer_id`,
    allPartnerGrants: `SELECT customer_id, partner_id, created_at FROM ${s}.partner_grants ORDER BY customer_id, partner_id`,
    upsertPartnerIntakeLimits: `INSERT INTO ${s}.partner_intake_limits (partner_id, intake_requests, intake_window_seconds, new_vins_per_day, updated_at)
      VALUES ($1, $2, $3, $4, $5)
      ON CONFLICT (partner_id) DO UPDATE SET intake_requests = excluded.intake_requests,
        intake_window_seconds = excluded.intake_window_seconds, new_vins_per_day = excluded.new_vins_per_day, updated_at = excluded.updated_at`,
    deletePartnerIntakeLimits: `DELETE FROM ${s}.partner_intake_limits WHERE partner_id = $1`,
    partnerIntakeLimits: `SELECT partner_id, intake_requests, intake_window_seconds, new_vins_per_day, updated_at
      FROM ${s}.partner_intake_limits WHERE partner_id = $1`,
    // The VINs are handed over through a subquery, so the planner never weighs them one by one: with
    // a batch's hundreds of VINs (the grants checked at processing) and the table never analyzed,
    // `vin = ANY($1)` was planned as a scan of every trailer, each one hashed against the list —
    // 6.5 ms a call at 20,000 trailers, ~15 % of PostgreSQL's time on the registered fleet (issue
    // 41); the subquery's array keeps the unique index's probes: 1.8 ms, and as fast once analyzed.
    vinOwners: `SELECT t.vin, f.customer_id FROM ${s}.trailers t LEFT JOIN ${s}.fleets f ON f.id = t.fleet_id
      WHERE t.vin = ANY(ARRAY(SELECT unnest($1::text[])))`,
  };
  // Named per statement: `pg` prepares each once per connection and reuses it. A name must always
  // carry the same text on a connection, so other modules sharing the pool use their own prefix.
  // The owners' lookup is planned for each call's VINs (see `Statement`).
  return Object.fromEntries(
    Object.entries(statements).map(([key, text]) => [key, key === 'vinOwners' ? { text } : { name: `trailwire_store_${key}`, text }]),
  ) as Record<keyof typeof statements, Statement>;
}

type Statements = ReturnType<typeof storeStatements>;

// --- options --------------------------------------------------------------------------------------

function badOption(field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `PostgresStoreOptions.${field} ${message}`, {
    errors: [{ path: field, message }],
  });
}

