/**
 * Types for the live page's scripts (public/live.js and public/live/*.js), which are plain JavaScript
 * served as they are and checked by `// @ts-check` through tsconfig.json beside this file (`npm run
 * typecheck`). The records are those of the read API (docs/api.md, "Records"); Leaflet and
 * topojson-client are the vendor scripts the page loads, typed loosely: the package ships no types and
 * none is installed for them.
 */

interface TrailerFix {
  timestamp: string;
  lat: number;
  long: number;
  /** mph */
  speed: number;
  heading: string;
}

interface TrailerStatus {
  name: 'OK' | 'Warning' | 'Faulted';
  isWarning: boolean;
  isFault: boolean;
}

interface Trailer {
  id: string;
  fleetId: number;
  unitId: string | null;
  vin: string;
  active: boolean;
  status: TrailerStatus;
  statusDate: string;
  faultedDevices: number;
  warningDevices: number;
  telemetry: TrailerFix | null;
}

interface Fleet {
  id: number;
  name: string;
}

/** An RFC 9457 problem as the API answers it. */
interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
}

interface Window {
  /** Leaflet (vendor/leaflet.js). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  L: any;
  /** topojson-client (vendor/topojson-client.js). */
  topojson: { feature(topology: unknown, object: unknown): { features: Array<{ geometry: { type: string; coordinates: any } | null }> } };
}
