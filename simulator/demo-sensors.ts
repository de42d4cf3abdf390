/**
 * The sensors of a demo trailer over its day: eight tire sensors read every 30 minutes, and on some
 * trailers a cargosafe unit read every 15 minutes. The readings follow what the trailer did: tires
 * warm up (and their pressure with them) while it drives and cool when it stands, the cargo door
 * opens at its deliveries. A tire condition shows through the tpms thresholds, so the status the
 * service derives is the honest one: a slow leak ends below the fault threshold, a dragging brake
 * (on a trailer driving now) or an under-inflated tire (on one standing now) warns.
 */
import type { Faker } from '@faker-js/faker';
import type { CanonicalCargosafeReading, CanonicalDeviceReading } from '../core/canonical.ts';
import { tpmsState } from '../products/tpms/index.ts';
import { activityAt, type TrailerDay } from './demo-trips.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const TIRE_INTERVAL_MS = 30 * MINUTE;
const CARGO_INTERVAL_MS = 15 * MINUTE;
const WHEELS = ['LF-outer', 'LF-inner', 'RF-outer', 'RF-inner', 'LR-outer', 'LR-inner', 'RR-outer', 'RR-inner'];
/** Gauge pressure is relative to the atmosphere; the gas law applies to the absolute pressure. */
const ATMOSPHERE_PSI = 14.7;
const KELVIN = 273.15;

/** What is wrong with one of the trailer's tires, if anything. */
export type TireCondition = 'ok' | 'slow-leak' | 'dragging-brake' | 'under-inflated';

/** The warning a trailer can show at `at`: a dragging brake heats its tire only while driving. */
export function warningFor(day: TrailerDay, at: number): TireCondition {
  return activityAt(day, at).kind === 'driving' ? 'dragging-brake' : 'under-inflated';
}

export interface TireOptions {
  /** Names the sensors (`TPMS-<n>-<wheel>`). */
  trailerNumber: number;
  condition: TireCondition;
  start: number;
  end: number;
}

/** Eight tire sensors read every 30 minutes from `start` to `end`. */
export function tireReadings(faker: Faker, day: TrailerDay, { trailerNumber, condition, start, end }: TireOptions): CanonicalDeviceReading[] {
  const ambientC = faker.number.float({ min: 8, max: 28 });
  const failing = faker.number.int({ min: 0, max: WHEELS.length - 1 });
  // A dragging brake shows for the last hour or three of the day.
  const dragFrom = end - faker.number.float({ min: 1, max: 3 }) * HOUR;
  const readings: CanonicalDeviceReading[] = [];
  for (const [index, wheel] of WHEELS.entries()) {
    const serial = `TPMS-${trailerNumber}-${index + 1}`;
    const affected = index === failing ? condition : 'ok';
    const coldPsi =
      affected === 'under-inflated' ? faker.number.float({ min: 78, max: 84 }) : faker.number.float({ min: 98, max: 108 });
    // A slow leak loses air steadily all day and ends well below 70 psi, even hot.
    const leakedPsi = affected === 'slow-leak' ? coldPsi - faker.number.float({ min: 52, max: 60 }) : coldPsi;
    let temperatureC = ambientC + 2;
    for (let t = start; t <= end; t += TIRE_INTERVAL_MS) {
      const driving = activityAt(day, t).kind === 'driving';
      const dragging = affected === 'dragging-brake' && driving && t >= dragFrom;
      const targetC = dragging ? faker.number.float({ min: 80, max: 88 }) : driving ? ambientC + faker.number.float({ min: 14, max: 22 }) : ambientC + 2;
      // Half an hour brings a tire most of the way to its driving or standing temperature.
      temperatureC = dragging ? targetC : temperatureC + (targetC - temperatureC) * 0.6 + faker.number.float({ min: -1, max: 1 });
      const progress = (t - start) / Math.max(1, end - start);
      const cold = coldPsi + (leakedPsi - coldPsi) * progress;
      const pressurePsi = round1(((cold + ATMOSPHERE_PSI) * (KELVIN + temperatureC)) / (KELVIN + ambientC) - ATMOSPHERE_PSI);
      const roundedC = round1(temperatureC);
      readings.push({
        kind: 'tpms',
        serial,
        position: wheel,
        timestamp: t,
        metrics: { pressurePsi, temperatureC: roundedC },
        state: tpmsState(pressurePsi, roundedC),
      });
    }
  }
  return readings;
}

export interface CargoOptions {
  serial: string;
  /** A refrigerated trailer holds its load at 2-4 °C; a dry van follows the weather. */
  reefer: boolean;
  start: number;
  end: number;
}

/** A cargosafe unit read every 15 minutes; the door opens for the first half hour of each delivery. */
export function cargoReadings(faker: Faker, day: TrailerDay, { serial, reefer, start, end }: CargoOptions): CanonicalCargosafeReading[] {
  const ambientC = faker.number.float({ min: 10, max: 30 });
  const setpointC = faker.number.float({ min: 2, max: 4 });
  let loadPercent = faker.number.int({ min: 40, max: 95 });
  let handled: number | undefined;
  const readings: CanonicalCargosafeReading[] = [];
  for (let t = start; t <= end; t += CARGO_INTERVAL_MS) {
    const activity = activityAt(day, t);
    const doorOpen = activity.kind === 'delivery' && t - activity.start < 30 * MINUTE;
    if (doorOpen && handled !== activity.start) {
      handled = activity.start;
      // Drop part of the load, or, nearly empty, take on a new one.
      loadPercent = loadPercent > 35 ? Math.max(0, loadPercent - faker.number.int({ min: 20, max: 60 })) : faker.number.int({ min: 70, max: 100 });
    }
    const insideC = reefer ? setpointC + (doorOpen ? faker.number.float({ min: 3, max: 6 }) : 0) : ambientC + faker.number.float({ min: -2, max: 6 });
    readings.push({
      serial,
      timestamp: t,
      doorOpen,
      loadPercent,
      temperatureC: round1(insideC + faker.number.float({ min: -0.4, max: 0.4 })),
      humidityPercent: round1(faker.number.float({ min: reefer ? 65 : 40, max: reefer ? 85 : 70 })),
    });
  }
  return readings;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
