/**
 * The `tpms` product (contract 10): a tire-pressure monitoring system reporting all of a trailer's
 * tire sensors at once.
 *
 *   {"readAt": "2026-01-01T12:00:00Z",
 *    "sensors": [{"sensorId": "A1B2C3", "wheel": "axle1-left-outer", "pressurePsi": 104.5, "temperatureC": 31}]}
 *
 * Each sensor becomes a device of the trailer (kind `tpms`, serial = `sensorId`, position = `wheel`)
 * with a reading of `pressurePsi` and `temperatureC`. A sensor is faulted below 70 psi or above
 * 95 °C; otherwise it warns below 90 or above 125 psi, or above 75 °C; a fault is never also a
 * warning. Every threshold is strict: exactly 70, 90 or 125 psi and exactly 75 or 95 °C are OK.
 * One payload carries 1 to 32 sensors with distinct `sensorId`s, and `readAt` must fall from 2000 up
 * to 2100 UTC (an unset device clock is rejected, not stored in 1970). `readAt` is declared as the
 * reading time of every sensor, so intake refuses a reading dated more than 5 minutes after the
 * server's clock at `/readAt`.
 */
import type { CanonicalTelemetry } from '../../core/canonical.ts';
import type { FieldError } from '../../core/errors.ts';
import { parseRfc3339 } from '../../core/json-schema.ts';
import type { DeviceState } from '../../core/model.ts';
import { defineProduct, TEXT_LINE_PATTERN } from '../../core/products.ts';

export interface TpmsSensor {
  sensorId: string;
  wheel: string;
  pressurePsi: number;
  temperatureC: number;
}

export interface TpmsPayload {
  /** RFC 3339 date-time of the reading. */
  readAt: string;
  sensors: TpmsSensor[];
}

/** The thresholds of contract 10; a value exactly on a threshold is not beyond it. */
export const TPMS_THRESHOLDS = Object.freeze({
  faultBelowPsi: 70,
  warnBelowPsi: 90,
  warnAbovePsi: 125,
  warnAboveC: 75,
  faultAboveC: 95,
});

const EARLIEST_READ_AT = Date.UTC(2000, 0, 1);
const LATEST_READ_AT_EXCLUSIVE = Date.UTC(2100, 0, 1);

/** The state of one sensor reading; a fault wins over a warning. */
export function tpmsState(pressurePsi: number, temperatureC: number): DeviceState {
  const t = TPMS_THRESHOLDS;
  const isFault = pressurePsi < t.faultBelowPsi || temperatureC > t.faultAboveC;
  const isWarning = !isFault && (pressurePsi < t.warnBelowPsi || pressurePsi > t.warnAbovePsi || temperatureC > t.warnAboveC);
  return { isWarning, isFault };
}

export default defineProduct<TpmsPayload>({
  name: 'tpms',
  description: 'Tire-pressure sensors: pressure and temperature of each tire of the trailer.',
  // A TPMS gateway reports every minute or on an alarm; 30 a minute per VIN leaves room for alarm bursts.
  limit: { requests: 30, windowSeconds: 60 },
  schema: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'tpms payload',
    description: "One reading of the trailer's tire sensors. Sensor ids must be distinct within a payload.",
    type: 'object',
    additionalProperties: false,
    required: ['readAt', 'sensors'],
    properties: {
      readAt: {
        description: 'When the sensors were read: an RFC 3339 date-time with a time zone, from 2000 up to 2100 UTC.',
        type: 'string',
        format: 'date-time',
        maxLength: 40,
      },
      sensors: {
        description: 'The sensors read, 1 to 32, each with a distinct sensorId.',
        type: 'array',
        minItems: 1,
        maxItems: 32,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['sensorId', 'wheel', 'pressurePsi', 'temperatureC'],
          properties: {
            sensorId: {
              description: "The sensor's own id (printable ASCII, no spaces); it becomes the device serial.",
              type: 'string',
              minLength: 1,
              maxLength: 64,
              pattern: '^[!-~]+$',
            },
            wheel: {
              description: 'Where the tire is, e.g. axle1-left-outer; it becomes the device position.',
              type: 'string',
              minLength: 1,
              maxLength: 32,
              pattern: TEXT_LINE_PATTERN,
            },
            pressurePsi: { description: 'Tire pressure in psi.', type: 'number', minimum: 0, maximum: 300 },
            temperatureC: { description: 'Tire temperature in °C.', type: 'number', minimum: -60, maximum: 200 },
          },
        },
      },
    },
  },
  examples: [
    {
      readAt: '2026-01-01T12:00:00Z',
      sensors: [
        { sensorId: 'A1B2C3', wheel: 'axle1-left-outer', pressurePsi: 104.5, temperatureC: 31 },
        { sensorId: 'A1B2C4', wheel: 'axle1-right-outer', pressurePsi: 86, temperatureC: 34 },
        { sensorId: 'A1B2C5', wheel: 'axle2-left-outer', pressurePsi: 64, temperatureC: 41 },
      ],
    },
    {
      readAt: '2026-01-01T13:00:00.250+01:00',
      sensors: [{ sensorId: 'FF0011', wheel: 'axle2-right-inner', pressurePsi: 100, temperatureC: 22.5 }],
    },
  ],
  validate(payload): FieldError[] {
    const errors: FieldError[] = [];
    const readAt = parseRfc3339(payload.readAt);
    if (readAt === null || readAt < EARLIEST_READ_AT || readAt >= LATEST_READ_AT_EXCLUSIVE)
      errors.push({ path: '/readAt', message: 'must be from 2000-01-01T00:00:00Z up to 2100-01-01T00:00:00Z' });
    const firstIndex = new Map<string, number>();
    payload.sensors.forEach((sensor, index) => {
      const first = firstIndex.get(sensor.sensorId);
      if (first === undefined) firstIndex.set(sensor.sensorId, index);
      else errors.push({ path: `/sensors/${index}/sensorId`, message: `repeats the sensorId of /sensors/${first} ("${sensor.sensorId}")` });
    });
    return errors;
  },
  // validate() guarantees the date parses.
  readingTimes: (payload) => [{ pointer: '/readAt', at: parseRfc3339(payload.readAt)! }],
  transform(_vin, payload): CanonicalTelemetry {
    // validate() guarantees the date parses.
    const timestamp = parseRfc3339(payload.readAt)!;
    return {
      gps: [],
      devices: payload.sensors.map((sensor) => ({
        kind: 'tpms',
        serial: sensor.sensorId,
        position: sensor.wheel,
        timestamp,
        metrics: { pressurePsi: sensor.pressurePsi, temperatureC: sensor.temperatureC },
        state: tpmsState(sensor.pressurePsi, sensor.temperatureC),
      })),
      cargosafe: [],
    };
  },
});
