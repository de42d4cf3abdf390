/**
 * Simulated telemetry, drawn from @faker-js/faker seeded by the run's seed: valid VINs (check digit
 * included), trailers that drive along plausible routes (`routes.ts`), tire sensors and cargo units
 * whose readings mostly sit in the normal range but sometimes cross the warning and fault thresholds,
 * and payloads in each built-in product's own shape. Every draw happens in the order payloads are
 * asked for, and times come from the caller (the schedule), so the same seed and the same schedule
 * give the same traffic.
 *
 * A deployment's own trailer (`adoptTrailer` with what the deployment knows of it, issue 31 finding 2)
 * is continued, not reinvented: it drives on from its last fix along the demo's roads
 * (`demo-roads.ts`) when its fix lies on one, else straight on from there; it reports only through the
 * devices it has (its tire sensors by their serials and wheels, its cargosafe unit), and each keeps its
 * state: a faulted sensor reads faulted, a fine one reads fine, so the trailer's status stays what it
 * was. Nothing new (a sensor, a unit, an anomaly) is added to it.
 */
import { base, en, Faker } from '@faker-js/faker';
import { HEADINGS } from '../core/model.ts';
import { KM_PER_MILE } from '../products/gps-basic/index.ts';
import { TPMS_THRESHOLDS } from '../products/tpms/index.ts';
import { RouteCursor } from './demo-roads.ts';
import { advanceRoute, type RouteState, startRoute } from './routes.ts';
import { fakeVin } from './vins.ts';

/** The products the simulator knows how to make payloads for. */
export const SIMULATED_PRODUCTS = ['gps-basic', 'tpms', 'cargosafe'] as const;
export type SimulatedProduct = (typeof SIMULATED_PRODUCTS)[number];

/** How often a reading is pushed past a threshold (per sensor per payload for tires). */
export interface AnomalyRates {
  /** A tire sensor reads in its warning range. Default 0.05. */
  tireWarning: number;
  /** A tire sensor reads in its fault range. Default 0.02. */
  tireFault: number;
  /** The cargo space leaves its temperature band. Default 0.05. */
  cargoExcursion: number;
}

export const DEFAULT_ANOMALY_RATES: AnomalyRates = { tireWarning: 0.05, tireFault: 0.02, cargoExcursion: 0.05 };

/** Cargo temperature band of a refrigerated trailer: readings outside it are excursions. */
export const CARGO_TEMPERATURE_BAND = Object.freeze({ minC: 1, maxC: 7 });

/** The state a tire sensor of a deployment's trailer keeps: its readings stay in that range. */
export type SensorState = 'ok' | 'warning' | 'fault';

interface Tire {
  sensorId: string;
  wheel: string;
  /** A deployment's sensor keeps its state; absent, readings are drawn with the anomaly rates. */
  keeps?: SensorState;
}

interface Cargo {
  unitSerial: string;
  loadPercent: number;
  /** A deployment's unit reads around its latest temperature and humidity, door closed. */
  keeps?: { temperatureC: number; humidityPercent: number };
}

interface SimulatedTrailer {
  vin: string;
  /** Off the demo's roads: a heading that bends a little. */
  route: RouteState;
  /** On the demo's roads: the leg and how far along; the position and bearing come from it. */
  road?: RouteCursor;
  lastFixAt: number | undefined;
  tires: Tire[];
  cargo: Cargo | undefined;
}

/** What a deployment knows of one of its trailers (the read API's trailer, devices and cargosafe unit). */
export interface KnownTrailer {
  /** Its last fix: speed in mph, heading as the API's 8-point heading. */
  fix?: { lat: number; long: number; speedMph: number; heading: string };
  /** Its tire sensors, each with the serial, wheel and state the deployment shows. */
  tires: Array<{ serial: string; position: string; state: SensorState }>;
  /** Its cargosafe unit and that unit's latest reading, when it has one. */
  cargo?: { serial: string; loadPercent?: number; temperatureC?: number; humidityPercent?: number };
}

/** A seeded source of VINs and payloads. */
export class TrafficGenerator {
  readonly faker: Faker;
  private readonly trailers: SimulatedTrailer[] = [];

  constructor(
    seed: number,
    private readonly anomalies: AnomalyRates = DEFAULT_ANOMALY_RATES,
  ) {
    this.faker = new Faker({ locale: [en, base] });
    this.faker.seed(seed);
  }

  /** `count` distinct valid VINs (the same ones for the same seed), each with its own trailer state. */
  createTrailers(count: number): string[] {
    const seen = new Set(this.trailers.map((trailer) => trailer.vin));
    const vins: string[] = [];
    while (vins.length < count) {
      const vin = fakeVin(this.faker);
      if (seen.has(vin)) continue;
      seen.add(vin);
      vins.push(vin);
      this.adoptTrailer(vin);
    }
    return vins;
  }

  /**
   * Gives a VIN that came from elsewhere (a remote deployment's trailers) a simulated trailer: with
   * `known`, the one the deployment has, continued (see the module comment); without, a new one.
   */
  adoptTrailer(vin: string, known?: KnownTrailer): number {
    if (known) return this.continueTrailer(vin, known);
    const { faker } = this;
    const axles = faker.helpers.arrayElement([2, 2, 3]);
    const tires: Tire[] = [];
    for (let axle = 1; axle <= axles; axle++)
      for (const side of ['left', 'right'])
        for (const position of ['outer', 'inner'])
          tires.push({ sensorId: faker.string.hexadecimal({ length: 8, casing: 'upper', prefix: '' }), wheel: `axle${axle}-${side}-${position}` });
    this.trailers.push({
      vin,
      route: startRoute(faker),
      lastFixAt: undefined,
      tires,
      cargo: { unitSerial: `CS-${faker.string.numeric(6)}`, loadPercent: faker.number.float({ min: 20, max: 95, fractionDigits: 1 }) },
    });
    return this.trailers.length - 1;
  }

  private continueTrailer(vin: string, known: KnownTrailer): number {
    const { faker } = this;
    const fix = known.fix;
    const bearingDeg = Math.max(0, HEADINGS.indexOf(fix?.heading as (typeof HEADINGS)[number])) * (360 / HEADINGS.length);
    const route: RouteState = fix ? { lat: fix.lat, long: fix.long, bearingDeg, speedMph: fix.speedMph } : startRoute(faker);
    const cargo = known.cargo;
    this.trailers.push({
      vin,
      route,
      road: fix ? RouteCursor.nearest(fix, bearingDeg) : undefined,
      lastFixAt: undefined,
      tires: known.tires.map((tire) => ({ sensorId: tire.serial, wheel: tire.position, keeps: tire.state })),
      cargo: cargo && {
        unitSerial: cargo.serial,
        loadPercent: cargo.loadPercent ?? 50,
        keeps: {
          temperatureC: cargo.temperatureC ?? (CARGO_TEMPERATURE_BAND.minC + CARGO_TEMPERATURE_BAND.maxC) / 2,
          humidityPercent: cargo.humidityPercent ?? 60,
        },
      },
    });
    return this.trailers.length - 1;
  }

  get vins(): string[] {
    return this.trailers.map((trailer) => trailer.vin);
  }

  /**
   * Whether trailer `index` reports `product` at all: a deployment's trailer only through the devices
   * it has (GPS always), a simulated one through every product.
   */
  reports(product: SimulatedProduct, index: number): boolean {
    const trailer = this.trailers[index];
    if (!trailer) throw new RangeError(`TrafficGenerator: no trailer ${index}`);
    if (product === 'tpms') return trailer.tires.length > 0;
    if (product === 'cargosafe') return trailer.cargo !== undefined;
    return true;
  }

  /** The next payload of `product` for trailer `index`, taken at `at` (epoch ms). */
  payload(product: SimulatedProduct, index: number, at: number): unknown {
    const trailer = this.trailers[index];
    if (!trailer) throw new RangeError(`TrafficGenerator: no trailer ${index}`);
    switch (product) {
      case 'gps-basic':
        return this.gpsPayload(trailer, at);
      case 'tpms':
        return this.tpmsPayload(trailer, at);
      case 'cargosafe':
        return this.cargosafePayload(trailer, at);
    }
  }

  private gpsPayload(trailer: SimulatedTrailer, at: number) {
    // The first fix has no earlier one to move from (a deployment's trailer: it is where its last fix
    // left it); later fixes move by the time since the last one.
    if (trailer.lastFixAt !== undefined) {
      const elapsedMs = Math.max(0, at - trailer.lastFixAt);
      trailer.route = trailer.road ? driveOn(this.faker, trailer.road, trailer.route, elapsedMs) : advanceRoute(this.faker, trailer.route, elapsedMs);
    } else if (trailer.road) {
      const here = trailer.road.position();
      trailer.route = { ...trailer.route, lat: here.lat, long: here.long, bearingDeg: here.bearing };
    }
    trailer.lastFixAt = at;
    const { route } = trailer;
    return {
      timestamp: at / 1000,
      position: { latitude: round(route.lat, 6), longitude: round(route.long, 6) },
      speedKph: round(route.speedMph * KM_PER_MILE, 1),
      bearingDeg: round(route.bearingDeg, 1),
    };
  }

  private tpmsPayload(trailer: SimulatedTrailer, at: number) {
    const { faker } = this;
    const t = TPMS_THRESHOLDS;
    return {
      readAt: new Date(at).toISOString(),
      sensors: trailer.tires.map((tire) => {
        if (tire.keeps) return { sensorId: tire.sensorId, wheel: tire.wheel, ...this.tireReadingIn(tire.keeps) };
        let pressurePsi = faker.number.float({ min: 98, max: 118, fractionDigits: 1 });
        let temperatureC = faker.number.float({ min: 18, max: 55, fractionDigits: 1 });
        const roll = faker.number.float({ min: 0, max: 1 });
        if (roll < this.anomalies.tireFault) {
          if (faker.datatype.boolean()) pressurePsi = faker.number.float({ min: 35, max: t.faultBelowPsi - 0.5, fractionDigits: 1 });
          else temperatureC = faker.number.float({ min: t.faultAboveC + 0.5, max: 120, fractionDigits: 1 });
        } else if (roll < this.anomalies.tireFault + this.anomalies.tireWarning) {
          const which = faker.helpers.arrayElement(['low', 'high', 'hot'] as const);
          if (which === 'low') pressurePsi = faker.number.float({ min: t.faultBelowPsi + 0.5, max: t.warnBelowPsi - 0.5, fractionDigits: 1 });
          else if (which === 'high') pressurePsi = faker.number.float({ min: t.warnAbovePsi + 0.5, max: 140, fractionDigits: 1 });
          else temperatureC = faker.number.float({ min: t.warnAboveC + 0.5, max: t.faultAboveC - 0.5, fractionDigits: 1 });
        }
        return { sensorId: tire.sensorId, wheel: tire.wheel, pressurePsi, temperatureC };
      }),
    };
  }

  /** A reading a sensor in `state` gives: tpmsState of it is that state (a low pressure for the troubled ones). */
  private tireReadingIn(state: SensorState): { pressurePsi: number; temperatureC: number } {
    const { faker } = this;
    const t = TPMS_THRESHOLDS;
    const temperatureC = faker.number.float({ min: 18, max: 45, fractionDigits: 1 });
    if (state === 'fault') return { pressurePsi: faker.number.float({ min: 45, max: t.faultBelowPsi - 5, fractionDigits: 1 }), temperatureC };
    if (state === 'warning') return { pressurePsi: faker.number.float({ min: t.faultBelowPsi + 5, max: t.warnBelowPsi - 3, fractionDigits: 1 }), temperatureC };
    return { pressurePsi: faker.number.float({ min: 98, max: 112, fractionDigits: 1 }), temperatureC };
  }

  private cargosafePayload(trailer: SimulatedTrailer, at: number) {
    const { faker } = this;
    if (!trailer.cargo) throw new RangeError(`TrafficGenerator: trailer ${trailer.vin} has no cargosafe unit`);
    if (trailer.cargo.keeps) {
      const { temperatureC, humidityPercent } = trailer.cargo.keeps;
      return {
        unitSerial: trailer.cargo.unitSerial,
        recordedAt: new Date(at).toISOString(),
        door: 'closed',
        loadPercent: trailer.cargo.loadPercent,
        temperatureC: round(temperatureC + faker.number.float({ min: -0.3, max: 0.3 }), 1),
        humidityPercent: round(Math.min(100, Math.max(0, humidityPercent + faker.number.float({ min: -1, max: 1 }))), 1),
      };
    }
    const doorOpen = faker.datatype.boolean({ probability: 0.05 });
    // Loading and unloading happen with the door open.
    if (doorOpen) trailer.cargo.loadPercent = faker.number.float({ min: 0, max: 100, fractionDigits: 1 });
    const excursion = faker.datatype.boolean({ probability: this.anomalies.cargoExcursion });
    const band = CARGO_TEMPERATURE_BAND;
    const temperatureC = excursion
      ? faker.helpers.arrayElement([faker.number.float({ min: -8, max: band.minC - 0.5, fractionDigits: 1 }), faker.number.float({ min: band.maxC + 0.5, max: 18, fractionDigits: 1 })])
      : faker.number.float({ min: band.minC, max: band.maxC, fractionDigits: 1 });
    return {
      unitSerial: trailer.cargo.unitSerial,
      recordedAt: new Date(at).toISOString(),
      door: doorOpen ? 'open' : 'closed',
      loadPercent: trailer.cargo.loadPercent,
      temperatureC,
      humidityPercent: faker.number.float({ min: 35, max: 85, fractionDigits: 1 }),
    };
  }
}

/**
 * Drives a trailer on along its demo road for `elapsedMs`: pulling out at 35-45 mph, up to highway
 * speed, then 55-70 mph with small drifts; at a leg's city it takes the next corridor on without
 * stopping (a simulated run is minutes long). Answers where that puts it.
 */
function driveOn(faker: Faker, road: RouteCursor, state: RouteState, elapsedMs: number): RouteState {
  const speedMph =
    state.speedMph < 1
      ? faker.number.float({ min: 35, max: 45 })
      : state.speedMph < 55
        ? state.speedMph + faker.number.float({ min: 3, max: 8 })
        : Math.min(70, Math.max(55, state.speedMph + faker.number.float({ min: -2, max: 2 })));
  if (road.advance((speedMph * elapsedMs) / 3_600_000)) road.turnOntoNextLeg(faker);
  const here = road.position();
  return { lat: here.lat, long: here.long, bearingDeg: here.bearing, speedMph };
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
