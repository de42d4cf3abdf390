/**
 * The `cargosafe` product (contract 10; the payload is Trailwire's design): a cargo-safety unit bound
 * to the trailer that reports its door, the cargo load and the cargo space's climate.
 *
 *   {"unitSerial": "CS-000123", "recordedAt": "2026-01-01T12:00:00Z", "door": "closed",
 *    "loadPercent": 72.5, "temperatureC": 4.2, "humidityPercent": 61}
 *
 * Each payload yields one cargosafe reading of the unit `unitSerial` (the unit is created on first
 * sight and bound to the payload's trailer): `doorOpen` from `door`, and the three measurements
 * unchanged. The unit reports no position — the trailer's GPS product does — so no GPS fix is
 * produced. `recordedAt` must fall from 2000 up to 2100 UTC, like every product's timestamps, and is
 * declared as the reading's time, so intake refuses a reading dated more than 5 minutes after the
 * server's clock at `/recordedAt`.
 */
import type { CanonicalTelemetry } from '../../core/canonical.ts';
import type { FieldError } from '../../core/errors.ts';
import { parseRfc3339 } from '../../core/json-schema.ts';
import { defineProduct } from '../../core/products.ts';

export interface CargosafePayload {
  /** The unit's serial number; it identifies the unit. */
  unitSerial: string;
  /** RFC 3339 date-time of the measurement. */
  recordedAt: string;
  door: 'open' | 'closed';
  /** Cargo load as a percentage of capacity. */
  loadPercent: number;
  temperatureC: number;
  /** Relative humidity in percent. */
  humidityPercent: number;
}

const EARLIEST_RECORDED_AT = Date.UTC(2000, 0, 1);
const LATEST_RECORDED_AT_EXCLUSIVE = Date.UTC(2100, 0, 1);

export default defineProduct<CargosafePayload>({
  name: 'cargosafe',
  description: 'A cargo-safety unit reporting door state, cargo load, temperature and humidity of the cargo space.',
  // Units report every few minutes and on door events; 60 a minute per VIN absorbs a burst of door events.
  limit: { requests: 60, windowSeconds: 60 },
  schema: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'cargosafe payload',
    description: 'One measurement of the cargo-safety unit bound to the trailer.',
    type: 'object',
    additionalProperties: false,
    required: ['unitSerial', 'recordedAt', 'door', 'loadPercent', 'temperatureC', 'humidityPercent'],
    properties: {
      unitSerial: {
        description: "The unit's serial number (letters, digits, '.', '_', '-'); one unit per serial, bound to the trailer of the VIN.",
        type: 'string',
        minLength: 1,
        maxLength: 64,
        pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
      },
      recordedAt: {
        description: 'When the unit measured: an RFC 3339 date-time with a time zone, from 2000 up to 2100 UTC.',
        type: 'string',
        format: 'date-time',
        maxLength: 40,
      },
      door: { description: 'Whether the cargo door is open or closed.', enum: ['open', 'closed'] },
      loadPercent: { description: 'Cargo load as a percentage of capacity.', type: 'number', minimum: 0, maximum: 100 },
      temperatureC: { description: 'Temperature of the cargo space in °C.', type: 'number', minimum: -60, maximum: 100 },
      humidityPercent: { description: 'Relative humidity of the cargo space in percent.', type: 'number', minimum: 0, maximum: 100 },
    },
  },
  examples: [
    { unitSerial: 'CS-000123', recordedAt: '2026-01-01T12:00:00Z', door: 'closed', loadPercent: 72.5, temperatureC: 4.2, humidityPercent: 61 },
    { unitSerial: 'CS-000123', recordedAt: '2026-01-01T12:05:00Z', door: 'open', loadPercent: 0, temperatureC: 11, humidityPercent: 70.5 },
  ],
  validate(payload): FieldError[] {
    const recordedAt = parseRfc3339(payload.recordedAt);
    if (recordedAt === null || recordedAt < EARLIEST_RECORDED_AT || recordedAt >= LATEST_RECORDED_AT_EXCLUSIVE)
      return [{ path: '/recordedAt', message: 'must be from 2000-01-01T00:00:00Z up to 2100-01-01T00:00:00Z' }];
    return [];
  },
  // validate() guarantees the date parses.
  readingTimes: (payload) => [{ pointer: '/recordedAt', at: parseRfc3339(payload.recordedAt)! }],
  transform(_vin, payload): CanonicalTelemetry {
    return {
      gps: [],
      devices: [],
      cargosafe: [
        {
          serial: payload.unitSerial,
          // validate() guarantees the date parses.
          timestamp: parseRfc3339(payload.recordedAt)!,
          doorOpen: payload.door === 'open',
          loadPercent: payload.loadPercent,
          temperatureC: payload.temperatureC,
          humidityPercent: payload.humidityPercent,
        },
      ],
    };
  },
});
