/**
 * `simulate()`: the whole of `trailwire simulate` without the command line — make the target
 * (an embedded Trailwire, or a remote deployment), run the scenario, check the invariants, build
 * the report, and tear the embedded server down. The CLI parses flags into `SimulateOptions`;
 * tests call this directly, with server overrides that make the embedded server misbehave.
 */
import type { ServerOptions } from '../adapters/server/index.ts';
import type { IntakeLimit } from '../core/products.ts';
import { startEmbedded } from './embedded.ts';
import { checkInvariants } from './invariants.ts';
import { connectRemote } from './remote.ts';
import { buildReport, type SimulationReport } from './report.ts';
import type { RunRecord } from './run-record.ts';
import { SCENARIOS, type ScenarioName } from './scenarios.ts';
import { runSimulation, type SimulationProgress } from './simulation.ts';
import { SIMULATED_PRODUCTS, type SimulatedProduct, TrafficGenerator } from './traffic.ts';

export interface SimulateOptions {
  scenario: ScenarioName;
  /** Same seed, same traffic. */
  seed: number;
  durationS: number;
  vins: number;
  /** Intake requests per second. */
  rate: number;
  subscribers: number;
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
}

/** Runs a simulation end to end and answers its report (violations included). */
export async function simulate(options: SimulateOptions): Promise<SimulateResult> {
  validate(options);
  const traffic = new TrafficGenerator(options.seed);
  if (!options.remote) options.onStage?.('starting an embedded Trailwire on a temporary SQLite file');
  const embedded = options.remote
    ? undefined
    : await startEmbedded(
        {
          scenario: options.scenario,
          vins: options.vins,
          rate: options.rate,
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
        durationMs: options.durationS * 1000,
        rate: options.rate,
        subscribers: options.subscribers,
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
    const report = buildReport(record, checkInvariants(record), { durationS: options.durationS, rate: options.rate });
    return { report, record };
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
  positive('durationS', options.durationS);
  positive('vins', options.vins, true);
  positive('rate', options.rate);
  if (!Number.isInteger(options.subscribers) || options.subscribers < 0) throw new TypeError(`simulate: \`subscribers\` must be a whole number, got ${options.subscribers}`);
  for (const product of Object.keys(options.limits ?? {}))
    if (!(SIMULATED_PRODUCTS as readonly string[]).includes(product)) throw new TypeError(`simulate: no product ${JSON.stringify(product)} to limit; one of ${SIMULATED_PRODUCTS.join(', ')}`);
  if (options.remote) {
    if (!options.remote.target || !options.remote.grpc) throw new TypeError('simulate: remote mode needs both --target and --grpc');
    if (options.subscribers > 0 && options.remote.customerKeys.length === 0) throw new TypeError('simulate: remote subscribers need at least one --customer-key');
  }
}
