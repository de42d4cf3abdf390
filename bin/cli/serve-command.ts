/**
 * `trailwire serve`: runs the service until SIGINT/SIGTERM, then shuts down gracefully. With
 * `--demo` it seeds the demo fleet once and prints working demo keys, the demo customers' ids and
 * fleets, and a first curl to try. With
 * `--workers N` (N > 1) this process becomes the primary of N server processes sharing the HTTP and
 * gRPC ports (`adapters/server/cluster.ts`); it prints the banner or `--json` document once, when
 * every worker listens.
 */
import cluster from 'node:cluster';
import type { Argv, CommandModule } from 'yargs';
import type { Logger } from 'pino';
import { TrailwireError } from '../../core/errors.ts';
import type { DemoSeed, DemoPrincipal } from '../../simulator/demo-seed.ts';
import type { RunningServer, ServerOptions } from '../../adapters/server/index.ts';
import { ACCESS_LOG_LEVELS, type AccessLogLevel } from '../../core/audit.ts';
import type { SqliteDurability } from '../../adapters/sqlite/index.ts';
import { backendOptionsOf, type StoreArguments } from './open-core.ts';
import { printFailure } from './output.ts';
import { portOf, positiveIntegerOf, type ServeSettingArguments, serveSettingsOf, withServeSettings } from './serve-settings.ts';

type ServeArguments = StoreArguments & ServeSettingArguments & {
  json: boolean;
  port: number;
  host?: string;
  demo: boolean;
  'demo-seed'?: number;
  'log-level': string;
  'intake-worker': boolean;
  'grpc-port': number;
  'heartbeat-ms': number;
  durability: SqliteDurability;
  workers: number;
  'redis-prefix'?: string;
  'startup-timeout': number;
  // Keys, secrets and the audit trail (issue 17).
  'signing-key-file'?: string;
  'access-log-level': AccessLogLevel;
  'map-tiles'?: string;
};

/** What a started server prints (and, from a cluster worker, what it reports to the primary). */
interface ServeReport {
  url: string;
  grpc: string;
  /** With --metrics-port: where /metrics answers. */
  metrics?: string;
  store: string;
  demo: DemoReport | null;
}

/** The demo as `serve --demo` reports it: its keys, and the demo customers' fleets (to find them by id). */
type DemoReport = DemoSeed & { fleets: { id: number; customerId: string; name: string }[] };

export const serveCommand: CommandModule<StoreArguments & { json: boolean }, ServeArguments> = {
  command: 'serve',
  describe: 'Run the service (HTTP auth + data API)',
  // The service settings (limits, tokens, ...) come first in --help, then where and how it runs.
  builder: (yargs: Argv<StoreArguments & { json: boolean }>) =>
    withServeSettings(yargs)
      .option('port', { type: 'number', default: 8080, describe: 'HTTP port (env TRAILWIRE_PORT)' })
      .option('grpc-port', { type: 'number', default: 50051, describe: 'gRPC LiveFeed port (env TRAILWIRE_GRPC_PORT)' })
      .option('heartbeat-ms', { type: 'number', default: 15000, describe: 'Heartbeat interval in ms of the LiveFeed and of GET /api/v1/live (env TRAILWIRE_HEARTBEAT_MS)' })
      .option('host', { type: 'string', describe: 'Interface to listen on (env TRAILWIRE_HOST). Default: all' })
      .option('durability', {
        choices: ['process', 'power'] as const,
        default: 'process' as const,
        describe: 'What a 202 survives: a process crash (process) or also power loss (power: fsync per group commit) (env TRAILWIRE_DURABILITY)',
      })
      .option('demo', { type: 'boolean', default: false, describe: "Seed demo data once; print demo keys and the demo customers' ids and fleets" })
      .option('demo-seed', {
        type: 'number',
        describe: 'With --demo on a fresh store: the seed of the demo data, 0 to 4294967295; the same seed gives the same demo (env TRAILWIRE_DEMO_SEED). Default: a new demo each time',
      })
      .option('intake-worker', {
        type: 'boolean',
        default: true,
        describe: 'Process queued intake in this process (--no-intake-worker: only accept it) (env TRAILWIRE_INTAKE_WORKER)',
      })
      .option('workers', {
        type: 'number',
        default: 1,
        describe:
          'Server processes sharing the HTTP and gRPC ports (node:cluster); more than 1 needs --database-url and --redis-url (env TRAILWIRE_WORKERS)',
      })
      .option('redis-prefix', {
        type: 'string',
        describe: 'Start of every Redis key and channel, with --redis-url; the same for every process of one deployment (env TRAILWIRE_REDIS_PREFIX). Default: trailwire:',
      })
      .option('startup-timeout', {
        type: 'number',
        default: 60,
        describe:
          'Seconds to wait at start for PostgreSQL and Redis when they cannot be reached, retrying every second, before exiting with the reason (env TRAILWIRE_STARTUP_TIMEOUT)',
      })
      // Keys, secrets and the audit trail (issue 17), kept together.
      .option('signing-key-file', {
        type: 'string',
        describe:
          'PEM file of the token-signing private key (RSA: RS256, EC P-256: ES256), kept out of the database; without it the database keeps a generated key (env TRAILWIRE_SIGNING_KEY_FILE)',
      })
      .option('access-log-level', {
        choices: ACCESS_LOG_LEVELS,
        default: 'info' as AccessLogLevel,
        describe: 'Level of the access-log lines (one per HTTP request, two per LiveFeed stream); below --log-level they are not written (env TRAILWIRE_ACCESS_LOG_LEVEL)',
      })
      .option('map-tiles', {
        type: 'string',
        describe:
          'Raster tile URL template for the live map at / (https://host/{z}/{x}/{y}.png); without it the map draws the outlines shipped in the package and fetches nothing elsewhere (env TRAILWIRE_MAP_TILES)',
      })
      .option('log-level', {
        type: 'string',
        default: 'info',
        choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
        describe: 'Log level (env TRAILWIRE_LOG_LEVEL)',
      }),
  handler: async (args) => {
    try {
      await serve(args);
    } catch (error) {
      printFailure(args, error);
    }
  },
};

/**
 * The server, the cluster and the demo, loaded when `serve` runs rather than when the command line
 * starts: `trailwire --help` and the provisioning commands answer without loading them.
 */
async function serverModules() {
  const [{ startServer }, { reportFailure, reportReady, startCluster }, { seedDemo, checkDemoSeed }, { builtInProducts }] = await Promise.all([
    import('../../adapters/server/index.ts'),
    import('../../adapters/server/cluster.ts'),
    import('../../simulator/demo-seed.ts'),
    import('../../products/index.ts'),
  ]);
  const seedDemoOf = async (server: RunningServer, seed: number | undefined): Promise<DemoReport> => {
    const report = await seedDemo(server.trailwire, { products: builtInProducts.map((p) => p.name), seed });
    const customers = report.principals.filter((principal) => principal.audience === 'customers');
    const fleets = await Promise.all(customers.map((customer) => server.trailwire.store.listFleets(customer.id, { limit: 100 })));
    return { ...report, fleets: fleets.flat().map(({ id, customerId, name }) => ({ id, customerId, name })) };
  };
  return { startServer, reportFailure, reportReady, startCluster, seedDemoOf, checkDemoSeed };
}

async function serve(args: ServeArguments): Promise<void> {
  const { pino } = await import('pino');
  // Logs go to stderr so that stdout carries only what a user reads (or the --json document).
  const logger = pino({ level: args['log-level'] }, pino.destination(2));
  if (cluster.isWorker) return serveAsWorker(args, logger.child({ worker: cluster.worker!.id }));
  // Checked here, before any worker is forked: a bad option is reported once, not by every worker.
  // And before the server's modules load, which is about 1.1 s of a refusal's 1.6 s.
  const workers = workersOf(args);
  const options = serverOptionsOf(args, logger);
  const { startServer, seedDemoOf, checkDemoSeed } = await serverModules();
  checkDemoSeed(args['demo-seed']);
  if (workers > 1) return serveAsPrimary(args, workers, logger);
  const server = await startServer(options);
  const demo = args.demo ? await seedDemoOf(server, args['demo-seed']) : null;
  printStarted(args, reportOf(server, demo), 1);
  logger.info({ url: server.url, store: server.storeDescription }, 'trailwire serving');
  stopOnSignals(logger, () => server.close());
}

/** The primary of `--workers N`: forks the workers, prints once they all listen, forwards stop signals. */
async function serveAsPrimary(args: ServeArguments, workers: number, logger: Logger): Promise<void> {
  const { startCluster } = await serverModules();
  const running = await startCluster<ServeReport>({ workers, logger });
  // Every worker has the same ports and store; the demo is seeded (and reported) by the first only.
  const first = running.ready[0]!;
  printStarted(args, { ...first, demo: running.ready.find((report) => report.demo !== null)?.demo ?? null }, workers);
  logger.info({ url: first.url, store: first.store, workers: running.pids }, 'trailwire serving');
  // SIGINT and SIGTERM reach the workers through the cluster; the primary ends when they have.
  process.exit(await running.exited);
}

/** A worker of `--workers N`: serves, and reports to the primary instead of printing. */
async function serveAsWorker(args: ServeArguments, logger: Logger): Promise<void> {
  const { startServer, reportReady, reportFailure, seedDemoOf } = await serverModules();
  try {
    const server = await startServer(serverOptionsOf(args, logger));
    stopOnSignals(logger, () => server.close());
    const demo = args.demo && cluster.worker!.id === 1 ? await seedDemoOf(server, args['demo-seed']) : null;
    await reportReady<ServeReport>(reportOf(server, demo));
    logger.info({ url: server.url }, 'trailwire worker serving');
  } catch (error) {
    await reportFailure(error).catch(() => {});
    process.exit(1);
  }
}

/** `--workers`, checked: several processes need state they can share (contract 11). */
function workersOf(args: ServeArguments): number {
  const workers = args.workers;
  if (!Number.isInteger(workers) || workers < 1)
    throw new TrailwireError('validation_failed', `--workers must be a positive integer, got ${String(workers)}`);
  if (workers > 1 && (!args['database-url'] || !args['redis-url']))
    throw new TrailwireError(
      'validation_failed',
      `--workers ${workers} needs --database-url and --redis-url: with the SQLite file, limits and live updates are kept in each process and cannot be shared by several`,
    );
  return workers;
}

function serverOptionsOf(args: ServeArguments, logger: Logger): ServerOptions {
  const settings = serveSettingsOf(args);
  return {
    ...settings,
    ...backendOptionsOf(args),
    redisUrl: args['redis-url'] || undefined,
    redisKeyPrefix: args['redis-prefix'],
    startupTimeoutMs: nonNegativeSecondsOf('--startup-timeout', args['startup-timeout']) * 1000,
    productModules: args['product-module'],
    durability: args.durability,
    port: portOf('--port', args.port),
    host: args.host,
    logger,
    intakeWorker: args['intake-worker'],
    grpcPort: portOf('--grpc-port', args['grpc-port']),
    heartbeatIntervalMs: positiveIntegerOf('--heartbeat-ms', args['heartbeat-ms'], 'milliseconds'),
    signingKeyFile: args['signing-key-file'] || undefined,
    accessLogLevel: args['access-log-level'],
    mapTilesUrl: args['map-tiles'] || undefined,
  };
}

function nonNegativeSecondsOf(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw new TrailwireError('validation_failed', `${name} must be a number of seconds, 0 or more, got ${String(value)}`);
  return value;
}

function reportOf(server: RunningServer, demo: DemoReport | null): ServeReport {
  return { url: server.url, grpc: grpcAddress(server), ...(server.metricsUrl ? { metrics: server.metricsUrl } : {}), store: server.storeDescription, demo };
}

function printStarted(args: ServeArguments, report: ServeReport, workers: number): void {
  if (args.json) process.stdout.write(`${JSON.stringify({ url: report.url, grpc: report.grpc, ...(report.metrics ? { metrics: report.metrics } : {}), db: args['database-url'] ? null : args.db, store: report.store, workers, demo: report.demo })}\n`);
  else process.stdout.write(banner(report, workers));
}

/** SIGINT or SIGTERM: close gracefully, then exit. */
function stopOnSignals(logger: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    await close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

function grpcAddress(server: { url: string; grpcPort: number }): string {
  return `${new URL(server.url).hostname}:${server.grpcPort}`;
}

function banner({ url, grpc, metrics, store, demo }: ServeReport, workers: number): string {
  const principals: DemoPrincipal[] | undefined = demo?.principals;
  const created = demo?.created ?? false;
  const lines = [
    '',
    `Trailwire is running`,
    `  Live map  ${url}/   (paste a customer API key)`,
    `  API docs  ${url}/docs   (OpenAPI document: ${url}/openapi.json)`,
    `  HTTP      ${url}   (auth + data API)`,
    `  gRPC      ${grpc}   (livefeed.v1.LiveFeed, grpc.health.v1.Health)`,
    ...(metrics ? [`  Metrics   ${metrics}`] : []),
    `  Store     ${store}`,
    ...(workers > 1 ? [`  Workers   ${workers} processes sharing both ports`] : []),
    '',
  ];
  if (principals) {
    lines.push(created ? 'Demo data seeded. Demo API keys (shown once):' : 'Demo data already present. Fresh demo API keys (the previous ones were rotated):');
    for (const principal of principals) {
      const who = principal.audience === 'customers' ? `customer  ${principal.name}` : `partner   ${principal.product}`;
      lines.push(`  ${who.padEnd(30)} ${principal.apiKey}`);
    }
    lines.push('', 'Demo customers and their fleets (the operator finds them with trailwire customers list, fleets list, trailers list):');
    for (const principal of principals.filter((p) => p.audience === 'customers')) {
      lines.push(`  ${principal.name.padEnd(28)} customer ${principal.id}`);
      for (const fleet of demo!.fleets.filter((f) => f.customerId === principal.id)) lines.push(`    fleet ${String(fleet.id).padEnd(5)} ${fleet.name}`);
    }
    const customer = principals.find((p) => p.audience === 'customers');
    if (customer) {
      lines.push(
        '',
        `Open ${url}/ and paste the ${customer.name} key above to watch its fleet live.`,
        '',
        'Try:',
        `  TOKEN=$(curl -s -X POST -H "X-API-KEY: ${customer.apiKey}" ${url}/api/v1/customers/authenticate | node -pe 'JSON.parse(require("fs").readFileSync(0)).access_token')`,
        `  curl -s -H "Authorization: Bearer $TOKEN" ${url}/api/v1/fleets`,
      );
      // Every demo partner key, so the simulator can send each product the scenario mixes; it drives
      // this customer's own trailers only (issue 31, finding 2).
      // The keys go in the environment, which `ps` does not show to other local users (issue 29).
      const partnerKeys = principals.filter((p) => p.audience === 'partners').map((p) => `${p.product}=${p.apiKey}`);
      lines.push(
        '',
        // 5 requests a second: the demo's dozen trailers each report every few seconds, and the status
        // reads after the run stay within the partners' read limit (600 a minute), so it ends on time.
        `Drive the ${customer.name} trailers with the load simulator (60 s, each from where it is, along the demo's roads):`,
        `  TRAILWIRE_PARTNER_KEY=${partnerKeys.join(',')} TRAILWIRE_CUSTOMER_KEY=${customer.apiKey} npx trailwire simulate --target ${url} --grpc ${grpc} --duration 60 --rate 5`,
      );
    }
    lines.push('');
  }
  return `${lines.join('\n')}\n`;
}
