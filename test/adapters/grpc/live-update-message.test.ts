import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HEARTBEAT_MESSAGE, liveUpdateResponseOf, timestampOf } from '../../../adapters/grpc/live-update-message.ts';
import { decodeLiveUpdateResponse, encodeLiveUpdateResponse } from '../../../adapters/grpc/proto.ts';
import type { LiveTrailerEvent } from '../../../core/live-bus.ts';

const event: LiveTrailerEvent = {
  customerId: 'customer-a',
  fleet: { id: 2_147_483_647, name: 'Northern reefers' },
  trailer: {
    id: '6f1c2a4e-0000-4000-8000-000000000001',
    fleetId: 2_147_483_647,
    unitId: 'TR-042',
    vin: '1M8GDM9AXKP042788',
    active: true,
    statusName: 'Faulted',
    statusDate: Date.UTC(2026, 0, 1, 10, 0, 0, 125),
    faultedDevices: 2,
    warningDevices: 1,
    telemetry: { timestamp: Date.UTC(2026, 0, 1, 11, 30), lat: 51.507351, long: -0.127758, speed: 48.47, heading: 'SW' },
    createdAt: Date.UTC(2025, 11, 1),
  },
  ts: Date.UTC(2026, 0, 1, 11, 30, 1, 999),
};

describe('timestampOf', () => {
  it('splits epoch milliseconds into seconds and nanos, keeping sub-millisecond fractions', () => {
    assert.deepEqual(timestampOf(0), { seconds: 0, nanos: 0 });
    assert.deepEqual(timestampOf(1_780_315_200_250), { seconds: 1_780_315_200, nanos: 250_000_000 });
    assert.deepEqual(timestampOf(1_780_315_200_000.5), { seconds: 1_780_315_200, nanos: 500_000 });
  });

  it('keeps nanos non-negative before 1970, as google.protobuf.Timestamp requires', () => {
    assert.deepEqual(timestampOf(-1), { seconds: -1, nanos: 999_000_000 });
    assert.deepEqual(timestampOf(-1000), { seconds: -1, nanos: 0 });
  });
});

describe('liveUpdateResponseOf', () => {
  it('maps every field of the event and its trailer', () => {
    assert.deepEqual(liveUpdateResponseOf(event), {
      is_heartbeat: false,
      live_update: {
        fleet_id: 2_147_483_647,
        fleet_name: 'Northern reefers',
        ts: { seconds: Date.UTC(2026, 0, 1, 11, 30, 1) / 1000, nanos: 999_000_000 },
        trailer: {
          id: '6f1c2a4e-0000-4000-8000-000000000001',
          unit_id: 'TR-042',
          vin: '1M8GDM9AXKP042788',
          status: { name: 'Faulted', is_warning: false, is_fault: true },
          status_date: { seconds: Date.UTC(2026, 0, 1, 10) / 1000, nanos: 125_000_000 },
          faulted_devices: 2,
          warning_devices: 1,
          telemetry: {
            timestamp: { seconds: Date.UTC(2026, 0, 1, 11, 30) / 1000, nanos: 0 },
            lat: 51.507351,
            long: -0.127758,
            speed: 48.47,
            heading: 'SW',
          },
        },
      },
    });
  });

  it('derives the status flags from the status name', () => {
    const statusOf = (statusName: 'OK' | 'Warning' | 'Faulted') =>
      liveUpdateResponseOf({ ...event, trailer: { ...event.trailer, statusName } }).live_update!.trailer.status;
    assert.deepEqual(statusOf('OK'), { name: 'OK', is_warning: false, is_fault: false });
    assert.deepEqual(statusOf('Warning'), { name: 'Warning', is_warning: true, is_fault: false });
    assert.deepEqual(statusOf('Faulted'), { name: 'Faulted', is_warning: false, is_fault: true });
  });

  it('leaves optional fields out when the trailer has no value, and they stay absent on the wire', () => {
    const bare = { ...event, trailer: { ...event.trailer, unitId: null, telemetry: null } };
    const message = liveUpdateResponseOf(bare);
    assert.equal('unit_id' in message.live_update!.trailer, false);
    assert.equal('telemetry' in message.live_update!.trailer, false);

    // Decoded as the service's own loader sees it: proto3 `optional` presence survives encoding.
    const decoded = decodeLiveUpdateResponse(encodeLiveUpdateResponse(message)) as any;
    assert.equal(decoded._live_update, 'live_update');
    assert.equal(decoded.live_update.trailer._unit_id, undefined);
    assert.equal(decoded.live_update.trailer.unit_id, undefined);
    assert.equal(decoded.live_update.trailer._telemetry, undefined);
    assert.equal(decoded.live_update.trailer._vin, 'vin');
  });

  it('round-trips through protobuf with every value intact', () => {
    const decoded = decodeLiveUpdateResponse(encodeLiveUpdateResponse(liveUpdateResponseOf(event))) as any;
    const update = decoded.live_update;
    assert.equal(decoded.is_heartbeat, false);
    assert.equal(update.fleet_id, 2_147_483_647);
    assert.equal(update.fleet_name, 'Northern reefers');
    assert.deepEqual(update.ts, { seconds: Date.UTC(2026, 0, 1, 11, 30, 1) / 1000, nanos: 999_000_000 });
    assert.equal(update.trailer.faulted_devices, 2);
    assert.equal(update.trailer.telemetry.lat, 51.507351);
    assert.equal(update.trailer.telemetry.long, -0.127758);
    assert.equal(update.trailer.telemetry.heading, 'SW');
    assert.equal(update.trailer.status.is_fault, true);
  });

  it('a heartbeat is is_heartbeat with no live_update', () => {
    const decoded = decodeLiveUpdateResponse(encodeLiveUpdateResponse(HEARTBEAT_MESSAGE)) as any;
    assert.equal(decoded.is_heartbeat, true);
    assert.equal(decoded.live_update, undefined);
    assert.equal(decoded._live_update, undefined);
  });
});
