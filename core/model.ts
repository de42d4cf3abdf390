/**
 * The domain records of Trailwire: principals (partners, customers), fleets, trailers, devices,
 * cargosafe units and their telemetry. These are the shapes the core and every store agree on; the
 * HTTP and gRPC adapters render them (see `core/views.ts` for the JSON views of the read API).
 * Times are epoch milliseconds everywhere inside the core; adapters format them at the edge.
 */

/** Who a token or API key belongs to: the two audiences of the auth API. */
export type Audience = 'partners' | 'customers';

export interface Partner {
  id: string;
  name: string;
  /** The one product integration this partner's key is issued for (token scope `product:<name>`). */
  product: string;
  /** Incremented on every rotation; tokens carrying an older version are rejected. */
  keyVersion: number;
  createdAt: number;
  rotatedAt: number | null;
}

export interface Customer {
  id: string;
  name: string;
  keyVersion: number;
  createdAt: number;
  rotatedAt: number | null;
}

/** A partner or a customer, as found by its API key. */
export type Principal =
  | ({ audience: 'partners' } & Partner)
  | ({ audience: 'customers' } & Customer);

export interface Fleet {
  /** Positive int32 (the proto's `fleet_id`). */
  id: number;
  customerId: string;
  name: string;
  createdAt: number;
}

/** The status labels of the specification, derived from device states (contract 4). */
export type StatusName = 'OK' | 'Warning' | 'Faulted';

export interface DeviceState {
  isWarning: boolean;
  isFault: boolean;
}

/** One GPS fix of a trailer. Speed in mph, heading an 8-point cardinal. */
export interface GpsFix {
  timestamp: number;
  lat: number;
  long: number;
  speed: number;
  heading: Heading;
}

export const HEADINGS = ['N', 'NE', 'E', 'SE', 'S', 'SW', 'W', 'NW'] as const;
export type Heading = (typeof HEADINGS)[number];

export interface Trailer {
  /** Opaque, never all digits (a UUID). */
  id: string;
  /** Null while the VIN has not been assigned to a fleet by an operator. */
  fleetId: number | null;
  unitId: string | null;
  vin: string;
  active: boolean;
  statusName: StatusName;
  statusDate: number;
  faultedDevices: number;
  warningDevices: number;
  /** The latest GPS fix, if any was ever received. */
  telemetry: GpsFix | null;
  createdAt: number;
}

export interface Device {
  id: string;
  trailerId: string;
  /** What kind of device this is, e.g. `tpms`. */
  kind: string;
  /** The device's own serial (for TPMS, the sensor id); unique per trailer and kind. */
  serial: string;
  /** Where the device sits, e.g. the wheel position of a tire sensor. */
  position: string | null;
  active: boolean;
  state: DeviceState;
  /** When the device last reported; null if never. */
  lastSeenAt: number | null;
  createdAt: number;
}

/** One reading of a device: named numeric metrics (e.g. `pressurePsi`) and the state it implied. */
export interface DeviceReading {
  deviceId: string;
  timestamp: number;
  metrics: Record<string, number>;
  state: DeviceState;
}

export interface CargosafeUnit {
  id: string;
  /** The trailer the unit is bound to; the unit is visible to that trailer's customer. */
  trailerId: string;
  serial: string;
  active: boolean;
  lastSeenAt: number | null;
  /** The latest reading, if any. */
  latest: CargosafeReading | null;
  createdAt: number;
}

export interface CargosafeReading {
  unitId: string;
  timestamp: number;
  doorOpen: boolean;
  /** Cargo load as a percentage of capacity (0–100). */
  loadPercent: number;
  temperatureC: number;
  humidityPercent: number;
}
