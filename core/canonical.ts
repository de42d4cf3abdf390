/**
 * Canonical telemetry: what every product transformation produces from a partner's payload, and
 * what the store writes. A product knows its partner's JSON; nothing after the transform does.
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
 * How far a reading's own time may lie after the server's clock (contract 4: 5 minutes). Beyond it
 * the reading is refused (at intake, or dead-lettered when only a transform can date it), and no
 * store lets it become a latest state.
 */
export const MAX_READING_LEAD_MS = 5 * 60_000;
