/**
 * The demo data of `trailwire serve --demo`: a customer with two fleets of trailers that have a day
 * of GPS history, tire sensors (a few warning, one faulted) and cargosafe units; a second customer
 * to show isolation; one partner per installed product. Each fleet runs in its own US region
 * (`demo-geography.ts`): its trailers drive real interstate routes under the hours-of-service rules or
 * stand parked at a yard (`demo-trips.ts`), and their sensors follow what they did
 * (`demo-sensors.ts`). Every fresh demo is a new one unless a seed is given; the same seed and the
 * same clock give the same demo. Seeding happens once per store; on later starts the demo keys are
 * rotated instead, because keys are stored only as hashes and the only way to print a working key
 * again is to issue a new one.
 */
import { randomInt } from 'node:crypto';
import { Faker, en } from '@faker-js/faker';
import { generateApiKey, hashApiKey } from '../core/api-keys.ts';
import { TrailwireError } from '../core/errors.ts';
import type { Audience } from '../core/model.ts';
import type { Trailwire } from '../core/trailwire.ts';
import type { Region } from './demo-geography.ts';
import { cargoReadings, tireReadings, warningFor, type TireCondition } from './demo-sensors.ts';
import { planTrailerDay } from './demo-trips.ts';
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
  /** The seed the demo was made from, when this call created it: give it again for the same demo. */
  seed?: number;
  principals: DemoPrincipal[];
}

export interface DemoSeedOptions {
  /** Product names to create one partner each for. */
  products: string[];
  /** An integer from 0 to `MAX_DEMO_SEED`: the same seed (and clock) gives the same demo. Default: a random one. */
  seed?: number;
  /** Trailers per fleet of the main customer. Default 6. */
  trailersPerFleet?: number;
}

/** Faker's generator takes 32-bit seeds; a larger one would wrap around to a smaller one's demo. */
export const MAX_DEMO_SEED = 0xffff_ffff;

const DAY = 24 * 3_600_000;

interface FleetSpec {
  name: string;
  region: Region;
  /** Refrigerated trailers hold their cargo cold. */
  reefer: boolean;
}

/** The fleets of the main customer, each named for the region it runs in. */
const MAIN_FLEETS: FleetSpec[] = [
  { name: 'Midwest Reefers', region: 'Midwest', reefer: true },
  { name: 'Southern Dry Vans', region: 'South', reefer: false },
];
const OTHER_FLEET: FleetSpec = { name: 'Other Freight Linehaul', region: 'West', reefer: false };
const OTHER_FLEET_TRAILERS = 2;

/** Throws a `validation_failed` error unless `seed` is absent or a usable demo seed. */
export function checkDemoSeed(seed: number | undefined): void {
  if (seed !== undefined && !(Number.isInteger(seed) && seed >= 0 && seed <= MAX_DEMO_SEED))
    throw new TrailwireError('validation_failed', `The demo seed must be an integer from 0 to ${MAX_DEMO_SEED}; got ${String(seed)}.`);
}

/** Seeds the demo once, or re-issues its keys; answers the keys to print. */
export async function seedDemo(trailwire: Trailwire, options: DemoSeedOptions): Promise<DemoSeed> {
  checkDemoSeed(options.seed);
  const { store } = trailwire;
  const claim = `claimed:${generateApiKey('customers')}`;
  const owner = await store.getOrCreateSecret('demo-seed', claim);
  if (owner !== claim) return { created: false, principals: await reissueDemoKeys(trailwire) };

  const seed = options.seed ?? randomInt(MAX_DEMO_SEED);
  const faker = new Faker({ locale: [en] });
  faker.seed(seed);
  const principals: DemoPrincipal[] = [];
  const demo = await trailwire.auth.createCustomer({ name: 'Demo Logistics' });
  principals.push({ audience: 'customers', id: demo.principal.id, name: demo.principal.name, apiKey: demo.apiKey });
  const other = await trailwire.auth.createCustomer({ name: 'Other Freight Co' });
  principals.push({ audience: 'customers', id: other.principal.id, name: other.principal.name, apiKey: other.apiKey });
  for (const product of options.products) {
    const partner = await trailwire.auth.createPartner({ name: `Demo ${product} partner`, product });
    principals.push({ audience: 'partners', id: partner.principal.id, name: partner.principal.name, product, apiKey: partner.apiKey });
    // Both customers trust the demo's partners (contract 4, "Partner grants"): any other partner is refused their trailers.
    for (const customer of [demo, other]) await trailwire.admin.addGrant({ customerId: customer.principal.id, partnerId: partner.principal.id });
  }
  await store.getOrCreateSecret('demo-principals', JSON.stringify(principals.map(({ apiKey: _, ...rest }) => rest)));

  // A day of history whose last fix is now.
  const end = trailwire.clock.now();
  const start = end - DAY;
  const perFleet = options.trailersPerFleet ?? 6;
  const fleets = [
    ...MAIN_FLEETS.map((spec) => ({ spec, customerId: demo.principal.id, plans: trailerPlans(faker, perFleet) })),
    { spec: OTHER_FLEET, customerId: other.principal.id, plans: trailerPlans(faker, OTHER_FLEET_TRAILERS) },
  ];
  // The main customer's trailers show one fault and a few warnings; the rest are fine.
  assignTireTrouble(faker, fleets.slice(0, MAIN_FLEETS.length).flatMap((fleet) => fleet.plans));

  let trailerNumber = 0;
  for (const { spec, customerId, plans } of fleets) {
    const fleet = await trailwire.admin.createFleet({ customerId, name: spec.name });
    for (const plan of plans) {
      trailerNumber++;
      const trailer = await trailwire.admin.registerTrailer({ fleetId: fleet.id, vin: plan.vin, unitId: `TR-${String(1000 + trailerNumber)}` });
      faker.seed(plan.daySeed);
      const day = planTrailerDay(faker, { region: spec.region, start, end, parked: plan.parked });
      const condition: TireCondition = plan.trouble === 'fault' ? 'slow-leak' : plan.trouble === 'warning' ? warningFor(day, end) : 'ok';
      faker.seed(plan.sensorSeed);
      await store.applyTelemetry({
        vin: trailer.vin,
        at: end,
        telemetry: {
          gps: day.fixes,
          devices: tireReadings(faker, day, { trailerNumber, condition, start, end }),
          cargosafe: trailerNumber % 2 === 0 ? cargoReadings(faker, day, { serial: `CS-${String(5000 + trailerNumber)}`, reefer: spec.reefer, start, end }) : [],
        },
      });
    }
  }
  return { created: true, seed, principals };
}

/**
 * What the demo seed decides about one trailer. All of it is drawn up front, in a fixed order, and
 * each trailer's day and sensors draw from seeds of their own: the same demo seed gives the same
 * trailers, routes and troubles at whatever time of day it is seeded.
 */
interface TrailerPlan {
  vin: string;
  parked: boolean;
  daySeed: number;
  sensorSeed: number;
  trouble: 'none' | 'fault' | 'warning';
}

/** A fleet's trailers, a third of them (at least one of two or more) parked all day. */
function trailerPlans(faker: Faker, trailers: number): TrailerPlan[] {
  const parkedCount = trailers < 2 ? 0 : Math.max(1, Math.round(trailers / 3));
  const parked = new Set(faker.helpers.shuffle([...Array(trailers).keys()]).slice(0, parkedCount));
  return Array.from({ length: trailers }, (_, i) => ({
    vin: fakeVin(faker),
    parked: parked.has(i),
    daySeed: faker.number.int(MAX_DEMO_SEED),
    sensorSeed: faker.number.int(MAX_DEMO_SEED),
    trouble: 'none',
  }));
}

/**
 * One trailer with a fault, about one in four with a warning, the others fine; with fewer than three
 * trailers there is no room for all three states.
 */
function assignTireTrouble(faker: Faker, plans: TrailerPlan[]): void {
  const shuffled = faker.helpers.shuffle([...plans]);
  if (shuffled.length === 0) return;
  shuffled[0]!.trouble = 'fault';
  const warnings = Math.min(shuffled.length - 2, Math.max(1, Math.floor(shuffled.length / 4)));
  for (const plan of shuffled.slice(1, 1 + warnings)) plan.trouble = 'warning';
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
