/**
 * The JSON views of the read API (contract 5): lowerCamelCase names mirroring the proto where the
 * proto has the field, RFC 3339 UTC timestamps, and `null` for a value that is absent (a trailer that
 * has never reported a GPS fix has `"telemetry": null`).
 */
import type {
  CargosafeReading,
  CargosafeUnit,
  Device,
  DeviceReading,
  DeviceState,
  Fleet,
  GpsFix,
  Trailer,
} from './model.ts';
import { statusNameFor, statusView } from './trailer-status.ts';

/** Epoch ms as an RFC 3339 UTC timestamp. */
export function rfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

function nullableTime(ms: number | null): string | null {
  return ms === null ? null : rfc3339(ms);
}

export function fleetView(fleet: Fleet) {
  return { id: fleet.id, name: fleet.name, createdAt: rfc3339(fleet.createdAt) };
}

export function gpsView(fix: GpsFix) {
  return { timestamp: rfc3339(fix.timestamp), lat: fix.lat, long: fix.long, speed: fix.speed, heading: fix.heading };
}

/** A fix on the fleet-wide GPS list: which trailer (its id, VIN and unit id), then the fix as `gpsView` has it. */
export function fleetGpsView(row: { trailer: Trailer; fix: GpsFix }) {
  return { trailerId: row.trailer.id, vin: row.trailer.vin, unitId: row.trailer.unitId, ...gpsView(row.fix) };
}

export function trailerView(trailer: Trailer) {
  return {
    id: trailer.id,
    fleetId: trailer.fleetId,
    unitId: trailer.unitId,
    vin: trailer.vin,
    active: trailer.active,
    status: statusView(trailer.statusName),
    statusDate: rfc3339(trailer.statusDate),
    faultedDevices: trailer.faultedDevices,
    warningDevices: trailer.warningDevices,
    telemetry: trailer.telemetry === null ? null : gpsView(trailer.telemetry),
  };
}

function deviceStatusView(state: DeviceState) {
  return statusView(statusNameFor(state.isFault ? 1 : 0, state.isWarning ? 1 : 0));
}

export function deviceView(device: Device) {
  return {
    id: device.id,
    trailerId: device.trailerId,
    kind: device.kind,
    serial: device.serial,
    position: device.position,
    active: device.active,
    status: deviceStatusView(device.state),
    lastSeen: nullableTime(device.lastSeenAt),
  };
}

export function deviceReadingView(reading: DeviceReading) {
  return { timestamp: rfc3339(reading.timestamp), metrics: reading.metrics, status: deviceStatusView(reading.state) };
}

export function cargosafeReadingView(reading: CargosafeReading) {
  return {
    timestamp: rfc3339(reading.timestamp),
    doorOpen: reading.doorOpen,
    loadPercent: reading.loadPercent,
    temperatureC: reading.temperatureC,
    humidityPercent: reading.humidityPercent,
  };
}

export function cargosafeView(unit: CargosafeUnit) {
  return {
    id: unit.id,
    trailerId: unit.trailerId,
    serial: unit.serial,
    active: unit.active,
    lastSeen: nullableTime(unit.lastSeenAt),
    latest: unit.latest === null ? null : cargosafeReadingView(unit.latest),
  };
}
