/**
 * How a `LiveTrailerEvent` of the core reads on the wire: the `LiveUpdateResponse` of
 * `proto/livefeed/v1/livefeed.proto`, as the plain object proto-loader encodes (field names as in
 * the `.proto`). A field the specification marks `optional` is left out when the trailer has no
 * value for it (a trailer without a unit id, or that never reported a GPS fix), so a client can tell
 * "absent" from "empty".
 */
import type { LiveTrailerEvent } from '../../core/live-bus.ts';
import type { LiveSignal } from '../../core/live-subscriber.ts';
import { statusView } from '../../core/trailer-status.ts';

/** `google.protobuf.Timestamp`. */
export interface TimestampMessage {
  seconds: number;
  nanos: number;
}

export interface StatusMessage {
  name?: string;
  is_warning?: boolean;
  is_fault?: boolean;
}

export interface TelemetryMessage {
  timestamp?: TimestampMessage;
  lat?: number;
  long?: number;
  speed?: number;
  heading?: string;
}

export interface TrailerMessage {
  id: string;
  unit_id?: string;
  vin?: string;
  status?: StatusMessage;
  status_date?: TimestampMessage;
  faulted_devices: number;
  warning_devices: number;
  telemetry?: TelemetryMessage;
}

export interface LiveUpdateMessage {
  fleet_id: number;
  fleet_name?: string;
  ts: TimestampMessage;
  trailer: TrailerMessage;
}

export interface LiveUpdateResponseMessage {
  is_heartbeat: boolean;
  live_update?: LiveUpdateMessage;
  /** (added, issue 32) The update's position; on a heartbeat or snapshot end, the stream's own position. */
  position?: string;
  is_snapshot?: boolean;
  snapshot_end?: boolean;
  resume_reset?: boolean;
}

/** The keep-alive message. */
export const HEARTBEAT_MESSAGE: LiveUpdateResponseMessage = { is_heartbeat: true };

/** Epoch milliseconds (fractions kept to the nanosecond) as a `google.protobuf.Timestamp`. */
export function timestampOf(ms: number): TimestampMessage {
  const seconds = Math.floor(ms / 1000);
  // Timestamp nanos are always in [0, 1e9), also before 1970 (seconds is floored).
  const nanos = Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1e6));
  return { seconds, nanos };
}

/** The stream message of one live update. */
export function liveUpdateResponseOf(event: LiveTrailerEvent): LiveUpdateResponseMessage {
  const { trailer } = event;
  const status = statusView(trailer.statusName);
  const message: TrailerMessage = {
    id: trailer.id,
    vin: trailer.vin,
    status: { name: status.name, is_warning: status.isWarning, is_fault: status.isFault },
    status_date: timestampOf(trailer.statusDate),
    faulted_devices: trailer.faultedDevices,
    warning_devices: trailer.warningDevices,
  };
  if (trailer.unitId !== null) message.unit_id = trailer.unitId;
  if (trailer.telemetry !== null) {
    const fix = trailer.telemetry;
    message.telemetry = { timestamp: timestampOf(fix.timestamp), lat: fix.lat, long: fix.long, speed: fix.speed, heading: fix.heading };
  }
  const response: LiveUpdateResponseMessage = {
    is_heartbeat: false,
    live_update: { fleet_id: event.fleet.id, fleet_name: event.fleet.name, ts: timestampOf(event.ts), trailer: message },
  };
  if (event.position !== undefined) response.position = event.position;
  if (event.snapshot) response.is_snapshot = true;
  return response;
}

/** A heartbeat, with the stream's own position when it has one. */
export function heartbeatMessageOf(position: string | null): LiveUpdateResponseMessage {
  return position === null ? HEARTBEAT_MESSAGE : { is_heartbeat: true, position };
}

/** The message of a stream signal (issue 32): the end of a snapshot, or a resume position outside the window. */
export function signalMessageOf(signal: LiveSignal): LiveUpdateResponseMessage {
  if (signal.kind === 'resume-reset') return { is_heartbeat: false, resume_reset: true };
  return signal.position === null ? { is_heartbeat: false, snapshot_end: true } : { is_heartbeat: false, snapshot_end: true, position: signal.position };
}
