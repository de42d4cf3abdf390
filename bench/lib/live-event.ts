/** A live update of `customerId`'s trailer `trailerId`, the `n`th published (its `ts` and unit), as the Redis benches publish them. */
import type { LiveTrailerEvent } from '../../dist/core/live-bus.js';

export function benchLiveEvent(customerId: string, trailerId: string, n: number): LiveTrailerEvent {
  return {
    customerId,
    fleet: { id: 1, name: 'Fleet' },
    trailer: {
      id: trailerId,
      fleetId: 1,
      unitId: `U-${n}`,
      vin: '1M8GDM9AXKP042788',
      active: true,
      statusName: 'OK',
      statusDate: 1_780_000_000_000,
      faultedDevices: 0,
      warningDevices: 0,
      telemetry: { timestamp: 1_780_000_000_000, lat: 41.5, long: -87.25, speed: 55, heading: 'NE' },
      createdAt: 1_770_000_000_000,
    },
    ts: n,
  };
}
