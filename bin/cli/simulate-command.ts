/**
 * `trailwire simulate`: the load simulator (simulator/). Embedded by default — an in-process
 * Trailwire on a temporary SQLite file, provisioned and torn down by the run — or remote with
 * `--target <url> --grpc <host:port>` and the deployment's keys. Shows a live progress line on a
 * terminal, then the final table (or, with `--json`, one report document), writes an HTML report
 * with `--report` and JUnit XML with `--junit`, and exits 1 when any invariant was violated, else 99
 * when a `--threshold` was breached (as k6 does), else 0.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { Argv, CommandModule } from 'yargs';
import { TrailwireError } from '../../core/errors.ts';
import type { IntakeLimit } from '../../core/products.ts';
import { parseStages, type Stage } from '../../simulator/arrival-schedule.ts';
import type { progressPrinter } from '../../simulator/progress-line.ts';
import { SCENARIO_DEFINITIONS, SCENARIOS, type ScenarioName } from '../../simulator/scenario-definitions.ts';
import type { SimulationReport } from '../../simulator/report.ts';
import type { SimulateOptions } from '../../simulator/simulate.ts';
import { parseThreshold } from '../../simulator/thresholds.ts';
import { printFailure } from './output.ts';

interface SimulateArguments {
  json: boolean;
  duration: number;
  vins: number;
  rate: number;
  stages?: string;
  threshold: string[];
  'abort-on-fail': boolean;
  junit?: string;
  'max-in-flight'?: number;
  'find-capacity'?: string;
  shard?: string;
  record?: string;
  'capacity-budget': number;
  subscribers: number;
  'sse-subscribers': number;
  webhooks: number;
  'webhook-listen'?: string;
  'webhook-url'?: string;
  scenario: ScenarioName;
  seed: number;
  report?: string;
  target?: string;
  grpc?: string;
  'auth-url'?: string;
  'partner-key': string[];
  'customer-key': string[];
  'partner-key-file': string[];
  'customer-key-file': string[];
  'heartbeat-ms'?: number;
  'heartbeat-slack-ms'?: number;
  limit: string[];
  window: number;
  customers: number;
  'processing-wait': number;
  'unregistered-vins': boolean;
}

export const simulateCommand: CommandModule<{ json: boolean }, SimulateArguments> = {
  command: 'simulate',
  describe: 'Load simulator: fake telemetry and LiveFeed subscribers that check the limits and the feed',
  builder: (yargs: Argv<{ json: boolean }>) =>
    yargs
      .option('duration', { type: 'number', default: 30, describe: 'Seconds of traffic' })
      .option('vins', { type: 'number', default: 20, describe: "How many VINs send (remote mode: at most the customers' own trailers, unless --unregistered-vins)" })
      .option('rate', { type: 'number', default: 50, describe: 'Intake requests per second, due on a schedule whatever the server does (scenarios that must exceed a limit may send more)' })
      .option('stages', { type: 'string', describe: 'A ramping arrival rate instead of --rate/--duration: DURATION:RATE,... linear within each stage from the last (from 0), e.g. 30s:50,60s:200,30s:0' })
      .option('threshold', {
        type: 'string',
        array: true,
        default: [],
        describe: "Pass/fail criterion, repeatable: p50|p90|p95|p99|max|live-p50|live-p95|live-p99|webhook-p50|webhook-p95|webhook-p99 <250ms, error-rate<1%, rate>=95% (the default rate check); a breach exits 99",
      })
      .option('abort-on-fail', { type: 'boolean', default: false, describe: 'Stop the traffic at the first breached threshold (judged every half second)' })
      .option('junit', { type: 'string', describe: 'Write a JUnit XML report (one testcase per invariant and per threshold) to this file' })
      .option('find-capacity', {
        type: 'string',
        describe: "Search for the highest --rate that holds this threshold, every invariant and the rate check: steps of --duration seconds from --rate, doubling, then halving the gap",
      })
      .option('capacity-budget', { type: 'number', default: 120, describe: 'With --find-capacity: seconds the search may take in all' })
      .option('shard', { type: 'string', describe: 'i/n: this is process i of n against one deployment (remote): its own VINs at 1/n of the rate, its own subscribers; write --record and join with `simulate merge`' })
      .option('record', { type: 'string', describe: 'Write the raw run record (for `simulate merge`) to this file' })
      .command(
        'merge <files..>',
        'Judge the records (--record) of the shards of one run together: invariants and thresholds over the whole run',
        (merge) => merge.positional('files', { type: 'string', array: true, demandOption: true, describe: 'The record files, one per shard' }),
        async (args) => {
          try {
            const [{ mergeRecords }, { buildReport }, { checkInvariants }] = await Promise.all([
              import('../../simulator/merge-runs.ts'),
              import('../../simulator/report.ts'),
              import('../../simulator/invariants.ts'),
            ]);
            const files = (args.files as string[]).map((name) => ({ name, content: JSON.parse(readFileSync(name, 'utf8')) as unknown }));
            const { record, arrivals, thresholds } = edgeParsed(() => mergeRecords(files));
            const { thresholdsOf } = await import('../../simulator/thresholds.ts');
            await writeOutputs(args as unknown as SimulateArguments, buildReport(record, checkInvariants(record), { arrivals, thresholds: thresholdsOf(thresholds) }));
          } catch (error) {
            printFailure(args, error);
          }
        },
      )
      .option('max-in-flight', { type: 'number', describe: 'Cap the intake requests in flight; a due request waits for a slot and its wait counts in its latency (default: no cap)' })
      .option('subscribers', { type: 'number', default: 4, describe: 'LiveFeed (gRPC) subscribers, spread over the customers' })
      .option('sse-subscribers', { type: 'number', default: 0, describe: 'GET /api/v1/live (Server-Sent Events) subscribers beside them, held to the same invariants' })
      .option('webhooks', {
        type: 'number',
        default: 0,
        describe: 'Webhook endpoints to register, spread over the customers (one each: as many as --customers or customer keys); a receiver in the run checks that every update arrives, signed, in order, and deletes them at the end',
      })
      .option('webhook-listen', { type: 'string', describe: "With --webhooks: host:port the receiver listens on (default 127.0.0.1:0, a free port)" })
      .option('webhook-url', {
        type: 'string',
        describe: 'With --webhooks: the URL the server calls to reach the receiver, when not http://<--webhook-listen> (a remote server, a proxy); each endpoint is a path under it. A server refuses http and private addresses unless started with --webhook-allow-http --webhook-allow-private',
      })
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
      // Keys on the command line are visible to every local user in `ps`: the environment and the
      // key files come first in the help and the docs (issue 29).
      .option('partner-key', {
        type: 'string',
        array: true,
        default: [],
        describe: 'Remote mode: product=key, once per product the scenario sends; prefer the env TRAILWIRE_PARTNER_KEY (comma-separated) or --partner-key-file, which ps does not show',
      })
      .option('customer-key', {
        type: 'string',
        array: true,
        default: [],
        describe: 'Remote mode: a customer key (repeatable); its fleets decide the VINs; prefer the env TRAILWIRE_CUSTOMER_KEY (comma-separated) or --customer-key-file',
      })
      .option('partner-key-file', { type: 'string', array: true, default: [], describe: 'Remote mode: product=file, a file holding that product\'s partner key (repeatable)' })
      .option('customer-key-file', { type: 'string', array: true, default: [], describe: 'Remote mode: a file holding a customer key (repeatable)' })
      .option('unregistered-vins', {
        type: 'boolean',
        default: false,
        describe: "Remote mode: when the customers own fewer trailers than --vins, fill up with VINs nobody registered (each becomes an unassigned trailer in the target store). Default: the customers' own trailers only",
      })
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
        'TRAILWIRE_PARTNER_KEY=gps-basic=twp_...,tpms=twp_... TRAILWIRE_CUSTOMER_KEY=twc_... $0 simulate --target http://localhost:8080 --grpc localhost:50051 --heartbeat-ms 15000',
        'against a running deployment, the keys out of ps',
      )
      .example('$0 simulate --target http://localhost:8080 --grpc localhost:50051 --partner-key-file gps-basic=./gps.key --customer-key-file ./customer.key', 'the keys in files'),
  handler: async (args) => {
    let progress: ReturnType<typeof progressPrinter> | undefined;
    try {
      const options = optionsOf(args);
      // Said at once, before the simulator's modules load (a second or two), and then each step as it
      // starts: a run against a deployment reads and subscribes for seconds before its first payload.
      const stage = args.json ? undefined : (text: string) => process.stderr.write(`  ${text}…\n`);
      if (!args.json)
        process.stderr.write(`Trailwire simulation: ${args.scenario} (${options.remote ? `remote, ${options.remote.target}` : 'embedded'}, seed ${args.seed}, ${args.stages ? `stages ${args.stages}` : `${args.duration} s`})\n`);
      // Loaded here, not at the top: `trailwire --help` and the other commands do not pay for the simulator.
      const [{ simulate }, { progressPrinter }] = await Promise.all([import('../../simulator/simulate.ts'), import('../../simulator/progress-line.ts')]);
      if (args['find-capacity'] !== undefined) {
        const { findCapacity, formatCapacityTable } = await import('../../simulator/capacity-search.ts');
        const threshold = args['find-capacity'];
        const search = await findCapacity(
          async (rate) => {
            stage?.(`step at ${rate}/s for ${options.durationS} s`);
            return (await simulate({ ...options, rate, thresholds: [...(options.thresholds ?? []), threshold] })).report;
          },
          { startRate: options.rate, budgetMs: args['capacity-budget'] * 1000 },
        );
        process.stdout.write(args.json ? `${JSON.stringify({ threshold, ...search })}\n` : formatCapacityTable(threshold, search));
        process.exitCode = search.capacity === null ? 99 : 0;
        return;
      }
      progress = !args.json && process.stderr.isTTY ? progressPrinter(process.stderr) : undefined;
      const { report, record, arrivals } = await simulate({ ...options, onProgress: progress?.update, onStage: stage });
      progress?.done();
      if (args.record) {
        const { recordFileOf } = await import('../../simulator/merge-runs.ts');
        writeFileSync(args.record, JSON.stringify(recordFileOf(record, arrivals, options.thresholds ?? [], options.shard ?? null)));
      }
      await writeOutputs(args, report);
    } catch (error) {
      progress?.done();
      printFailure(args, error);
    }
  },
};

/** Writes a run's report as asked (`--report`, `--junit`, then the table or `--json` on stdout) and sets the exit code. */
async function writeOutputs(args: Pick<SimulateArguments, 'json' | 'report' | 'junit'>, report: SimulationReport): Promise<void> {
  const [{ renderHtmlReport }, { formatReportTable, exitCodeOf }, { renderJUnitReport }] = await Promise.all([
    import('../../simulator/html-report.ts'),
    import('../../simulator/report.ts'),
    import('../../simulator/junit-report.ts'),
  ]);
  if (args.report) writeFileSync(args.report, renderHtmlReport(report));
  if (args.junit) writeFileSync(args.junit, renderJUnitReport(report));
  const written = [args.report && `HTML report: ${args.report}`, args.junit && `JUnit report: ${args.junit}`].filter(Boolean);
  process.stdout.write(args.json ? `${JSON.stringify(report)}\n` : formatReportTable(report) + written.map((line) => `\n${line}\n`).join(''));
  process.exitCode = exitCodeOf(report);
}

/** The command line as `SimulateOptions`; a malformed flag is a `validation_failed` naming it. */
export function optionsOf(args: SimulateArguments): SimulateOptions {
  const remote = args.target !== undefined || args.grpc !== undefined;
  if (remote && (!args.target || !args.grpc)) throw invalid('--target and --grpc go together (remote mode)');
  const keyOptions = ['partner-key', 'customer-key', 'partner-key-file', 'customer-key-file'] as const;
  if (!remote && keyOptions.some((option) => args[option].length > 0))
    throw invalid('--partner-key, --customer-key and their -file forms are for remote mode (with --target and --grpc)');
  const partnerKeys: Record<string, string> = {};
  for (const entry of listed(args['partner-key'])) {
    const match = /^([a-z][a-z0-9-]*)=(\S+)$/.exec(entry);
    // The entry itself is not echoed: it holds a key.
    if (!match) throw invalid(`--partner-key: expected product=key, got an entry starting ${JSON.stringify(entry.slice(0, 12))}`);
    partnerKeys[match[1]!] = match[2]!;
  }
  for (const entry of listed(args['partner-key-file'])) {
    const match = /^([a-z][a-z0-9-]*)=(.+)$/.exec(entry);
    if (!match) throw invalid(`--partner-key-file ${JSON.stringify(entry)}: expected product=file`);
    partnerKeys[match[1]!] = keyInFile('--partner-key-file', match[2]!);
  }
  const customerKeys = [...listed(args['customer-key']), ...listed(args['customer-key-file']).map((file) => keyInFile('--customer-key-file', file))];
  const limits: Record<string, IntakeLimit> = {};
  for (const entry of args.limit) {
    const match = /^([a-z][a-z0-9-]*)=(\d+)\/(\d+)s?$/.exec(entry);
    if (!match) throw invalid(`--limit ${JSON.stringify(entry)}: expected product=requests/seconds, e.g. gps-basic=120/60`);
    limits[match[1]!] = { requests: Number(match[2]), windowSeconds: Number(match[3]) };
  }
  let stages: Stage[] | undefined;
  if (args.stages !== undefined) stages = edgeParsed(() => parseStages(args.stages!));
  for (const threshold of [...args.threshold, ...(args['find-capacity'] === undefined ? [] : [args['find-capacity']])]) edgeParsed(() => parseThreshold(threshold));
  let shard: SimulateOptions['shard'];
  if (args.shard !== undefined) {
    const match = /^(\d+)\/(\d+)$/.exec(args.shard);
    if (!match || Number(match[1]) < 1 || Number(match[1]) > Number(match[2])) throw invalid(`--shard ${JSON.stringify(args.shard)}: expected i/n with 1 <= i <= n, e.g. 1/2`);
    if (!remote) throw invalid('--shard drives part of one deployment: give --target and --grpc');
    shard = { index: Number(match[1]), count: Number(match[2]) };
  }
  if (!(args.webhooks > 0) && (args['webhook-listen'] !== undefined || args['webhook-url'] !== undefined))
    throw invalid('--webhook-listen and --webhook-url set up the receiver of --webhooks N: give --webhooks too');
  if (args['find-capacity'] !== undefined && stages) throw invalid('--find-capacity steps a constant --rate: it does not take --stages');
  if (args['find-capacity'] !== undefined && !(args['capacity-budget'] > 0)) throw invalid(`--capacity-budget must be a positive number of seconds, got ${args['capacity-budget']}`);
  return {
    scenario: args.scenario,
    seed: args.seed,
    durationS: args.duration,
    vins: args.vins,
    rate: args.rate,
    stages,
    thresholds: args.threshold,
    abortOnFail: args['abort-on-fail'],
    maxInFlight: args['max-in-flight'],
    shard,
    subscribers: args.subscribers,
    sseSubscribers: args['sse-subscribers'],
    webhooks: args.webhooks === 0 ? undefined : { endpoints: args.webhooks, listen: args['webhook-listen'], url: args['webhook-url'] },
    heartbeatMs: args['heartbeat-ms'],
    heartbeatSlackMs: args['heartbeat-slack-ms'],
    processingWaitS: args['processing-wait'],
    windowSeconds: args.window,
    customers: args.customers,
    limits,
    remote: remote ? { target: args.target!, grpc: args.grpc!, authUrl: args['auth-url'], partnerKeys, customerKeys, unregisteredVins: args['unregistered-vins'] } : undefined,
  };
}

/** Repeated options and comma- or space-separated values (one environment variable for several keys) as one list. */
function listed(values: readonly string[]): string[] {
  return values.flatMap((value) => String(value).split(/[\s,]+/)).filter((entry) => entry !== '');
}

/** The key a file holds (surrounding whitespace trimmed), or a `validation_failed` naming the option and the file. */
function keyInFile(option: string, file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new TrailwireError('validation_failed', `${option} ${file}: cannot be read: ${(error as Error).message}`, { cause: error });
  }
  const key = text.trim();
  if (key === '' || /\s/.test(key)) throw invalid(`${option} ${file}: expected one key and nothing else in the file`);
  return key;
}

/** What `parse` answers, or its `TypeError` as a `validation_failed` (the message names the option). */
function edgeParsed<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    throw new TrailwireError('validation_failed', (error as Error).message, { cause: error });
  }
}

function invalid(message: string): TrailwireError {
  return new TrailwireError('validation_failed', message);
}
