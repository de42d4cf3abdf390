/**
 * A product written the way a Trailwire user would write one, importing only `trailwire/core`: a
 * refrigeration-unit ("reefer") tracker whose payload becomes one device reading of kind `reefer`.
 * A server installs it by path (`startServer({ productModules: ['./examples/custom-product/index.ts'] })`)
 * next to the built-in products; `test/examples/custom-product.test.ts` runs the shared conformance
 * suite (`trailwire/testing`) against it and sends it through intake end to end.
 */
import { defineProduct, parseRfc3339 } from 'trailwire/core';

/** One report of the unit, as the partner sends it. */
export interface ReeferPayload {
  reeferId: string;
  reportedAt: string;
  setpointC: number;
  returnAirC: number;
  fuelPercent: number;
}

export default defineProduct<ReeferPayload>({
  name: 'reefer',
  description: 'A refrigeration unit reporting its setpoint, return-air temperature and fuel level.',
  limit: { requests: 12, windowSeconds: 60 },
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['reeferId', 'reportedAt', 'setpointC', 'returnAirC', 'fuelPercent'],
    properties: {
      reeferId: { description: 'Serial of the unit.', type: 'string', minLength: 1, maxLength: 32, pattern: '^[A-Za-z0-9-]+$' },
      reportedAt: { description: 'RFC 3339 date-time of the report.', type: 'string', format: 'date-time', maxLength: 40 },
      setpointC: { description: 'Target cargo temperature, °C.', type: 'number', minimum: -40, maximum: 30 },
      returnAirC: { description: 'Air temperature returning from the cargo, °C.', type: 'number', minimum: -50, maximum: 60 },
      fuelPercent: { description: 'Fuel left in the unit tank, %.', type: 'number', minimum: 0, maximum: 100 },
    },
  },
  examples: [{ reeferId: 'RF-2231', reportedAt: '2026-01-01T12:00:00Z', setpointC: -18, returnAirC: -16.5, fuelPercent: 64 }],
  // The report states its own time: intake refuses one dated more than 5 minutes ahead, at /reportedAt.
  readingTimes: (payload) => [{ pointer: '/reportedAt', at: parseRfc3339(payload.reportedAt)! }],
  transform(_vin, payload) {
    // Cargo drifting more than 5 °C off its setpoint is spoiling; 2 °C, or a nearly empty tank, needs attention.
    const drift = Math.abs(payload.returnAirC - payload.setpointC);
    const isFault = drift > 5;
    return {
      gps: [],
      devices: [
        {
          kind: 'reefer',
          serial: payload.reeferId,
          position: null,
          timestamp: parseRfc3339(payload.reportedAt)!,
          metrics: { setpointC: payload.setpointC, returnAirC: payload.returnAirC, fuelPercent: payload.fuelPercent },
          state: { isFault, isWarning: !isFault && (drift > 2 || payload.fuelPercent < 15) },
        },
      ],
      cargosafe: [],
    };
  },
});
