/**
 * Trailer status derivation (contract 4): a trailer is `Faulted` when any of its devices is faulted,
 * else `Warning` when any warns, else `OK`. The status date moves only when the name changes, so a
 * customer can tell how long a trailer has been in its current condition.
 */
import type { DeviceState, StatusName } from './model.ts';

export interface TrailerStatus {
  statusName: StatusName;
  statusDate: number;
  faultedDevices: number;
  warningDevices: number;
}

/** Counts the device states; a faulted device counts as faulted only, not also as warning. */
export function countDeviceStates(states: Iterable<DeviceState>): { faulted: number; warning: number } {
  let faulted = 0;
  let warning = 0;
  for (const state of states) {
    if (state.isFault) faulted++;
    else if (state.isWarning) warning++;
  }
  return { faulted, warning };
}

export function statusNameFor(faulted: number, warning: number): StatusName {
  if (faulted > 0) return 'Faulted';
  if (warning > 0) return 'Warning';
  return 'OK';
}

/**
 * The trailer's status after its devices changed: counts from the current device states, the name
 * from the counts, and the date carried over unless the name changed (then `at`).
 */
export function deriveTrailerStatus(
  previous: { statusName: StatusName; statusDate: number },
  counts: { faulted: number; warning: number },
  at: number,
): TrailerStatus {
  const statusName = statusNameFor(counts.faulted, counts.warning);
  return {
    statusName,
    statusDate: statusName === previous.statusName ? previous.statusDate : at,
    faultedDevices: counts.faulted,
    warningDevices: counts.warning,
  };
}

/** The `Status` message / JSON of a status name. */
export function statusView(name: StatusName): { name: StatusName; isWarning: boolean; isFault: boolean } {
  return { name, isWarning: name === 'Warning', isFault: name === 'Faulted' };
}
