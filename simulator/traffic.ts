/**
 * Simulated telemetry, drawn from @faker-js/faker seeded by the run's seed: valid VINs (check digit
 * included), trailers that drive along plausible routes (`routes.ts`), tire sensors and cargo units
 * whose readings mostly sit in the normal range but sometimes cross the warning and fault thresholds,
 * and payloads in each built-in product's own shape. Every draw happens in the order payloads are
 * asked for, and times come from the caller (the schedule), so the same seed and the same schedule
 * give the same traffic.
 */
import { base, en, Faker } from '@faker-js/faker';
import { KM_PER_MILE } from '../products/gps-basic/index.ts';
import { TPMS_THRESHOLDS } from '../products/tpms/index.ts';
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

interface Tire {
  sensorId: string;
  wheel: string;
}

interface SimulatedTrailer {
  vin: string;
  route: RouteState;
  lastFixAt: number | undefined;
  tires: Tire[];
  cargo: { unitSerial: string; loadPercent: number };
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

  /** Gives a VIN that came from elsewhere (a remote deployment's trailers) a simulated trailer. */
  adoptTrailer(vin: string): number {
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

  get vins(): string[] {
    return this.trailers.map((trailer) => trailer.vin);
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
    // The first fix has no earlier one to move from; later fixes move by the time since the last one.
    if (trailer.lastFixAt !== undefined) trailer.route = advanceRoute(this.faker, trailer.route, Math.max(0, at - trailer.lastFixAt));
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

  private cargosafePayload(trailer: SimulatedTrailer, at: number) {
    const { faker } = this;
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

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
