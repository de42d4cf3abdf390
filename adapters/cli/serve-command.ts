/**
 * `trailwire serve`: runs the service until SIGINT/SIGTERM, then shuts down gracefully. With
 * `--demo` it seeds the demo fleet once and prints working demo keys and a first curl to try.
 */
import type { Argv, CommandModule } from 'yargs';
import { pino } from 'pino';
import { builtInProducts } from '../../products/index.ts';
import { seedDemo, type DemoPrincipal } from '../../simulator/demo-seed.ts';
import { startServer } from '../server/index.ts';
import type { SqliteDurability } from '../sqlite/index.ts';
import { backendOptionsOf, type StoreArguments } from './open-core.ts';
import { printFailure } from './output.ts';

type ServeArguments = StoreArguments & {
  json: boolean;
  port: number;
  host?: string;
  demo: boolean;
  'log-level': string;
  'intake-worker': boolean;
  'grpc-port': number;
  'heartbeat-ms': number;
  durability: SqliteDurability;
};

export const serveCommand: CommandModule<StoreArguments & { json: boolean }, ServeArguments> = {
  command: 'serve',
  describe: 'Run the service (HTTP auth + data API)',
  builder: (yargs: Argv<StoreArguments & { json: boolean }>) =>
    yargs
      .option('port', { type: 'number', default: 8080, describe: 'HTTP port (env TRAILWIRE_PORT)' })
      .option('grpc-port', { type: 'number', default: 50051, describe: 'gRPC LiveFeed port (env TRAILWIRE_GRPC_PORT)' })
      .option('heartbeat-ms', { type: 'number', default: 15000, describe: 'LiveFeed heartbeat interval in ms (env TRAILWIRE_HEARTBEAT_MS)' })
      .option('host', { type: 'string', describe: 'Interface to listen on (env TRAILWIRE_HOST). Default: all' })
      .option('durability', {
        choices: ['process', 'power'] as const,
        default: 'process' as const,
        describe: 'What a 202 survives: a process crash (process) or also power loss (power: fsync per group commit) (env TRAILWIRE_DURABILITY)',
      })
      .option('demo', { type: 'boolean', default: false, describe: 'Seed demo data once and print demo keys' })
      .option('intake-worker', {
        type: 'boolean',
        default: true,
        describe: 'Process queued intake in this process (--no-intake-worker: only accept it) (env TRAILWIRE_INTAKE_WORKER)',
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

async function serve(args: ServeArguments): Promise<void> {
  // Logs go to stderr so that stdout carries only what a user reads (or the --json document).
  const logger = pino({ level: args['log-level'] }, pino.destination(2));
  const server = await startServer({
    ...backendOptionsOf(args),
    redisUrl: args['redis-url'] || undefined,
    productModules: args['product-module'],
    durability: args.durability,
    port: args.port,
    host: args.host,
    logger,
    intakeWorker: args['intake-worker'],
    grpcPort: args['grpc-port'],
    heartbeatIntervalMs: args['heartbeat-ms'],
  });
  const demo = args.demo ? await seedDemo(server.trailwire, { products: builtInProducts.map((p) => p.name) }) : undefined;
  if (args.json) {
    process.stdout.write(`${JSON.stringify({ url: server.url, grpc: grpcAddress(server), db: args.db, store: server.storeDescription, demo: demo ?? null })}\n`);
  } else {
    process.stdout.write(banner(server.url, grpcAddress(server), server.storeDescription, demo?.principals, demo?.created ?? false));
  }
  logger.info({ url: server.url, store: server.storeDescription }, 'trailwire serving');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    await server.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

function grpcAddress(server: { url: string; grpcPort: number }): string {
  return `${new URL(server.url).hostname}:${server.grpcPort}`;
}

function banner(url: string, grpc: string, store: string, principals: DemoPrincipal[] | undefined, created: boolean): string {
  const lines = [
    '',
    `Trailwire is running`,
    `  HTTP   ${url}   (auth + data API; docs at ${url}/openapi.json)`,
    `  gRPC   ${grpc}   (livefeed.v1.LiveFeed, grpc.health.v1.Health)`,
    `  Store  ${store}`,
    '',
  ];
  if (principals) {
    lines.push(created ? 'Demo data seeded. Demo API keys (shown once):' : 'Demo data already present. Fresh demo API keys (the previous ones were rotated):');
    for (const principal of principals) {
      const who = principal.audience === 'customers' ? `customer  ${principal.name}` : `partner   ${principal.product}`;
      lines.push(`  ${who.padEnd(30)} ${principal.apiKey}`);
    }
    const customer = principals.find((p) => p.audience === 'customers');
    if (customer) {
      lines.push(
        '',
        'Try:',
        `  TOKEN=$(curl -s -X POST -H "X-API-KEY: ${customer.apiKey}" ${url}/api/v1/customers/authenticate | node -pe 'JSON.parse(require("fs").readFileSync(0)).access_token')`,
        `  curl -s -H "Authorization: Bearer $TOKEN" ${url}/api/v1/fleets`,
      );
    }
    lines.push('');
  }
  return `${lines.join('\n')}\n`;
}
