/**
 * The `gps-basic` product (contract 10): a GPS tracker that reports one fix per payload.
 *
 *   {"timestamp": 1767268800, "position": {"latitude": 41.88, "longitude": -87.63},
 *    "speedKph": 88.5, "bearingDeg": 271}
 *
 * It yields the trailer's GPS fix: the time in epoch ms, the speed in mph rounded to 0.1 mph (GPS
 * speed is good to a few tenths of a km/h, so further digits are noise and would only make the API's
 * numbers unstable), and the bearing as an 8-point cardinal heading (`cardinalHeading`).
 * Timestamps must fall from 2000-01-01T00:00:00Z up to, not including, 2100-01-01T00:00:00Z: that
 * rejects unset device clocks (0, negative) and millisecond timestamps sent as seconds. The schema is
 * static (it is published and the examples must stay valid), so the server's clock is not in it:
 * `timestamp` is declared as the fix's reading time, and intake refuses a fix dated more than
 * 5 minutes after the server's clock at `/timestamp`. Late fixes are fine: trackers upload buffered
 * fixes after a coverage gap.
 */
import { type CanonicalTelemetry, cardinalHeading } from '../../core/canonical.ts';
import { defineProduct } from '../../core/products.ts';

/** One fix as the tracker sends it. */
export interface GpsBasicPayload {
  /** Epoch seconds (fractions allowed). */
  timestamp: number;
  position: { latitude: number; longitude: number };
  speedKph: number;
  bearingDeg: number;
}

/** The earliest and the first rejected epoch second of a fix. */
export const EARLIEST_TIMESTAMP = Date.UTC(2000, 0, 1) / 1000;
export const LATEST_TIMESTAMP_EXCLUSIVE = Date.UTC(2100, 0, 1) / 1000;

/** Kilometres per mile (international mile, exact). */
export const KM_PER_MILE = 1.609344;

/** The fix's time in integer epoch ms: fractional seconds keep their milliseconds. */
function fixTime(payload: GpsBasicPayload): number {
  return Math.round(payload.timestamp * 1000);
}

/** Km/h to mph, rounded to 0.1 mph. */
export function kphToMph(kph: number): number {
  return Math.round((kph / KM_PER_MILE) * 10) / 10;
}

export default defineProduct<GpsBasicPayload>({
  name: 'gps-basic',
  description: 'A GPS tracker reporting one position fix with speed and bearing per payload.',
  // A tracker reports every few seconds at most; 120 a minute per VIN leaves room for uploads of
  // buffered fixes after a coverage gap.
  limit: { requests: 120, windowSeconds: 60 },
  schema: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'gps-basic payload',
    description: 'One GPS fix of the trailer.',
    type: 'object',
    additionalProperties: false,
    required: ['timestamp', 'position', 'speedKph', 'bearingDeg'],
    properties: {
      timestamp: {
        description: 'When the fix was taken, in epoch seconds (fractions allowed), from 2000-01-01 up to 2100-01-01 UTC.',
        type: 'number',
        minimum: EARLIEST_TIMESTAMP,
        exclusiveMaximum: LATEST_TIMESTAMP_EXCLUSIVE,
      },
      position: {
        description: 'The WGS 84 position in decimal degrees.',
        type: 'object',
        additionalProperties: false,
        required: ['latitude', 'longitude'],
        properties: {
          latitude: { description: 'Decimal degrees, north positive.', type: 'number', minimum: -90, maximum: 90 },
          longitude: { description: 'Decimal degrees, east positive.', type: 'number', minimum: -180, maximum: 180 },
        },
      },
      speedKph: { description: 'Ground speed in km/h.', type: 'number', minimum: 0, maximum: 400 },
      bearingDeg: { description: 'Direction of travel in degrees clockwise from true north.', type: 'number', minimum: 0, maximum: 360 },
    },
  },
  examples: [
    { timestamp: 1767268800, position: { latitude: 41.8781, longitude: -87.6298 }, speedKph: 88.5, bearingDeg: 271 },
    { timestamp: 1767268860.5, position: { latitude: -33.8688, longitude: 151.2093 }, speedKph: 0, bearingDeg: 360 },
  ],
  readingTimes: (payload) => [{ pointer: '/timestamp', at: fixTime(payload) }],
  transform(_vin, payload): CanonicalTelemetry {
    return {
      gps: [
        {
          timestamp: fixTime(payload),
          lat: payload.position.latitude,
          long: payload.position.longitude,
          speed: kphToMph(payload.speedKph),
          heading: cardinalHeading(payload.bearingDeg),
        },
      ],
      devices: [],
      cargosafe: [],
    };
  },
});
