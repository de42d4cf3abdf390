/**
 * Canonical telemetry: what every product transformation produces from a partner's payload, and
 * what the store writes. A product knows its partner's JSON; nothing after the transform does.
 * Also the one rule on how far ahead of the server's clock a reading may be dated, which intake
 * (on a product's declared reading times) and the worker (on canonical timestamps) both apply.
 */
import type { DeviceState, GpsFix } from './model.ts';

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
