/**
 * What canonical telemetry is: what every product transformation produces from a partner's payload,
 * and what the store writes. A product knows its partner's JSON; nothing after the transform does.
 * Here are its shape, its heading vocabulary (`cardinalHeading` turns a bearing into one of
 * `HEADINGS`), the check of a transform's output (`checkCanonicalTelemetry`, which the product
 * registry runs at start-up on a product's examples and on every transform), and the one rule on how
 * far ahead of the server's clock a reading may be dated, which intake (on a product's declared
 * reading times) and the worker (on canonical timestamps) both apply.
 */
import type { FieldError } from './errors.ts';
import { pointerTo } from './json-schema.ts';
import { type DeviceState, type GpsFix, HEADINGS, type Heading } from './model.ts';

/** A reading of one device (for example a tire sensor), identified by kind and serial. */
export interface CanonicalDeviceReading {
  kind: string;
  serial: string;
  /** Where the device sits on the trailer, e.g. a wheel position; null when not applicable. */
  position: string | null;
  timestamp: number;
  metrics: Record<string, number>;
  state: DeviceState;
}

/** A reading of one cargosafe unit bound to the trailer. */
export interface CanonicalCargosafeReading {
  serial: string;
  timestamp: number;
  doorOpen: boolean;
  loadPercent: number;
  temperatureC: number;
  humidityPercent: number;
}

/** Everything one payload says about one trailer. Any part may be empty. */
export interface CanonicalTelemetry {
  gps: GpsFix[];
  devices: CanonicalDeviceReading[];
  cargosafe: CanonicalCargosafeReading[];
}

/**
 * How far after the server's clock a reading may be dated: 5 minutes (contract 4, "Time sanity").
 * Device clocks drift by seconds, not minutes; a reading further ahead comes from a wrong clock, and
 * stored as the latest state it would hide every correct reading after it until that date.
 */
export const MAX_READING_LEAD_MS = 5 * 60_000;

/** Whether a reading dated `timestamp` (epoch ms) lies more than `MAX_READING_LEAD_MS` after `now`. */
export function isAheadOfClock(timestamp: number, now: number): boolean {
  return timestamp - now > MAX_READING_LEAD_MS;
}

/**
 * Compass bearings to the 8-point cardinal headings of the read API and the LiveFeed (contract 10).
 * Each heading covers a 45° sector centred on its direction: N covers [337.5°, 360°] and [0°, 22.5°),
 * NE covers [22.5°, 67.5°), and so on clockwise. A bearing exactly on a boundary belongs to the
 * sector clockwise of it (22.5° is NE), so every bearing has exactly one heading.
 */
const SECTOR_DEGREES = 360 / HEADINGS.length;

/**
 * The 8-point cardinal heading of a compass bearing in degrees. Any finite number is accepted and
 * taken modulo 360 (so -90 is W and 450 is E); a non-finite bearing throws a `RangeError`.
 */
export function cardinalHeading(degrees: number): Heading {
  if (!Number.isFinite(degrees)) throw new RangeError(`cardinalHeading: bearing must be a finite number, got ${degrees}`);
  const normalized = ((degrees % 360) + 360) % 360;
  // Shifting by half a sector turns "nearest direction" into a plain floor division.
  const sector = Math.floor((normalized + SECTOR_DEGREES / 2) / SECTOR_DEGREES) % HEADINGS.length;
  return HEADINGS[sector]!;
}

/**
 * Every problem of a transform's output, as field errors with JSON pointer paths (`/gps/0/lat`);
 * `[]` when it is valid canonical telemetry: finite numbers in range (lat −90..90, long −180..180,
 * speed ≥ 0, percentages 0..100), headings from `HEADINGS`, timestamps non-negative integer epoch
 * ms, non-empty device kinds and serials, boolean states where a fault is not also a warning (a fault
 * wins, as in the trailer status), finite numeric metrics, and no two records of the same source
 * (GPS, one device, one cargosafe unit) with the same timestamp — the store keeps one per timestamp.
 */
export function checkCanonicalTelemetry(value: unknown): FieldError[] {
  if (!isPlainObject(value)) return [{ path: '', message: 'must be an object { gps, devices, cargosafe }' }];
  const errors: FieldError[] = [];
  const check = (ok: boolean, path: string, message: string): void => {
    if (!ok) errors.push({ path, message });
  };
  const arrays: Record<string, unknown[]> = {};
  for (const key of ['gps', 'devices', 'cargosafe']) {
    const list = value[key];
    check(Array.isArray(list), `/${key}`, 'must be an array');
    arrays[key] = Array.isArray(list) ? list : [];
  }

  const seen = new Map<string, string>();
  const checkUnique = (key: string, path: string): void => {
    const first = seen.get(key);
    if (first === undefined) seen.set(key, path);
    else errors.push({ path, message: `repeats the source and timestamp of ${first} (one record per source and timestamp)` });
  };

  arrays.gps!.forEach((fix, index) => {
    const at = `/gps/${index}`;
    if (!isPlainObject(fix)) return check(false, at, 'must be an object');
    checkTimestamp(fix.timestamp, `${at}/timestamp`, check);
    check(isNumberIn(fix.lat, -90, 90), `${at}/lat`, 'must be a finite number from -90 to 90');
    check(isNumberIn(fix.long, -180, 180), `${at}/long`, 'must be a finite number from -180 to 180');
    check(isNumberIn(fix.speed, 0, Infinity), `${at}/speed`, 'must be a finite number of mph, at least 0');
    check((HEADINGS as readonly unknown[]).includes(fix.heading), `${at}/heading`, `must be one of ${HEADINGS.join(', ')}`);
    checkUnique(`gps\u0000${String(fix.timestamp)}`, at);
  });

  arrays.devices!.forEach((reading, index) => {
    const at = `/devices/${index}`;
    if (!isPlainObject(reading)) return check(false, at, 'must be an object');
    check(isNonEmptyString(reading.kind), `${at}/kind`, 'must be a non-empty string');
    check(isNonEmptyString(reading.serial), `${at}/serial`, 'must be a non-empty string');
    check(reading.position === null || isNonEmptyString(reading.position), `${at}/position`, 'must be a non-empty string or null');
    checkTimestamp(reading.timestamp, `${at}/timestamp`, check);
    if (!isPlainObject(reading.metrics)) check(false, `${at}/metrics`, 'must be an object of named numbers');
    else
      for (const [metric, number] of Object.entries(reading.metrics))
        check(metric !== '' && isNumberIn(number, -Infinity, Infinity), pointerTo(`${at}/metrics`, metric), 'must be a finite number');
    const state = reading.state;
    if (!isPlainObject(state)) check(false, `${at}/state`, 'must be an object { isWarning, isFault }');
    else {
      check(typeof state.isWarning === 'boolean', `${at}/state/isWarning`, 'must be a boolean');
      check(typeof state.isFault === 'boolean', `${at}/state/isFault`, 'must be a boolean');
      check(!(state.isWarning === true && state.isFault === true), `${at}/state`, 'must not be both a warning and a fault (a fault wins: isWarning false)');
    }
    checkUnique(`device\u0000${String(reading.kind)}\u0000${String(reading.serial)}\u0000${String(reading.timestamp)}`, at);
  });

  arrays.cargosafe!.forEach((reading, index) => {
    const at = `/cargosafe/${index}`;
    if (!isPlainObject(reading)) return check(false, at, 'must be an object');
    check(isNonEmptyString(reading.serial), `${at}/serial`, 'must be a non-empty string');
    checkTimestamp(reading.timestamp, `${at}/timestamp`, check);
    check(typeof reading.doorOpen === 'boolean', `${at}/doorOpen`, 'must be a boolean');
    check(isNumberIn(reading.loadPercent, 0, 100), `${at}/loadPercent`, 'must be a finite number from 0 to 100');
    check(isNumberIn(reading.temperatureC, -Infinity, Infinity), `${at}/temperatureC`, 'must be a finite number');
    check(isNumberIn(reading.humidityPercent, 0, 100), `${at}/humidityPercent`, 'must be a finite number from 0 to 100');
    checkUnique(`cargosafe\u0000${String(reading.serial)}\u0000${String(reading.timestamp)}`, at);
  });
  return errors;
}

function checkTimestamp(value: unknown, path: string, check: (ok: boolean, path: string, message: string) => void): void {
  check(typeof value === 'number' && Number.isSafeInteger(value) && value >= 0, path, 'must be an integer of epoch milliseconds, at least 0');
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value.trim() !== '';
}

function isNumberIn(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= min && value <= max;
}
