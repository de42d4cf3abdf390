/**
 * The demo data of `trailwire serve --demo`: a customer with two fleets of trailers that have a day
 * of GPS history, tire sensors (a few warning, one faulted) and cargosafe units; a second customer
 * to show isolation; one partner per installed product. Seeding happens once per store; on later
 * starts the demo keys are rotated instead, because keys are stored only as hashes and the only way
 * to print a working key again is to issue a new one.
 */
import { Faker, en } from '@faker-js/faker';
import { generateApiKey, hashApiKey } from '../core/api-keys.ts';
import type { CanonicalCargosafeReading, CanonicalDeviceReading } from '../core/canonical.ts';
import type { Audience, GpsFix } from '../core/model.ts';
import type { Trailwire } from '../core/trailwire.ts';
import { tpmsState } from '../products/tpms/index.ts';
import { advanceRoute, fixOf, startRoute } from './routes.ts';
import { fakeVin } from './vins.ts';

export interface DemoPrincipal {
  audience: Audience;
  id: string;
  name: string;
  product?: string;
  apiKey: string;
}

export interface DemoSeed {
  /** True when this call created the data; false when it only issued fresh keys. */
  created: boolean;
  principals: DemoPrincipal[];
}

export interface DemoSeedOptions {
  /** Product names to create one partner each for. */
  products: string[];
  /** Faker seed: the same seed gives the same demo fleet. Default 42. */
  seed?: number;
  /** Trailers per fleet of the main customer. Default 6. */
  trailersPerFleet?: number;
}

const HOUR = 3_600_000;
const WHEELS = ['LF-outer', 'LF-inner', 'RF-outer', 'RF-inner', 'LR-outer', 'LR-inner', 'RR-outer', 'RR-inner'];

/** Seeds the demo once, or re-issues its keys; answers the keys to print. */
export async function seedDemo(trailwire: Trailwire, options: DemoSeedOptions): Promise<DemoSeed> {
  const { store } = trailwire;
  const claim = `claimed:${generateApiKey('customers')}`;
  const owner = await store.getOrCreateSecret('demo-seed', claim);
  if (owner !== claim) return { created: false, principals: await reissueDemoKeys(trailwire) };

  const faker = new Faker({ locale: [en] });
  faker.seed(options.seed ?? 42);
  const principals: DemoPrincipal[] = [];
  const demo = await trailwire.auth.createCustomer({ name: 'Demo Logistics' });
  principals.push({ audience: 'customers', id: demo.principal.id, name: demo.principal.name, apiKey: demo.apiKey });
  const other = await trailwire.auth.createCustomer({ name: 'Other Freight Co' });
  principals.push({ audience: 'customers', id: other.principal.id, name: other.principal.name, apiKey: other.apiKey });
  for (const product of options.products) {
    const partner = await trailwire.auth.createPartner({ name: `Demo ${product} partner`, product });
    principals.push({ audience: 'partners', id: partner.principal.id, name: partner.principal.name, product, apiKey: partner.apiKey });
  }
  await store.getOrCreateSecret('demo-principals', JSON.stringify(principals.map(({ apiKey: _, ...rest }) => rest)));

  const now = trailwire.clock.now();
  const perFleet = options.trailersPerFleet ?? 6;
  const fleets = [
    { customerId: demo.principal.id, name: 'Midwest Reefers', trailers: perFleet },
    { customerId: demo.principal.id, name: 'Southern Dry Vans', trailers: perFleet },
    { customerId: other.principal.id, name: 'Other Freight Linehaul', trailers: 2 },
  ];
  let trailerNumber = 0;
  for (const spec of fleets) {
    const fleet = await trailwire.admin.createFleet({ customerId: spec.customerId, name: spec.name });
    for (let i = 0; i < spec.trailers; i++) {
      trailerNumber++;
      const trailer = await trailwire.admin.registerTrailer({
        fleetId: fleet.id,
        vin: fakeVin(faker),
        unitId: `TR-${String(1000 + trailerNumber)}`,
      });
      await store.applyTelemetry({
        vin: trailer.vin,
        at: now,
        telemetry: {
          gps: gpsHistory(faker, now),
          devices: tireHistory(faker, now, trailerNumber),
          cargosafe: trailerNumber % 2 === 0 ? cargoHistory(faker, now, `CS-${String(5000 + trailerNumber)}`) : [],
        },
      });
    }
  }
  return { created: true, principals };
}

/** A day of fixes every 5 minutes, ending now. */
function gpsHistory(faker: Faker, now: number): GpsFix[] {
  const fixes: GpsFix[] = [];
  let state = startRoute(faker);
  const step = 5 * 60_000;
  for (let t = now - 24 * HOUR; t <= now; t += step) {
    fixes.push(fixOf(state, t));
    state = advanceRoute(faker, state, step);
  }
  return fixes;
}

/**
 * Eight tire sensors read every 30 minutes for a day. Trailer 3 develops a slow leak (warning, then
 * fault); every fourth trailer has one warm tire (warning).
 */
function tireHistory(faker: Faker, now: number, trailerNumber: number): CanonicalDeviceReading[] {
  const readings: CanonicalDeviceReading[] = [];
  const step = 30 * 60_000;
  const start = now - 24 * HOUR;
  for (const [index, wheel] of WHEELS.entries()) {
    const serial = `TPMS-${trailerNumber}-${index + 1}`;
    const base = faker.number.float({ min: 100, max: 112 });
    for (let t = start; t <= now; t += step) {
      const progress = (t - start) / (now - start);
      const leaking = trailerNumber === 3 && index === 0;
      const warm = trailerNumber % 4 === 0 && index === 5;
      const pressurePsi = round1(leaking ? base - progress * 45 : base + faker.number.float({ min: -2, max: 2 }));
      const temperatureC = round1(warm ? 70 + progress * 8 : faker.number.float({ min: 25, max: 45 }));
      readings.push({
        kind: 'tpms',
        serial,
        position: wheel,
        timestamp: t,
        metrics: { pressurePsi, temperatureC },
        state: tpmsState(pressurePsi, temperatureC),
      });
    }
  }
  return readings;
}

/** A cargosafe unit read every 15 minutes for a day; the door opens at two stops. */
function cargoHistory(faker: Faker, now: number, serial: string): CanonicalCargosafeReading[] {
  const readings: CanonicalCargosafeReading[] = [];
  const step = 15 * 60_000;
  let loadPercent = faker.number.int({ min: 40, max: 95 });
  for (let t = now - 24 * HOUR, i = 0; t <= now; t += step, i++) {
    const doorOpen = i === 20 || i === 60;
    if (doorOpen) loadPercent = Math.max(0, loadPercent - faker.number.int({ min: 5, max: 30 }));
    readings.push({
      serial,
      timestamp: t,
      doorOpen,
      loadPercent,
      temperatureC: round1(faker.number.float({ min: 2, max: 6 })),
      humidityPercent: round1(faker.number.float({ min: 55, max: 75 })),
    });
  }
  return readings;
}

async function reissueDemoKeys(trailwire: Trailwire): Promise<DemoPrincipal[]> {
  const stored = JSON.parse(await trailwire.store.getOrCreateSecret('demo-principals', '[]')) as Omit<DemoPrincipal, 'apiKey'>[];
  // The principals are recorded right after they are created; an empty record means the first seed
  // died before that point, and there is no demo customer to issue keys for.
  if (stored.length === 0)
    throw new Error('The demo seed of this store was interrupted before its principals were recorded; start with a fresh --db file.');
  const principals: DemoPrincipal[] = [];
  for (const principal of stored) {
    const current = await trailwire.store.getPrincipal(principal.audience, principal.id);
    if (!current) continue;
    const apiKey = generateApiKey(principal.audience);
    const version = await trailwire.store.rotateKey(principal.audience, principal.id, hashApiKey(apiKey), trailwire.clock.now(), current.keyVersion);
    if (version === null) continue;
    trailwire.tokens.keyVersions.noteRotation(principal.audience, principal.id, version);
    principals.push({ ...principal, apiKey });
  }
  return principals;
}

function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
