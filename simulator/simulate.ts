/**
 * `simulate()`: the whole of `trailwire simulate` without the command line — make the target
 * (an embedded Trailwire, or a remote deployment), run the scenario, check the invariants, build
 * the report, and tear the embedded server down. The CLI parses flags into `SimulateOptions`;
 * tests call this directly, with server overrides that make the embedded server misbehave.
 */
import type { ServerOptions } from '../adapters/server/index.ts';
import { ArrivalSchedule, type Stage } from './arrival-schedule.ts';
import type { IntakeLimit } from '../core/products.ts';
import { startEmbedded } from './embedded.ts';
import { checkInvariants } from './invariants.ts';
import { connectRemote } from './remote.ts';
import { buildReport, type SimulationReport } from './report.ts';
import type { RunRecord } from './run-record.ts';
import { SCENARIOS, type ScenarioName } from './scenarios.ts';
import { runSimulation, type SimulationProgress } from './simulation.ts';
import { thresholdsOf } from './thresholds.ts';
import { SIMULATED_PRODUCTS, type SimulatedProduct, TrafficGenerator } from './traffic.ts';
import { parseListenAddress } from './webhook-receiver.ts';

export interface SimulateOptions {
  scenario: ScenarioName;
  /** Same seed, same traffic. */
  seed: number;
  /** Seconds of traffic at `rate`; with `stages`, ignored (the stages say how long). */
  durationS: number;
  vins: number;
  /** Intake requests per second, when no `stages` are given. */
  rate: number;
  /** A ramping arrival rate instead of `rate` for `durationS` (`arrival-schedule.ts`). Default: none. */
  stages?: Stage[];
  /**
   * Thresholds such as `p99<250ms` (`thresholds.ts`), judged on the run; `rate>=95%` is added unless
   * one judges the rate. Default: that one only.
   */
  thresholds?: readonly string[];
  /** Stop the traffic at the first breached threshold. Default false. */
  abortOnFail?: boolean;
  /** The most intake requests in flight at once. Default: no cap (the open model). */
  maxInFlight?: number;
  /**
   * Run as shard `index` of `count` processes against one deployment (remote only): this one drives
   * its own VINs at its share of the rate (the rate and the stages are the whole run's), with its
   * own subscribers; `simulate merge` judges the shards' records together. Default: none.
   */
  shard?: { index: number; count: number };
  /** LiveFeed (gRPC) subscribers. */
  subscribers: number;
  /** `GET /api/v1/live` (Server-Sent Events) subscribers beside them. Default 0. */
  sseSubscribers?: number;
  /**
   * Webhook endpoints to register (`--webhooks`), spread over the customers as the subscribers are,
   * with the receiver's listen address (`--webhook-listen`, default `127.0.0.1:0`) and the URL the
   * server is to call it at (`--webhook-url`, default `http://` and that address). Default: none.
   */
  webhooks?: { endpoints: number; listen?: string; url?: string };
  /**
   * The LiveFeed heartbeat interval: the embedded server's, or what the remote one is assumed to
   * use. Default 1,000 ms embedded, 15,000 ms remote.
   */
  heartbeatMs?: number;
  /** How late a heartbeat may be. Default: max(1,000 ms, a quarter of the interval). */
  heartbeatSlackMs?: number;
  /** How long to wait for accepted payloads to be processed after the traffic. Default 30 s. */
  processingWaitS?: number;
  /** Embedded: the intake window of every product. Default 2 s. */
  windowSeconds?: number;
  /** Embedded: how many customers (each with a fleet). Default 4. */
  customers?: number;
  /** Intake limits: imposed on the embedded server, or those the remote one is known to use. */
  limits?: Partial<Record<string, IntakeLimit>>;
  /** Run against a deployment instead of an embedded server. */
  /** Remote mode; `unregisteredVins` lets it fill up to `vins` with VINs nobody registered (default: the customers' own trailers only). */
  remote?: { target: string; grpc: string; authUrl?: string; partnerKeys: Partial<Record<string, string>>; customerKeys: string[]; unregisteredVins?: boolean };
  /** Embedded: server option overrides (tests make the server disagree with the simulator). */
  embeddedServer?: Partial<ServerOptions>;
  onProgress?: (progress: SimulationProgress) => void;
  /** Told each step before the traffic as it starts (connecting, reading, subscribing), so a person sees what is going on from the first second. */
  onStage?: (text: string) => void;
}

export interface SimulateResult {
  report: SimulationReport;
  record: RunRecord;
  /** The whole run's schedule (a shard ran its share of it). */
  arrivals: ArrivalSchedule;
}

/** The whole run's schedule: the stages, or the rate for the duration. */
function scheduleOf(options: Pick<SimulateOptions, 'stages' | 'rate' | 'durationS'>): ArrivalSchedule {
  return options.stages ? ArrivalSchedule.ramp(options.stages) : ArrivalSchedule.constant(options.rate, options.durationS * 1000);
}

/** Runs a simulation end to end and answers its report (violations included). */
export async function simulate(options: SimulateOptions): Promise<SimulateResult> {
  validate(options);
  const arrivals = scheduleOf(options);
  // A shard sends its share of the whole run's schedule.
  const share = options.shard?.count ?? 1;
  const shardArrivals = options.stages
    ? ArrivalSchedule.ramp(options.stages.map((stage) => ({ ...stage, target: stage.target / share })))
    : ArrivalSchedule.constant(options.rate / share, options.durationS * 1000);
  const thresholds = thresholdsOf(options.thresholds ?? []);
  const traffic = new TrafficGenerator(options.seed);
  if (!options.remote) options.onStage?.('starting an embedded Trailwire on a temporary SQLite file');
  const embedded = options.remote
    ? undefined
    : await startEmbedded(
        {
          scenario: options.scenario,
          vins: options.vins,
          rate: arrivals.peakRate,
          customers: options.customers,
          windowSeconds: options.windowSeconds,
          limits: options.limits,
          heartbeatIntervalMs: options.heartbeatMs,
          server: options.embeddedServer,
        },
        traffic,
      );
  try {
    const target =
      embedded?.target ??
      (await connectRemote(
        {
          baseUrl: options.remote!.target,
          authUrl: options.remote!.authUrl,
          grpcTarget: options.remote!.grpc,
          partnerKeys: options.remote!.partnerKeys as Partial<Record<SimulatedProduct, string>>,
          customerKeys: options.remote!.customerKeys,
          vins: options.vins,
          unregisteredVins: options.remote!.unregisteredVins,
          limits: options.limits,
          heartbeatIntervalMs: options.heartbeatMs,
          onStage: options.onStage,
        },
        traffic,
      ));
    const record = await runSimulation(
      target,
      {
        scenario: options.scenario,
        seed: options.seed,
        arrivals: shardArrivals,
        shard: options.shard,
        subscribers: options.subscribers,
        sseSubscribers: options.sseSubscribers,
        webhooks: options.webhooks,
        maxInFlight: options.maxInFlight,
        thresholds,
        abortOnFail: options.abortOnFail,
        // Embedded windows are short and can be waited for; a remote 60 s window is judged in part.
        alignToWindow: embedded !== undefined,
        windowMarginMs: embedded ? 100 : 250,
        heartbeatSlackMs: options.heartbeatSlackMs,
        processingWaitMs: (options.processingWaitS ?? 30) * 1000,
        onProgress: options.onProgress,
        onStage: options.onStage,
      },
      traffic,
    );
    const report = buildReport(record, checkInvariants(record), { arrivals: shardArrivals, thresholds });
    return { report, record, arrivals };
  } finally {
    await embedded?.close();
  }
}

function validate(options: SimulateOptions): void {
  const positive = (name: string, value: number, integer = false) => {
    if (!(Number.isFinite(value) && value > 0) || (integer && !Number.isInteger(value)))
      throw new TypeError(`simulate: \`${name}\` must be a positive ${integer ? 'integer' : 'number'}, got ${value}`);
  };
  if (!SCENARIOS.includes(options.scenario)) throw new TypeError(`simulate: unknown scenario ${JSON.stringify(options.scenario)}; one of ${SCENARIOS.join(', ')}`);
  if (!Number.isInteger(options.seed)) throw new TypeError(`simulate: \`seed\` must be an integer, got ${options.seed}`);
  // Stages say how long and how fast themselves (`ArrivalSchedule.ramp` checks them).
  if (!options.stages) {
    positive('durationS', options.durationS);
    positive('rate', options.rate);
  }
  positive('vins', options.vins, true);
  if (options.maxInFlight !== undefined) positive('maxInFlight', options.maxInFlight, true);
  for (const name of ['subscribers', 'sseSubscribers'] as const) {
    const value = options[name] ?? 0;
    if (!Number.isInteger(value) || value < 0) throw new TypeError(`simulate: \`${name}\` must be a whole number, got ${value}`);
  }
  if (options.webhooks) {
    const { endpoints, listen, url } = options.webhooks;
    if (!Number.isInteger(endpoints) || endpoints < 0) throw new TypeError(`simulate: \`webhooks\` must be a whole number of endpoints, got ${endpoints}`);
    if (listen !== undefined) parseListenAddress('--webhook-listen', listen);
    if (url !== undefined && !/^https?:\/\/[^/\s]+/.test(url)) throw new TypeError(`simulate: --webhook-url ${JSON.stringify(url)}: expected an http or https URL that reaches the receiver`);
    if (endpoints > 0 && options.remote && options.remote.customerKeys.length === 0) throw new TypeError('simulate: remote webhook endpoints need at least one --customer-key (each is registered with its token)');
  }
  const webhookThreshold = (options.thresholds ?? []).find((expression) => /^\s*webhook-/.test(expression));
  if (webhookThreshold !== undefined && !(options.webhooks?.endpoints ?? 0))
    throw new TypeError(`simulate: --threshold ${JSON.stringify(webhookThreshold)} judges webhook deliveries: give --webhooks N`);
  for (const product of Object.keys(options.limits ?? {}))
    if (!(SIMULATED_PRODUCTS as readonly string[]).includes(product)) throw new TypeError(`simulate: no product ${JSON.stringify(product)} to limit; one of ${SIMULATED_PRODUCTS.join(', ')}`);
  if (options.shard) {
    const { index, count } = options.shard;
    if (!options.remote) throw new TypeError('simulate: a shard drives part of one deployment: give --target and --grpc');
    if (!(Number.isInteger(count) && count >= 1 && Number.isInteger(index) && index >= 1 && index <= count)) throw new TypeError(`simulate: shard ${index}/${count}: expected i/n with 1 <= i <= n`);
  }
  if (options.remote) {
    if (!options.remote.target || !options.remote.grpc) throw new TypeError('simulate: remote mode needs both --target and --grpc');
    if (options.subscribers + (options.sseSubscribers ?? 0) > 0 && options.remote.customerKeys.length === 0) throw new TypeError('simulate: remote subscribers need at least one --customer-key');
  }
}
