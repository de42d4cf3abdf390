/**
 * The simulator's scenarios and the send plan each one makes. Traffic is planned per intake window:
 * for every (product, VIN) and every fixed window the run touches, a scenario decides an *intent* —
 * stay `under` the limit, send exactly `at` it, or go `over` it — and the plan spreads that many
 * sends inside the window, away from its edges (`marginMs`) so that the client's view of which
 * window a request fell in agrees with the server's. The invariant checks then judge each planned
 * window group: `over` must see exactly the limit accepted and the rest 429, `under` and `at` must
 * see nothing limited. Plans are pure: the same options (seed included) give the same plan.
 */
import { base, en, Faker } from '@faker-js/faker';
import type { IntakeLimit } from '../core/products.ts';
import type { SimulatedProduct } from './traffic.ts';

export const SCENARIOS = ['steady', 'burst', 'noisy-vin', 'multi-product', 'rotation', 'slow-subscriber'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

/** What a (product, VIN) aims for in a window. */
export type Intent = 'under' | 'at' | 'over';

export interface ScenarioDefinition {
  name: ScenarioName;
  /** One line for `--help` and the report. */
  description: string;
  /** Share of the send rate per product (sums to 1). */
  mix: Partial<Record<SimulatedProduct, number>>;
  /** The intent of trailer `vinIndex` for `product`. */
  intent(product: SimulatedProduct, vinIndex: number): Intent;
  /** How far past the limit an `over` (product, VIN) goes in a window. Default: a quarter of the limit, at least 1. */
  overBy?: (limit: number) => number;
  /** Whether the burst is front-loaded into the first half of each window (else spread evenly). */
  frontLoaded: boolean;
  /** Rotate the first partner's key at this fraction of the run, and then the first customer's. */
  rotation?: { partnerAt: number; customerAt: number };
  /** Whether some subscribers read slowly. */
  slowSubscribers: boolean;
}

const STEADY_MIX = { 'gps-basic': 0.6, tpms: 0.2, cargosafe: 0.2 };

export const SCENARIO_DEFINITIONS: Record<ScenarioName, ScenarioDefinition> = {
  steady: {
    name: 'steady',
    description: 'every VIN reports GPS, tires and cargo below its limits; nothing may be limited',
    mix: STEADY_MIX,
    intent: () => 'under',
    frontLoaded: false,
    slowSubscribers: false,
  },
  burst: {
    name: 'burst',
    description: 'every VIN sends past its gps-basic limit early in each window: exactly the limit is accepted, the rest 429',
    mix: { 'gps-basic': 1 },
    intent: () => 'over',
    frontLoaded: true,
    slowSubscribers: false,
  },
  'noisy-vin': {
    name: 'noisy-vin',
    description: 'one VIN floods past its limit; every other VIN stays under its own and is never limited',
    mix: { 'gps-basic': 1 },
    intent: (_product, vinIndex) => (vinIndex === 0 ? 'over' : 'under'),
    // A flood: three times its limit in every window.
    overBy: (limit) => 2 * limit,
    frontLoaded: false,
    slowSubscribers: false,
  },
  'multi-product': {
    name: 'multi-product',
    description: 'the same VINs through three products: tpms goes over its limit, cargosafe exactly to it, gps-basic stays under; quotas stay separate',
    mix: { 'gps-basic': 1 / 3, tpms: 1 / 3, cargosafe: 1 / 3 },
    intent: (product) => (product === 'tpms' ? 'over' : product === 'cargosafe' ? 'at' : 'under'),
    frontLoaded: false,
    slowSubscribers: false,
  },
  rotation: {
    name: 'rotation',
    description: 'steady traffic while a partner key and then a customer key are rotated: old tokens fail, clients recover with the new keys',
    mix: STEADY_MIX,
    intent: () => 'under',
    frontLoaded: false,
    rotation: { partnerAt: 0.35, customerAt: 0.55 },
    slowSubscribers: false,
  },
  'slow-subscriber': {
    name: 'slow-subscriber',
    description: 'steady traffic while one in four of each customer\'s subscribers reads slowly: the others still get every update, the slow ones the latest state',
    mix: STEADY_MIX,
    intent: () => 'under',
    frontLoaded: false,
    slowSubscribers: true,
  },
};

/** One planned request. */
export interface PlannedSend {
  /** Epoch ms (client clock) when to send. */
  at: number;
  product: SimulatedProduct;
  vinIndex: number;
  /** Index of its window group in `SendPlan.groups`. */
  group: number;
}

/** The sends of one (product, VIN) in one window. */
export interface WindowGroup {
  product: SimulatedProduct;
  vinIndex: number;
  /** The window, epoch ms in the server's clock (aligned to multiples of the window length). */
  windowStart: number;
  windowEnd: number;
  intent: Intent;
  planned: number;
  limit: number;
}

export interface SendPlan {
  sends: PlannedSend[];
  groups: WindowGroup[];
  /** Epoch ms (client clock) the traffic starts and ends. */
  startAt: number;
  endAt: number;
}

export interface PlanOptions {
  scenario: ScenarioName;
  seed: number;
  vins: number;
  /** Target sends per second over the run (scenarios that must exceed a limit may send more). */
  rate: number;
  /** Client epoch ms of the first send. */
  startAt: number;
  durationMs: number;
  /** The intake limit of each product in the plan's mix. */
  limits: Partial<Record<SimulatedProduct, IntakeLimit>>;
  /** Keep sends this far from window edges. Default 100 ms. */
  marginMs?: number;
  /** Server clock minus client clock, ms (windows are the server's). Default 0. */
  clockOffsetMs?: number;
}

/**
 * How many sends a (product, VIN) makes in a window where its fair share of the rate is `share`;
 * `overBy` is how far past the limit an `over` intent goes at least.
 */
export function sendsFor(intent: Intent, share: number, limit: number, draw: () => number, overBy = Math.max(1, Math.ceil(limit / 4))): number {
  switch (intent) {
    case 'under': {
      // Stochastic rounding keeps the average rate right when the share is fractional.
      const whole = Math.floor(share);
      return Math.min(limit, whole + (draw() < share - whole ? 1 : 0));
    }
    case 'at':
      return limit;
    case 'over':
      return Math.max(Math.round(share), limit + overBy);
  }
}

/**
 * Limits for an embedded server that make a scenario's intents happen at the requested rate: `under`
 * products get twice their share (never reached), `over` products 60 % of it, `at` products their
 * share. `windowSeconds` is short so that a short run still spans several windows.
 */
export function embeddedLimits(options: { scenario: ScenarioName; vins: number; rate: number; windowSeconds: number }): Record<SimulatedProduct, IntakeLimit> {
  const definition = SCENARIO_DEFINITIONS[options.scenario];
  const limits = {} as Record<SimulatedProduct, IntakeLimit>;
  for (const [product, fraction] of Object.entries(definition.mix) as Array<[SimulatedProduct, number]>) {
    const share = (options.rate * fraction * options.windowSeconds) / options.vins;
    // Intents of the ordinary VINs decide (the noisy VIN goes over whatever the limit is).
    const intent = definition.intent(product, options.vins > 1 ? 1 : 0);
    const requests =
      intent === 'under' ? Math.max(2, Math.ceil(share * 2)) : intent === 'over' ? Math.max(1, Math.floor(share * 0.6)) : Math.max(1, Math.round(share));
    limits[product] = { requests, windowSeconds: options.windowSeconds };
  }
  // Products outside the mix are not sent; their limits stay the products' own.
  return limits;
}

/** Builds the plan of a run. */
export function planSends(options: PlanOptions): SendPlan {
  const definition = SCENARIO_DEFINITIONS[options.scenario];
  if (!definition) throw new TypeError(`planSends: unknown scenario ${JSON.stringify(options.scenario)}`);
  if (!Number.isInteger(options.vins) || options.vins < 1) throw new TypeError(`planSends: \`vins\` must be a positive integer, got ${options.vins}`);
  if (!(options.rate > 0)) throw new TypeError(`planSends: \`rate\` must be positive, got ${options.rate}`);
  if (!(options.durationMs > 0)) throw new TypeError(`planSends: \`durationMs\` must be positive, got ${options.durationMs}`);
  const margin = options.marginMs ?? 100;
  const offset = options.clockOffsetMs ?? 0;
  const faker = new Faker({ locale: [en, base] });
  // Its own stream of the seed, so that the plan does not shift the payloads' draws.
  faker.seed([options.seed, 0x5ced]);
  const draw = () => faker.number.float({ min: 0, max: 1 });

  // Server-clock bounds of the traffic.
  const start = options.startAt + offset;
  const end = start + options.durationMs;
  const sends: PlannedSend[] = [];
  const groups: WindowGroup[] = [];
  for (const [product, fraction] of Object.entries(definition.mix) as Array<[SimulatedProduct, number]>) {
    const limit = options.limits[product];
    if (!limit) throw new TypeError(`planSends: no limit for ${product}`);
    const windowMs = limit.windowSeconds * 1000;
    for (let windowStart = Math.floor(start / windowMs) * windowMs; windowStart < end; windowStart += windowMs) {
      const windowEnd = windowStart + windowMs;
      const from = Math.max(windowStart, start);
      const to = Math.min(windowEnd, end);
      const firstAt = from + margin;
      const lastAt = to - margin;
      // A sliver of a window at either end of the run has no room for a judged group.
      if (lastAt - firstAt < Math.min(200, windowMs / 4)) continue;
      const coverage = (to - from) / windowMs;
      for (let vinIndex = 0; vinIndex < options.vins; vinIndex++) {
        const intent = definition.intent(product, vinIndex);
        const share = ((options.rate * fraction * limit.windowSeconds) / options.vins) * coverage;
        const planned = sendsFor(intent, share, limit.requests, draw, definition.overBy?.(limit.requests));
        if (planned === 0) continue;
        const group = groups.length;
        groups.push({ product, vinIndex, windowStart, windowEnd, intent, planned, limit: limit.requests });
        const spanEnd = definition.frontLoaded ? firstAt + (lastAt - firstAt) / 2 : lastAt;
        const slot = (spanEnd - firstAt) / planned;
        for (let k = 0; k < planned; k++) {
          // Evenly spaced slots with a random place in each: regular on average, not lock-step.
          const at = firstAt + slot * (k + draw());
          sends.push({ at: Math.round(at) - offset, product, vinIndex, group });
        }
      }
    }
  }
  sends.sort((a, b) => a.at - b.at || a.group - b.group);
  return { sends, groups, startAt: options.startAt, endAt: options.startAt + options.durationMs };
}
