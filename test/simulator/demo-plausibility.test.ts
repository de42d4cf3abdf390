/**
 * The demo looks like a real fleet (issue 15): every fix of every demo trailer lies on land in the
 * region its fleet is named for (checked against the Census Bureau's outline of the contiguous US,
 * not against the simulator's own table), the distance between consecutive fixes is one a truck could
 * cover at the speeds it reported, no trailer drives more than 11 hours in its day or 8 without a
 * half-hour break, every fleet has trailers on the road and parked, and the main customer sees one
 * faulted trailer and a few warnings. A fresh demo is a new one each time; the same seed gives the
 * same demo.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openSqliteStore } from '../../adapters/sqlite/index.ts';
import { ManualClock } from '../../core/clock.ts';
import { isTrailwireError } from '../../core/errors.ts';
import type { CargosafeReading, GpsFix, StatusName } from '../../core/model.ts';
import { createTrailwire } from '../../core/trailwire.ts';
import { builtInProducts } from '../../products/index.ts';
import { CITIES, CORRIDORS, cityNamed } from '../../simulator/demo-geography.ts';
import { seedDemo, type DemoSeed } from '../../simulator/demo-seed.ts';
import { inRegion, milesApart, regionAt, type CensusRegion } from './support/us-land.ts';

const PRODUCTS = builtInProducts.map((product) => product.name);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
/** The region each demo fleet is named for, as a buyer would read the name. */
const FLEET_REGIONS: Record<string, CensusRegion> = {
  'Midwest Reefers': 'Midwest',
  'Southern Dry Vans': 'South',
  'Other Freight Linehaul': 'West',
};
/** Between two fixes: moved at all (a parked trailer's fixes are identical). */
const MOVED_MILES = 0.01;

interface DemoTrailer {
  label: string;
  vin: string;
  statusName: StatusName;
  fixes: GpsFix[];
  cargo: CargosafeReading[];
}

interface DemoFleet {
  customer: string;
  name: string;
  trailers: DemoTrailer[];
}

interface SeededDemo {
  seed: DemoSeed;
  fleets: DemoFleet[];
}

let dir: string;
let stores = 0;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'trailwire-demo-plausible-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Seeds a demo into a fresh store at `NOW` and reads back everything its customers see. */
async function seeded(seed: number | undefined, trailersPerFleet?: number, now = NOW): Promise<SeededDemo> {
  const store = await openSqliteStore({ file: join(dir, `demo-${++stores}.db`) });
  const trailwire = await createTrailwire({ store, clock: new ManualClock(now) });
  try {
    const result = await seedDemo(trailwire, { products: PRODUCTS, ...(seed === undefined ? {} : { seed }), ...(trailersPerFleet ? { trailersPerFleet } : {}) });
    const fleets: DemoFleet[] = [];
    for (const customer of result.principals.filter((principal) => principal.audience === 'customers')) {
      const units = await store.listCargosafe(customer.id, { limit: 1000 });
      for (const fleet of await store.listFleets(customer.id, { limit: 100 })) {
        const trailers: DemoTrailer[] = [];
        for (const trailer of await store.listTrailers(customer.id, fleet.id, { limit: 100, activeOnly: false, staleBefore: 0 })) {
          const fixes = (await store.listGps(customer.id, trailer.id, { from: now - 25 * HOUR, to: now + 1, limit: 10_000 })).map((row) => row.record);
          const unit = units.find((candidate) => candidate.trailerId === trailer.id);
          const cargo = unit
            ? (await store.listCargosafeReadings(customer.id, unit.id, { from: now - 25 * HOUR, to: now + 1, limit: 10_000 })).map((row) => row.record)
            : [];
          trailers.push({ label: `${fleet.name} ${trailer.unitId}`, vin: trailer.vin, statusName: trailer.statusName, fixes, cargo });
        }
        fleets.push({ customer: customer.name, name: fleet.name, trailers });
      }
    }
    return { seed: result, fleets };
  } finally {
    await trailwire.close();
  }
}

const iso = (t: number) => new Date(t).toISOString();
const moved = (a: GpsFix, b: GpsFix) => milesApart(a, b) > MOVED_MILES;

/** Driving as the fixes show it: each interval in which the trailer moved counts whole. */
function drivingLog(fixes: GpsFix[]) {
  let drivingMs = 0;
  let sinceBreakMs = 0;
  let longestWithoutBreakMs = 0;
  let standingMs = 0;
  let stopsBetweenDrives = 0;
  let hasDriven = false;
  const dutyPeriods: { firstDrive: number; lastDrive: number; drivingMs: number }[] = [];
  for (let i = 1; i < fixes.length; i++) {
    const [a, b] = [fixes[i - 1]!, fixes[i]!];
    const interval = b.timestamp - a.timestamp;
    if (!moved(a, b)) {
      standingMs += interval;
      continue;
    }
    if (standingMs >= 30 * MINUTE) sinceBreakMs = 0;
    if (hasDriven && standingMs > 0) stopsBetweenDrives++;
    // Ten hours off duty close a duty period (49 CFR 395.3).
    if (dutyPeriods.length === 0 || standingMs >= 10 * HOUR) dutyPeriods.push({ firstDrive: a.timestamp, lastDrive: b.timestamp, drivingMs: 0 });
    const period = dutyPeriods.at(-1)!;
    period.lastDrive = b.timestamp;
    period.drivingMs += interval;
    drivingMs += interval;
    sinceBreakMs += interval;
    longestWithoutBreakMs = Math.max(longestWithoutBreakMs, sinceBreakMs);
    standingMs = 0;
    hasDriven = true;
  }
  return { drivingMs, longestWithoutBreakMs, stopsBetweenDrives, dutyPeriods };
}

/** Every fix on land in the region, every move one the reported speeds explain, the hours of service kept. */
function assertPlausibleTrailer(trailer: DemoTrailer, region: CensusRegion): void {
  const { label, fixes } = trailer;
  assert.equal(fixes.length, 24 * 12 + 1, `${label}: a fix every 5 minutes for a day`);
  assert.equal(fixes.at(-1)!.timestamp, NOW, `${label}: the last fix is now`);
  for (const fix of fixes) {
    assert.ok(inRegion(region, fix), `${label}: the fix of ${iso(fix.timestamp)} (${fix.lat}, ${fix.long}) is in ${regionAt(fix) ?? 'no US region'}, not on land in the ${region}`);
    assert.ok(fix.speed === 0 || (fix.speed >= 30 && fix.speed <= 75), `${label}: ${fix.speed} mph at ${iso(fix.timestamp)}`);
  }
  for (let i = 1; i < fixes.length; i++) {
    const [a, b] = [fixes[i - 1]!, fixes[i]!];
    const mph = milesApart(a, b) / ((b.timestamp - a.timestamp) / HOUR);
    const at = `${label} from ${iso(a.timestamp)} (${a.speed} mph) to ${iso(b.timestamp)} (${b.speed} mph)`;
    assert.ok(mph <= 80, `${at}: ${mph.toFixed(1)} mph between the fixes`);
    assert.ok(mph <= Math.max(a.speed, b.speed) + 5, `${at}: ${mph.toFixed(1)} mph is faster than it reported`);
    if (a.speed === 0 && b.speed === 0) assert.ok(!moved(a, b), `${at}: standing, yet it moved ${milesApart(a, b).toFixed(2)} miles`);
    if (a.speed >= 50 && b.speed >= 50) assert.ok(mph >= 40, `${at}: at highway speed, yet only ${mph.toFixed(1)} mph between the fixes`);
  }
  const log = drivingLog(fixes);
  assert.ok(log.drivingMs <= 11 * HOUR, `${label}: ${(log.drivingMs / HOUR).toFixed(2)} h of driving in a day`);
  assert.ok(log.longestWithoutBreakMs <= 8 * HOUR, `${label}: ${(log.longestWithoutBreakMs / HOUR).toFixed(2)} h of driving without a 30-minute break`);
  for (const period of log.dutyPeriods)
    assert.ok(period.lastDrive - period.firstDrive <= 14 * HOUR, `${label}: drove from ${iso(period.firstDrive)} to ${iso(period.lastDrive)} without 10 hours off`);
  if (log.drivingMs > 0) assert.ok(log.stopsBetweenDrives >= 1, `${label}: drove without ever stopping`);
  // The cargo door opens only while the trailer stands.
  for (const reading of trailer.cargo.filter((r) => r.doorOpen)) {
    const fix = fixes.find((candidate) => candidate.timestamp === reading.timestamp);
    assert.ok(fix, `${label}: a fix at the door reading of ${iso(reading.timestamp)}`);
    assert.equal(fix.speed, 0, `${label}: the cargo door open at ${iso(reading.timestamp)} while driving`);
  }
}

function assertPlausibleDemo({ fleets }: SeededDemo): void {
  assert.deepEqual(fleets.map((fleet) => fleet.name).sort(), Object.keys(FLEET_REGIONS).sort());
  const speeds: number[] = [];
  for (const fleet of fleets) {
    const region = FLEET_REGIONS[fleet.name]!;
    for (const trailer of fleet.trailers) assertPlausibleTrailer(trailer, region);
    // A real fleet has trailers on the road and trailers waiting at a yard.
    const driven = fleet.trailers.map((trailer) => drivingLog(trailer.fixes).drivingMs);
    assert.ok(driven.some((ms) => ms === 0), `${fleet.name}: a trailer parked all day`);
    assert.ok(driven.some((ms) => ms >= 3 * HOUR), `${fleet.name}: a trailer on the road for hours`);
    speeds.push(...fleet.trailers.flatMap((trailer) => trailer.fixes.map((fix) => fix.speed).filter((speed) => speed > 0)));
  }
  const highway = speeds.filter((speed) => speed >= 55 && speed <= 70).length / speeds.length;
  assert.ok(highway >= 0.75, `${(highway * 100).toFixed(0)}% of the moving fixes at 55-70 mph`);
  const main = fleets.filter((fleet) => fleet.customer === 'Demo Logistics').flatMap((fleet) => fleet.trailers);
  const count = (name: StatusName) => main.filter((trailer) => trailer.statusName === name).length;
  assert.equal(count('Faulted'), 1, 'one faulted trailer');
  assert.ok(count('Warning') >= 1 && count('Warning') <= main.length / 3, `a few warnings, got ${count('Warning')}`);
  assert.ok(count('OK') >= main.length / 2, `mostly OK, got ${count('OK')}`);
}

/** What tells two demos apart: every trailer's VIN and fixes, in unit order (trailer ids are random). */
function fingerprint({ fleets }: SeededDemo): string {
  const trailers = fleets.flatMap((fleet) => fleet.trailers).sort((a, b) => a.label.localeCompare(b.label));
  return JSON.stringify(trailers.map((trailer) => [trailer.label, trailer.vin, trailer.fixes]));
}
/** Compared whole, but reported short: a day of fixes would flood the output. */
const sameDemo = (a: SeededDemo, b: SeededDemo) => fingerprint(a) === fingerprint(b);

describe('the land outline the demo is checked against', () => {
  it('puts cities in their regions, and the Pacific, the Bahamas, Saskatchewan and Lake Michigan in none', () => {
    assert.equal(regionAt({ lat: 41.85, long: -87.75 }), 'Midwest'); // Chicago
    assert.equal(regionAt({ lat: 33.75, long: -84.39 }), 'South'); // Atlanta
    assert.equal(regionAt({ lat: 39.74, long: -104.99 }), 'West'); // Denver
    assert.equal(regionAt({ lat: 40.71, long: -74.0 }), 'Northeast'); // New York
    assert.equal(regionAt({ lat: 35.0, long: -130.0 }), null); // 1,000 km off California
    assert.equal(regionAt({ lat: 25.05, long: -77.35 }), null); // Nassau
    assert.equal(regionAt({ lat: 52.13, long: -106.67 }), null); // Saskatoon
    assert.equal(regionAt({ lat: 43.0, long: -87.2 }), null); // Lake Michigan
  });
});

describe('the demo geography', () => {
  it('has every city on land in its region, and every corridor there along its whole length', () => {
    for (const city of CITIES) assert.ok(inRegion(city.region, city), `${city.name} in the ${city.region}`);
    for (const corridor of CORRIDORS) {
      const [from, to] = [cityNamed(corridor.from), cityNamed(corridor.to)];
      assert.equal(from.region, to.region, `${corridor.highway} ${from.name} - ${to.name} stays in one region`);
      const path = [from, ...corridor.via, to];
      for (let i = 1; i < path.length; i++)
        for (let step = 0; step <= 20; step++) {
          const f = step / 20;
          const point = { lat: path[i - 1]!.lat + (path[i]!.lat - path[i - 1]!.lat) * f, long: path[i - 1]!.long + (path[i]!.long - path[i - 1]!.long) * f };
          assert.ok(inRegion(from.region, point), `${corridor.highway} ${from.name} - ${to.name} leaves the ${from.region} at (${point.lat.toFixed(3)}, ${point.long.toFixed(3)})`);
        }
    }
  });
});

describe('a demo that looks like a real fleet', () => {
  for (const seed of [1, 42, 2_026_061, 4_294_967_295])
    it(`seed ${seed}: on land in each fleet's region, at speeds a truck drives, within the hours of service`, async () => {
      assertPlausibleDemo(await seeded(seed));
    });

  it('holds with two trailers a fleet too', async () => {
    assertPlausibleDemo(await seeded(7, 2));
  });

  it('the same seed gives the same demo, another seed another one', async () => {
    const first = await seeded(123);
    assert.equal(first.seed.seed, 123);
    assert.ok(sameDemo(await seeded(123), first), 'seed 123 twice: the same demo');
    assert.ok(!sameDemo(await seeded(124), first), 'seeds 123 and 124: two demos');
    // Seeded at another time of day, the day shows other hours of the same trailers' routes.
    const later = await seeded(123, undefined, NOW + 7 * HOUR);
    const trailers = (demo: SeededDemo) =>
      demo.fleets.flatMap((fleet) => fleet.trailers.map((trailer) => `${trailer.label} ${trailer.vin} ${trailer.statusName === 'Faulted'}`)).sort();
    assert.deepEqual(trailers(later), trailers(first), 'the same trailers and the same faulted one, seven hours later');
  });

  it('without a seed every fresh demo is a new one, and the seed it reports gives it again', async () => {
    const [one, two] = [await seeded(undefined), await seeded(undefined)];
    assert.ok(!sameDemo(one, two), 'two fresh demos differ');
    assertPlausibleDemo(one);
    const reported = one.seed.seed;
    assert.ok(Number.isInteger(reported), `the demo reports its seed, got ${reported}`);
    assert.ok(sameDemo(await seeded(reported), one), `seed ${reported} gives the same demo again`);
  });

  it('refuses a seed that is not an integer from 0 to 4294967295, before it creates anything', async () => {
    const trailwire = await createTrailwire({ store: await openSqliteStore({ file: join(dir, `demo-${++stores}.db`) }), clock: new ManualClock(NOW) });
    try {
      for (const seed of [-1, 1.5, 2 ** 32, Number.NaN])
        await assert.rejects(
          seedDemo(trailwire, { products: PRODUCTS, seed, trailersPerFleet: 1 }),
          (error) => isTrailwireError(error) && error.code === 'validation_failed' && error.message.includes('4294967295'),
          String(seed),
        );
      assert.equal((await seedDemo(trailwire, { products: PRODUCTS, seed: 0, trailersPerFleet: 1 })).created, true, 'the store was left unclaimed');
    } finally {
      await trailwire.close();
    }
  });
});
