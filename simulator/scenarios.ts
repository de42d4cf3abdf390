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

export { SCENARIOS, SCENARIO_DEFINITIONS, type Intent, type ScenarioDefinition, type ScenarioName } from './scenario-definitions.ts';
import { SCENARIO_DEFINITIONS, type Intent, type ScenarioName } from './scenario-definitions.ts';

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
  /**
   * Whether VIN `vinIndex` reports `product` at all (a deployment's trailer has only the devices it
   * has). Default: every VIN every product of the mix.
   */
  reports?: (product: SimulatedProduct, vinIndex: number) => boolean;
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
        if (options.reports && !options.reports(product, vinIndex)) continue;
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
