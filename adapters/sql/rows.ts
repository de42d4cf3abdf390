/**
 * The rows both SQL stores (SQLite and PostgreSQL) read, and their mapping to the core's records.
 * The two schemas use the same snake_case columns; they differ only in how a boolean arrives
 * (SQLite: 0/1, PostgreSQL: true/false), which `SqlBool` and `isTrue` absorb, so one mapping serves both.
 */
import type { CargosafeReading, CargosafeUnit, Customer, Device, DeviceState, Fleet, GpsFix, Heading, Partner, Principal, StatusName, Trailer } from '../../core/model.ts';
import type { OperatorTrailer, PartnerGrant, PartnerIntakeLimits, StoredSigningKey, TimeKey } from '../../core/store.ts';

/** A boolean column as a driver returns it. */
export type SqlBool = boolean | number;

export function isTrue(value: SqlBool | null): boolean {
  return value === true || value === 1;
}

/** The columns of `signing_keys`, in the order `SIGNING_KEY_COLUMNS` names them. */
export interface SigningKeyRow {
  kid: string;
  alg: StoredSigningKey['alg'];
  private_key_pem: string | null;
  public_key_pem: string | null;
  created_at: number;
  retired_at: number | null;
  revoked_at: number | null;
}

export const SIGNING_KEY_COLUMNS = 'kid, alg, private_key_pem, public_key_pem, created_at, retired_at, revoked_at';

export function toStoredSigningKey(row: SigningKeyRow): StoredSigningKey {
  return {
    kid: row.kid,
    alg: row.alg,
    privateKeyPem: row.private_key_pem,
    publicKeyPem: row.public_key_pem,
    createdAt: row.created_at,
    retiredAt: row.retired_at,
    revokedAt: row.revoked_at,
  };
}

/** The values of an insert into `signing_keys` (kid, alg, private, public, created_at). */
export function signingKeyValues(key: StoredSigningKey): [string, string, string | null, string | null, number] {
  return [key.kid, key.alg, key.privateKeyPem, key.publicKeyPem ?? null, key.createdAt];
}

export interface PrincipalRow {
  id: string;
  name: string;
  key_version: number;
  created_at: number;
  rotated_at: number | null;
}
export interface PartnerRow extends PrincipalRow {
  product: string;
}
export interface FleetRow {
  id: number;
  customer_id: string;
  name: string;
  created_at: number;
}
export interface TrailerRow {
  id: string;
  fleet_id: number | null;
  unit_id: string | null;
  vin: string;
  active: SqlBool;
  status_name: StatusName;
  status_date: number;
  faulted_devices: number;
  warning_devices: number;
  gps_timestamp: number | null;
  gps_lat: number | null;
  gps_long: number | null;
  gps_speed: number | null;
  gps_heading: Heading | null;
  created_at: number;
}
export interface GpsRow {
  seq: number;
  timestamp: number;
  lat: number;
  long: number;
  speed: number;
  heading: Heading;
}
export interface DeviceRow {
  id: string;
  trailer_id: string;
  kind: string;
  serial: string;
  position: string | null;
  /** The operator flag combined with the staleness rule, computed in the query. */
  effective_active: SqlBool;
  is_warning: SqlBool;
  is_fault: SqlBool;
  last_seen_at: number | null;
  created_at: number;
}
export interface CargosafeValuesRow {
  door_open: SqlBool | null;
  load_percent: number | null;
  temperature_c: number | null;
  humidity_percent: number | null;
}
export interface CargosafeUnitRow extends CargosafeValuesRow {
  id: string;
  trailer_id: string;
  serial: string;
  active: SqlBool;
  last_seen_at: number | null;
  created_at: number;
}
export interface CargosafeReadingRow extends CargosafeValuesRow {
  seq: number;
  unit_id: string;
  timestamp: number;
}
export interface StateCountRow {
  is_warning: SqlBool;
  is_fault: SqlBool;
  n: number;
}

/** Turns grouped (state, count) rows back into states, so that the core's `countDeviceStates` applies the rule. */
export function* expandStateCounts(rows: StateCountRow[]): Generator<DeviceState> {
  for (const row of rows) {
    const state = { isWarning: isTrue(row.is_warning), isFault: isTrue(row.is_fault) };
    for (let i = 0; i < row.n; i++) yield state;
  }
}

/** Keyset order of telemetry: timestamp, then sequence. */
export function compareKeys(a: TimeKey, b: TimeKey): number {
  return a.timestamp - b.timestamp || a.seq - b.seq;
}

export function toPartner(row: PartnerRow): Partner {
  return { id: row.id, name: row.name, product: row.product, keyVersion: row.key_version, createdAt: row.created_at, rotatedAt: row.rotated_at };
}

export function toCustomer(row: PrincipalRow): Customer {
  return { id: row.id, name: row.name, keyVersion: row.key_version, createdAt: row.created_at, rotatedAt: row.rotated_at };
}

export function toPartnerPrincipal(row: PartnerRow | undefined): Principal | null {
  return row === undefined ? null : { audience: 'partners', ...toPartner(row) };
}

export function toCustomerPrincipal(row: PrincipalRow | undefined): Principal | null {
  return row === undefined ? null : { audience: 'customers', ...toCustomer(row) };
}

export function toFleet(row: FleetRow): Fleet {
  return { id: row.id, customerId: row.customer_id, name: row.name, createdAt: row.created_at };
}

export function toFleetOrNull(row: FleetRow | undefined): Fleet | null {
  return row === undefined ? null : toFleet(row);
}

export function toTrailer(row: TrailerRow): Trailer {
  return {
    id: row.id,
    fleetId: row.fleet_id,
    unitId: row.unit_id,
    vin: row.vin,
    active: isTrue(row.active),
    statusName: row.status_name,
    statusDate: row.status_date,
    faultedDevices: row.faulted_devices,
    warningDevices: row.warning_devices,
    telemetry:
      row.gps_timestamp === null
        ? null
        : { timestamp: row.gps_timestamp, lat: row.gps_lat!, long: row.gps_long!, speed: row.gps_speed!, heading: row.gps_heading! },
    createdAt: row.created_at,
  };
}

export function toTrailerOrNull(row: TrailerRow | undefined): Trailer | null {
  return row === undefined ? null : toTrailer(row);
}

export function toGpsFix(row: GpsRow): GpsFix {
  return { timestamp: row.timestamp, lat: row.lat, long: row.long, speed: row.speed, heading: row.heading };
}

export function toDevice(row: DeviceRow): Device {
  return {
    id: row.id,
    trailerId: row.trailer_id,
    kind: row.kind,
    serial: row.serial,
    position: row.position,
    active: isTrue(row.effective_active),
    state: { isWarning: isTrue(row.is_warning), isFault: isTrue(row.is_fault) },
    lastSeenAt: row.last_seen_at,
    createdAt: row.created_at,
  };
}

export function toCargosafeReading(unitId: string, row: CargosafeValuesRow & { timestamp: number }): CargosafeReading {
  return {
    unitId,
    timestamp: row.timestamp,
    doorOpen: isTrue(row.door_open),
    loadPercent: row.load_percent!,
    temperatureC: row.temperature_c!,
    humidityPercent: row.humidity_percent!,
  };
}

export function toCargosafeUnit(row: CargosafeUnitRow): CargosafeUnit {
  return {
    id: row.id,
    trailerId: row.trailer_id,
    serial: row.serial,
    active: isTrue(row.active),
    lastSeenAt: row.last_seen_at,
    latest: row.last_seen_at === null ? null : toCargosafeReading(row.id, { ...row, timestamp: row.last_seen_at }),
    createdAt: row.created_at,
  };
}

/** Drops the options given as undefined, so that spreading them over defaults keeps the defaults. */
export function withoutUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** A trailer row of the operator's lists: its columns and the newest report of its devices and cargosafe units. */
export interface OperatorTrailerRow extends TrailerRow {
  devices_seen_at: number | null;
  units_seen_at: number | null;
}

/** The newest of the trailer's three report times, taken here so that both dialects share one rule. */
export function toOperatorTrailer(row: OperatorTrailerRow): OperatorTrailer {
  const seen = [row.gps_timestamp, row.devices_seen_at, row.units_seen_at].filter((at): at is number => at !== null);
  return { ...toTrailer(row), lastSeenAt: seen.length === 0 ? null : Math.max(...seen) };
}

/** A row of `partner_grants`. */
export interface PartnerGrantRow {
  customer_id: string;
  partner_id: string;
  created_at: number;
}

export function toPartnerGrant(row: PartnerGrantRow): PartnerGrant {
  return { customerId: row.customer_id, partnerId: row.partner_id, createdAt: row.created_at };
}

/** A row of `partner_intake_limits`: the budget's two columns are both set or both null. */
export interface PartnerIntakeLimitsRow {
  partner_id: string;
  intake_requests: number | null;
  intake_window_seconds: number | null;
  new_vins_per_day: number | null;
  updated_at: number;
}

export function toPartnerIntakeLimits(row: PartnerIntakeLimitsRow): PartnerIntakeLimits {
  return {
    partnerId: row.partner_id,
    intake: row.intake_requests === null || row.intake_window_seconds === null ? null : { requests: row.intake_requests, windowSeconds: row.intake_window_seconds },
    newVinsPerDay: row.new_vins_per_day,
    updatedAt: row.updated_at,
  };
}

/** The values of the `partner_intake_limits` upsert: partner, budget requests and window, new VINs a day, time. */
export function partnerIntakeLimitsValues(limits: PartnerIntakeLimits): [string, number | null, number | null, number | null, number] {
  return [limits.partnerId, limits.intake?.requests ?? null, limits.intake?.windowSeconds ?? null, limits.newVinsPerDay, limits.updatedAt];
}
