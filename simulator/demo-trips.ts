/**
 * A demo trailer's last day as its GPS tracker reported it: parked at a yard the whole time, or
 * pulled along the interstate corridors of its region by a driver who keeps the US hours-of-service
 * rules for property carriers (49 CFR 395.3): at most 11 hours of driving and 14 on duty after 10
 * consecutive hours off, and a 30-minute break before 8 hours of driving. Here the 11 hours also
 * hold for the whole day shown, which may hold the end of one duty period and the start of the next,
 * so "at most 11 hours of driving a day" is true however that day is cut.
 *
 * The day is simulated in the tracker's own 5-minute steps: the speed is constant within a step, and
 * a trailer starts or stops only on a step, so every step in which it moved is counted as driving.
 * The driving hours one reads back from the fixes are therefore never fewer than the hours the
 * driver was held to.
 */
import type { Faker } from '@faker-js/faker';
import { cardinalHeading } from '../core/canonical.ts';
import type { GpsFix } from '../core/model.ts';
import { citiesOf, type Region } from './demo-geography.ts';
import { RouteCursor } from './demo-roads.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** How often the tracker reports a fix, and the step of the simulation. */
const FIX_INTERVAL_MS = 5 * MINUTE;

/** The hours-of-service limits the demo drivers keep. */
const HOURS_OF_SERVICE = Object.freeze({
  /** Per duty period and, in the demo, per any 24 hours. */
  maxDrivingMs: 11 * HOUR,
  /** From the start of a duty period; no driving after it. */
  maxDutyMs: 14 * HOUR,
  /** Between two duty periods. */
  minOffDutyMs: 10 * HOUR,
  /** Driving allowed before a break of at least `minBreakMs`. */
  maxDrivingWithoutBreakMs: 8 * HOUR,
  minBreakMs: 30 * MINUTE,
});

/** What a trailer is doing: driving, stopped for a reason, or parked at a yard all day. */
export type ActivityKind = 'driving' | 'break' | 'fuel' | 'delivery' | 'off-duty' | 'parked';

/** One activity over `[start, end)`. */
export interface Activity {
  kind: ActivityKind;
  start: number;
  end: number;
}

export interface TrailerDay {
  /** One fix every `FIX_INTERVAL_MS`, from the start of the day to its end, both included. */
  fixes: GpsFix[];
  /** Back to back, from the start of the day to past its end. */
  activities: Activity[];
}

export interface TrailerDayOptions {
  /** The region whose corridors (or, parked, whose cities) the trailer keeps to. */
  region: Region;
  /** First fix, ms since the epoch. */
  start: number;
  /** Last fix; `end - start` is a multiple of `FIX_INTERVAL_MS`. */
  end: number;
  /** Parked at a yard in the region the whole day. */
  parked: boolean;
}

/** The trailer's day: its fixes and what it was doing. */
export function planTrailerDay(faker: Faker, options: TrailerDayOptions): TrailerDay {
  if ((options.end - options.start) % FIX_INTERVAL_MS !== 0 || options.end < options.start)
    throw new RangeError(`planTrailerDay: the day must be a whole number of ${FIX_INTERVAL_MS} ms steps`);
  return options.parked ? parkedDay(faker, options) : drivingDay(faker, options);
}

/** The activity at `t`, or the last one when `t` is past them all. */
export function activityAt(day: TrailerDay, t: number): Activity {
  return day.activities.find((activity) => t >= activity.start && t < activity.end) ?? day.activities.at(-1)!;
}

function parkedDay(faker: Faker, { region, start, end }: TrailerDayOptions): TrailerDay {
  const yard = faker.helpers.arrayElement(citiesOf(region));
  // A yard within a kilometre of the city's point, the trailer standing the way it was backed in.
  const lat = round6(yard.lat + faker.number.float({ min: -0.008, max: 0.008 }));
  const long = round6(yard.long + faker.number.float({ min: -0.008, max: 0.008 }));
  const heading = cardinalHeading(faker.number.float({ min: 0, max: 359 }));
  const fixes: GpsFix[] = [];
  for (let t = start; t <= end; t += FIX_INTERVAL_MS) fixes.push({ timestamp: t, lat, long, speed: 0, heading });
  return { fixes, activities: [{ kind: 'parked', start, end: end + FIX_INTERVAL_MS }] };
}

interface DutyPeriod {
  start: number;
  /** No driving from here on, and the stops end here. */
  dutyEnd: number;
  drivingLeftMs: number;
}

interface Stop {
  kind: Exclude<ActivityKind, 'driving' | 'parked'>;
  until: number;
}

function drivingDay(faker: Faker, { region, start, end }: TrailerDayOptions): TrailerDay {
  const route = RouteCursor.somewhereIn(faker, region);
  // Drivers keep their home terminal's clock; standard time from the longitude is close enough.
  const utcOffsetMs = Math.round(route.position().long / 15) * HOUR;
  const shiftStartOfDay = shiftStartTimeOfDay(faker);
  const sinceShiftStart = Math.floor(mod(start + utcOffsetMs - shiftStartOfDay, DAY) / FIX_INTERVAL_MS) * FIX_INTERVAL_MS;

  let duty: DutyPeriod | null = newDutyPeriod(faker, start - sinceShiftStart);
  let nextDutyStart = duty.start + DAY;
  let drivenSinceBreakMs = 0;
  let stop: Stop | null = null;
  if (start >= duty.dutyEnd) {
    duty = null;
    stop = { kind: 'off-duty', until: nextDutyStart };
  } else {
    // Joined mid-shift: it has driven about three quarters of the time since the shift began, and has
    // at least two hours of driving left.
    const drivenMs = Math.min(duty.drivingLeftMs - 2 * HOUR, steps(sinceShiftStart * 0.75));
    duty.drivingLeftMs -= Math.max(0, drivenMs);
    drivenSinceBreakMs = steps(faker.number.float({ min: 0, max: Math.min(Math.max(0, drivenMs), 4 * HOUR) }));
  }

  let windowDrivingLeftMs = HOURS_OF_SERVICE.maxDrivingMs;
  let stintLeftMs = 0;
  let cruiseMph = 0;
  let speedMph = 0;
  let bearing = route.position().bearing;
  const fixes: GpsFix[] = [];
  const activities: Activity[] = [];

  for (let t = start; t <= end; t += FIX_INTERVAL_MS) {
    if (!duty && t >= nextDutyStart) {
      duty = newDutyPeriod(faker, t);
      nextDutyStart = t + DAY;
      stop = null;
      drivenSinceBreakMs = 0;
    }
    if (duty && stop && t >= stop.until) stop = null;
    if (duty && !stop && stintLeftMs <= 0) {
      const drivableMs = Math.min(duty.drivingLeftMs, windowDrivingLeftMs, duty.dutyEnd - t);
      const beforeBreakMs = HOURS_OF_SERVICE.maxDrivingWithoutBreakMs - drivenSinceBreakMs;
      if (drivableMs < 30 * MINUTE) {
        // Too little left to be worth a start: the shift ends where the trailer stands.
        duty = null;
        stop = { kind: 'off-duty', until: nextDutyStart };
      } else if (beforeBreakMs < 30 * MINUTE) {
        stop = { kind: 'break', until: Math.min(t + HOURS_OF_SERVICE.minBreakMs, duty.dutyEnd) };
        drivenSinceBreakMs = 0;
      } else {
        stintLeftMs = Math.min(drivableMs, beforeBreakMs, steps(faker.number.float({ min: 1.75 * HOUR, max: 3.5 * HOUR })));
        cruiseMph = faker.number.float({ min: 58, max: 66 });
        speedMph = 0;
      }
    }

    const driving = stop === null && duty !== null && stintLeftMs > 0;
    if (driving) speedMph = nextSpeed(faker, speedMph, cruiseMph, stintLeftMs <= FIX_INTERVAL_MS || route.remainingMiles() <= (cruiseMph * FIX_INTERVAL_MS) / HOUR);
    const here = route.position();
    if (driving) bearing = here.bearing;
    fixes.push({ timestamp: t, lat: round6(here.lat), long: round6(here.long), speed: driving ? round1(speedMph) : 0, heading: cardinalHeading(bearing) });
    note(activities, driving ? 'driving' : stop!.kind, t);
    if (!driving) continue;

    const arrived = route.advance((speedMph * FIX_INTERVAL_MS) / HOUR);
    duty!.drivingLeftMs -= FIX_INTERVAL_MS;
    windowDrivingLeftMs -= FIX_INTERVAL_MS;
    drivenSinceBreakMs += FIX_INTERVAL_MS;
    stintLeftMs -= FIX_INTERVAL_MS;
    const next = t + FIX_INTERVAL_MS;
    if (arrived) {
      // At a customer's dock: unload or load, then on to another city.
      stop = { kind: 'delivery', until: Math.min(next + steps(faker.number.float({ min: 45 * MINUTE, max: 2 * HOUR })), duty!.dutyEnd) };
      stintLeftMs = 0;
      route.turnOntoNextLeg(faker);
    } else if (stintLeftMs <= 0) {
      const kind = faker.datatype.boolean({ probability: 0.4 }) ? 'fuel' : 'break';
      const needed = drivenSinceBreakMs >= 5 * HOUR;
      const length = steps(faker.number.float({ min: needed ? 30 * MINUTE : 15 * MINUTE, max: 45 * MINUTE }));
      stop = { kind, until: Math.min(next + length, duty!.dutyEnd) };
    }
    if (stop && stop.until - next >= HOURS_OF_SERVICE.minBreakMs) drivenSinceBreakMs = 0;
  }
  closeActivities(activities, end + FIX_INTERVAL_MS);
  return { fixes, activities };
}

/** Most shifts start early in the morning; some drivers run afternoons and nights. */
function shiftStartTimeOfDay(faker: Faker): number {
  const hour = faker.datatype.boolean({ probability: 0.65 }) ? faker.number.float({ min: 3, max: 9 }) : faker.number.float({ min: 0, max: 24 });
  return steps(hour * HOUR);
}

function newDutyPeriod(faker: Faker, start: number): DutyPeriod {
  return {
    start,
    dutyEnd: start + steps(faker.number.float({ min: 11 * HOUR, max: HOURS_OF_SERVICE.maxDutyMs })),
    drivingLeftMs: steps(faker.number.float({ min: 8.5 * HOUR, max: HOURS_OF_SERVICE.maxDrivingMs })),
  };
}

/**
 * The speed for the next step: off a ramp or towards an exit (`slowing`) 35-45 mph, else drifting
 * around the stint's cruising speed, within 55-70 mph.
 */
function nextSpeed(faker: Faker, previous: number, cruise: number, slowing: boolean): number {
  if (previous === 0 || slowing) return faker.number.float({ min: 35, max: 45 });
  const drifted = (previous < 55 ? cruise : previous) + faker.number.float({ min: -3, max: 3 });
  return Math.min(70, Math.max(55, Math.min(cruise + 4, Math.max(cruise - 5, drifted))));
}

function note(activities: Activity[], kind: ActivityKind, t: number): void {
  const last = activities.at(-1);
  if (last?.kind === kind) return;
  if (last) last.end = t;
  activities.push({ kind, start: t, end: t });
}

function closeActivities(activities: Activity[], end: number): void {
  const last = activities.at(-1);
  if (last) last.end = end;
}

/** Down to whole simulation steps. */
function steps(ms: number): number {
  return Math.floor(ms / FIX_INTERVAL_MS) * FIX_INTERVAL_MS;
}

function mod(value: number, modulus: number): number {
  return ((value % modulus) + modulus) % modulus;
}

function round6(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
