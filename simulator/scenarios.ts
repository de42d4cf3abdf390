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
import type { ArrivalSchedule } from './arrival-schedule.ts';
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
  /** When requests fall due over the run (scenarios that must exceed a limit may send more). */
  arrivals: ArrivalSchedule;
  /** Client epoch ms of the first send. */
  startAt: number;
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
 * How many sends a (product, VIN) makes in a window where its fair part of the schedule is
 * `fairCount` requests (whole: the planner apportions a window's requests over its VINs) and
 * `share` exactly; `overBy` is how far past the limit an `over` intent goes at least. A window the
 * schedule asks nothing of (a stage at 0) gets nothing, whatever the intent.
 */
export function sendsFor(intent: Intent, fairCount: number, share: number, limit: number, overBy = Math.max(1, Math.ceil(limit / 4))): number {
  if (share <= 0) return 0;
  switch (intent) {
    case 'under':
      return Math.min(limit, fairCount);
    case 'at':
      return limit;
    case 'over':
      return Math.max(fairCount, limit + overBy);
  }
}

/**
 * Limits for an embedded server that make a scenario's intents happen at the requested rate: `under`
 * products get twice their share (never reached), `over` products 60 % of it, `at` products their
 * share, at the schedule's peak rate. `windowSeconds` is short so that a short run still spans several windows.
 */
export function embeddedLimits(options: { scenario: ScenarioName; vins: number; /** The schedule's peak rate. */ rate: number; windowSeconds: number }): Record<SimulatedProduct, IntakeLimit> {
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
  const { arrivals } = options;
  const margin = options.marginMs ?? 100;
  const offset = options.clockOffsetMs ?? 0;
  const faker = new Faker({ locale: [en, base] });
  // Its own stream of the seed, so that the plan does not shift the payloads' draws.
  faker.seed([options.seed, 0x5ced]);
  const draw = () => faker.number.float({ min: 0, max: 1 });

  // Server-clock bounds of the traffic.
  const start = options.startAt + offset;
  const end = start + arrivals.durationMs;
  const sends: PlannedSend[] = [];
  const groups: WindowGroup[] = [];
  // A product none of the VINs reports (a deployment's trailers without tire sensors) leaves its
  // part of the rate to the products they do report, so the plan keeps the rate.
  const reportingVins = (product: SimulatedProduct) =>
    Array.from({ length: options.vins }, (_, vinIndex) => vinIndex).filter((vinIndex) => !options.reports || options.reports(product, vinIndex));
  const mix = (Object.entries(definition.mix) as Array<[SimulatedProduct, number]>).filter(([product]) => reportingVins(product).length > 0);
  const mixTotal = mix.reduce((sum, [, fraction]) => sum + fraction, 0);
  for (const [product, mixFraction] of mix) {
    const fraction = mixFraction / mixTotal;
    const limit = options.limits[product];
    if (!limit) throw new TypeError(`planSends: no limit for ${product}`);
    const windowMs = limit.windowSeconds * 1000;
    // The product's part of the rate is shared by the VINs that report it (a deployment's trailer
    // without tire sensors leaves its part to those with them), so the plan keeps the rate.
    const reporting = reportingVins(product);
    for (const { windowStart, windowEnd, from, to, dueFrom, dueTo } of windowSpans(start, end, windowMs, margin)) {
      const firstAt = from + margin;
      const lastAt = to - margin;
      const share = (arrivals.requestsBetween(dueFrom - start, dueTo - start) * fraction) / reporting.length;
      // Systematic rounding from a random offset: each VIN gets the floor or the ceiling of its
      // share, and the window's total is the schedule's to within one request.
      const offsetDraw = draw();
      for (const [order, vinIndex] of reporting.entries()) {
        const intent = definition.intent(product, vinIndex);
        const fairCount = Math.floor(offsetDraw + (order + 1) * share) - Math.floor(offsetDraw + order * share);
        const planned = sendsFor(intent, fairCount, share, limit.requests, definition.overBy?.(limit.requests));
        if (planned === 0) continue;
        const group = groups.length;
        groups.push({ product, vinIndex, windowStart, windowEnd, intent, planned, limit: limit.requests });
        // Evenly spaced along the schedule with a random place in each slot: the rate's shape (a
        // ramp) on average, not lock-step. What falls due in a margin goes at the margin's edge; a
        // front-loaded burst is squeezed into the first half of the window.
        const [spanFrom, spanTo] = definition.frontLoaded ? [firstAt, firstAt + (lastAt - firstAt) / 2] : [dueFrom, dueTo];
        for (let k = 0; k < planned; k++) {
          const at = Math.min(lastAt, Math.max(firstAt, arrivals.timeAtShare(spanFrom - start, spanTo - start, (k + draw()) / planned) + start));
          sends.push({ at: Math.round(at) - offset, product, vinIndex, group });
        }
      }
    }
  }
  sends.sort((a, b) => a.at - b.at || a.group - b.group);
  return { sends, groups, startAt: options.startAt, endAt: options.startAt + arrivals.durationMs };
}

/**
 * The windows a run of [`start`, `end`) touches, each with the part of it the run covers and the
 * span whose requests it sends. A sliver of a window at either end of the run has no room for a
 * judged group (its sends could not keep `margin` from both edges): its requests go with the
 * neighbouring window instead, at most a few hundred ms from when they fell due, so the plan keeps
 * the rate.
 */
function windowSpans(start: number, end: number, windowMs: number, margin: number) {
  const spans: Array<{ windowStart: number; windowEnd: number; from: number; to: number; dueFrom: number; dueTo: number }> = [];
  for (let windowStart = Math.floor(start / windowMs) * windowMs; windowStart < end; windowStart += windowMs) {
    const from = Math.max(windowStart, start);
    const to = Math.min(windowStart + windowMs, end);
    spans.push({ windowStart, windowEnd: windowStart + windowMs, from, to, dueFrom: from, dueTo: to });
  }
  const sliver = (span: (typeof spans)[number]) => span.to - span.from - 2 * margin < Math.min(200, windowMs / 4);
  if (spans.length > 1 && sliver(spans[0]!)) spans[1]!.dueFrom = spans.shift()!.dueFrom;
  if (spans.length > 1 && sliver(spans.at(-1)!)) spans.at(-2)!.dueTo = spans.pop()!.dueTo;
  return spans.filter((span) => !sliver(span));
}
