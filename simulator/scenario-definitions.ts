/**
 * The simulator's scenarios by name: what each one sends and aims for. Kept apart from the planning in
 * `scenarios.ts` (which draws with faker) so that the command line's `--help` lists them without
 * loading the planner.
 */
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
