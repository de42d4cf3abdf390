/**
 * The intake load of the benchmarks: a fleet of distinct, valid VINs and a gps-basic fix body, so
 * that every intake benchmark sends the same kind of request.
 */
import { withCheckDigit } from '../../core/vin.ts';

/** `count` distinct VINs starting with `prefix` (five characters); position 9 is the check digit, so the running number follows it. */
export function benchVins(count: number, prefix = '1BNCH'): string[] {
  return Array.from({ length: count }, (_, i) => withCheckDigit(`${prefix}0000${String(i).padStart(8, '0')}`));
}

/** A gps-basic payload: one fix at `timestamp` (epoch seconds), as JSON text. */
export function gpsFixBody(timestamp: number): string {
  return JSON.stringify({ timestamp, position: { latitude: 41.88, longitude: -87.63 }, speedKph: 88.5, bearingDeg: 271 });
}
