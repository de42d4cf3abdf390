/**
 * `trailwire simulate`: the load simulator (simulator/). Embedded by default — an in-process
 * Trailwire on a temporary SQLite file, provisioned and torn down by the run — or remote with
 * `--target <url> --grpc <host:port>` and the deployment's keys. Shows a live progress line on a
 * terminal, then the final table (or, with `--json`, one report document), writes an HTML report
 * with `--report`, and exits 1 when any invariant was violated.
 */
import { writeFileSync } from 'node:fs';
import type { Argv, CommandModule } from 'yargs';
import { TrailwireError } from '../../core/errors.ts';
import type { IntakeLimit } from '../../core/products.ts';
import type { progressPrinter } from '../../simulator/progress-line.ts';
import { SCENARIO_DEFINITIONS, SCENARIOS, type ScenarioName } from '../../simulator/scenario-definitions.ts';
import type { SimulateOptions } from '../../simulator/simulate.ts';
import { printFailure } from './output.ts';

interface SimulateArguments {
  json: boolean;
  duration: number;
  vins: number;
  rate: number;
  subscribers: number;
  scenario: ScenarioName;
  seed: number;
  report?: string;
  target?: string;
  grpc?: string;
  'auth-url'?: string;
  'partner-key': string[];
  'customer-key': string[];
  'heartbeat-ms'?: number;
  'heartbeat-slack-ms'?: number;
  limit: string[];
  window: number;
  customers: number;
  'processing-wait': number;
}

export const simulateCommand: CommandModule<{ json: boolean }, SimulateArguments> = {
  command: 'simulate',
  describe: 'Load simulator: fake telemetry and LiveFeed subscribers that check the limits and the feed',
  builder: (yargs: Argv<{ json: boolean }>) =>
    yargs
      .option('duration', { type: 'number', default: 30, describe: 'Seconds of traffic' })
      .option('vins', { type: 'number', default: 20, describe: 'How many VINs send' })
      .option('rate', { type: 'number', default: 50, describe: 'Intake requests per second (scenarios that must exceed a limit may send more)' })
      .option('subscribers', { type: 'number', default: 4, describe: 'LiveFeed subscribers, spread over the customers' })
      .option('scenario', {
        type: 'string',
        choices: SCENARIOS,
        default: 'steady' as ScenarioName,
        describe: `What to exercise: ${SCENARIOS.map((name) => `${name} (${SCENARIO_DEFINITIONS[name].description})`).join('; ')}`,
      })
      .option('seed', { type: 'number', default: 1, describe: 'Same seed, same traffic' })
      .option('report', { type: 'string', describe: 'Write a self-contained HTML report to this file' })
      .option('target', { type: 'string', describe: 'Remote mode: base URL of a running deployment (else an embedded server is started)' })
      .option('grpc', { type: 'string', describe: 'Remote mode: host:port of its LiveFeed' })
      .option('auth-url', { type: 'string', describe: 'Remote mode: base URL of its auth API, when not the target' })
      .option('partner-key', { type: 'string', array: true, default: [], describe: 'Remote mode: product=key, once per product the scenario sends' })
      .option('customer-key', { type: 'string', array: true, default: [], describe: 'Remote mode: a customer key (repeatable); its fleets decide the VINs' })
      .option('heartbeat-ms', { type: 'number', describe: 'LiveFeed heartbeat interval: the embedded server uses it, a remote one is assumed to (default 1000 embedded, 15000 remote)' })
      .option('heartbeat-slack-ms', { type: 'number', describe: 'How late a heartbeat may be (default: max(1000, interval/4))' })
      .option('limit', {
        type: 'string',
        array: true,
        default: [],
        describe: 'product=requests/seconds: imposed on the embedded server, or the remote deployment\'s configured limit (repeatable)',
      })
      .option('window', { type: 'number', default: 2, describe: 'Embedded: the intake window in seconds the scenario limits use' })
      .option('customers', { type: 'number', default: 4, describe: 'Embedded: customers to provision, each with one fleet' })
      .option('processing-wait', { type: 'number', default: 30, describe: 'Seconds to wait, after the traffic, for accepted payloads to be processed' })
      .example('$0 simulate --duration 15 --vins 50 --rate 300 --subscribers 20 --scenario burst --seed 7 --json', 'the burst check, as JSON')
      .example(
        '$0 simulate --target http://localhost:8080 --grpc localhost:50051 --partner-key gps-basic=twp_... --customer-key twc_... --heartbeat-ms 15000',
        'against a running deployment',
      ),
  handler: async (args) => {
    let progress: ReturnType<typeof progressPrinter> | undefined;
    try {
      const options = optionsOf(args);
      // Loaded here, not at the top: `trailwire --help` and the other commands do not pay for the simulator.
      const [{ simulate }, { progressPrinter }, { renderHtmlReport }, { formatReportTable }] = await Promise.all([
        import('../../simulator/simulate.ts'),
        import('../../simulator/progress-line.ts'),
        import('../../simulator/html-report.ts'),
        import('../../simulator/report.ts'),
      ]);
      progress = !args.json && process.stderr.isTTY ? progressPrinter(process.stderr) : undefined;
      const { report } = await simulate({ ...options, onProgress: progress?.update });
      progress?.done();
      if (args.report) writeFileSync(args.report, renderHtmlReport(report));
      process.stdout.write(args.json ? `${JSON.stringify(report)}\n` : formatReportTable(report) + (args.report ? `\nHTML report: ${args.report}\n` : ''));
      if (report.violations.length > 0) process.exitCode = 1;
    } catch (error) {
      progress?.done();
      printFailure(args, error);
    }
  },
};

/** The command line as `SimulateOptions`; a malformed flag is a `validation_failed` naming it. */
export function optionsOf(args: SimulateArguments): SimulateOptions {
  const remote = args.target !== undefined || args.grpc !== undefined;
  if (remote && (!args.target || !args.grpc)) throw invalid('--target and --grpc go together (remote mode)');
  if (!remote && (args['partner-key'].length > 0 || args['customer-key'].length > 0))
    throw invalid('--partner-key and --customer-key are for remote mode (with --target and --grpc)');
  const partnerKeys: Record<string, string> = {};
  for (const entry of args['partner-key']) {
    const match = /^([a-z][a-z0-9-]*)=(\S+)$/.exec(entry);
    if (!match) throw invalid(`--partner-key ${JSON.stringify(entry)}: expected product=key`);
    partnerKeys[match[1]!] = match[2]!;
  }
  const limits: Record<string, IntakeLimit> = {};
  for (const entry of args.limit) {
    const match = /^([a-z][a-z0-9-]*)=(\d+)\/(\d+)s?$/.exec(entry);
    if (!match) throw invalid(`--limit ${JSON.stringify(entry)}: expected product=requests/seconds, e.g. gps-basic=120/60`);
    limits[match[1]!] = { requests: Number(match[2]), windowSeconds: Number(match[3]) };
  }
  return {
    scenario: args.scenario,
    seed: args.seed,
    durationS: args.duration,
    vins: args.vins,
    rate: args.rate,
    subscribers: args.subscribers,
    heartbeatMs: args['heartbeat-ms'],
    heartbeatSlackMs: args['heartbeat-slack-ms'],
    processingWaitS: args['processing-wait'],
    windowSeconds: args.window,
    customers: args.customers,
    limits,
    remote: remote ? { target: args.target!, grpc: args.grpc!, authUrl: args['auth-url'], partnerKeys, customerKeys: args['customer-key'] } : undefined,
  };
}

function invalid(message: string): TrailwireError {
  return new TrailwireError('validation_failed', message);
}
