/**
 * The `trailwire` command line (contract 9), built on yargs. Every option can also come from the
 * environment as `TRAILWIRE_<OPTION>` (for example `TRAILWIRE_DB`, `TRAILWIRE_PORT`); options are
 * parsed here, once, into the typed options of the functions the commands call.
 */
import yargs, { type Argv, type CommandModule } from 'yargs';
import { DEFAULT_DB_FILE } from '../../adapters/server/defaults.ts';
import type { StoreArguments } from './open-core.ts';
import { usageFailure } from './output.ts';
import { dropForeignEnvironment } from './unknown-options.ts';
import { grantsCommand } from './grant-commands.ts';
import { provisionCommands } from './provision-commands.ts';
import { keysCommand } from './keys-commands.ts';
import { queueCommand } from './queue-commands.ts';
import { serveCommand } from './serve-command.ts';

/** The options of every command. */
interface TopArguments {
  json: boolean;
}

/** Parses `argv` (the arguments after the script name) and runs the command it names. */
export async function main(argv: string[]): Promise<void> {
  await yargs(argv)
    .scriptName('trailwire')
    .env('TRAILWIRE')
    .option('json', { type: 'boolean', default: false, describe: 'Print one JSON document on stdout and nothing else there', global: true })
    .command(withStoreOptions(serveCommand))
    .command(provisionCommands.map(withStoreOptions))
    .command(withStoreOptions(grantsCommand))
    .command(withStoreOptions(queueCommand))
    .command(withStoreOptions(keysCommand))
    .command((await import('./simulate-command.ts')).simulateCommand)
    .demandCommand(1, 'Choose a command; see --help')
    // Strict: an unknown option or command is an error (contract 9). TRAILWIRE_* variables meant for
    // another command are dropped before yargs validates (unknown-options.ts), so they never count.
    .strict()
    .recommendCommands()
    .middleware(dropForeignEnvironment(argv), true)
    .help()
    .fail(usageFailure(argv))
    .parseAsync();
}

/**
 * The store options (`--db`, `--database-url`, `--database-schema`, `--intake-log`, `--redis-url`, `--product-module`)
 * belong to the commands that open the store: `simulate` opens none (embedded, it makes a temporary
 * file; remote, it talks HTTP), so its `--help` does not list them and its command line refuses them
 * (issue 31, finding 6). Declared in a group's builder, they reach every action of the group.
 */
function withStoreOptions<U>(command: CommandModule<StoreArguments & TopArguments, U>): CommandModule<TopArguments, U> {
  const builder = command.builder;
  return {
    ...command,
    builder: (parser: Argv<TopArguments>) => {
      const withOptions = storeOptions(parser) as Argv<StoreArguments & TopArguments>;
      return (typeof builder === 'function' ? builder(withOptions) : builder ? withOptions.options(builder) : withOptions) as Argv<U>;
    },
  } as CommandModule<TopArguments, U>;
}

function storeOptions(parser: Argv<TopArguments>) {
  return parser
    .option('db', { type: 'string', default: DEFAULT_DB_FILE, describe: 'SQLite file of the embedded store (env TRAILWIRE_DB)' })
    .option('database-url', {
      type: 'string',
      describe: 'PostgreSQL URL: the store and intake queue live there instead of the SQLite file (env TRAILWIRE_DATABASE_URL)',
    })
    .option('database-schema', {
      type: 'string',
      describe: "PostgreSQL schema of Trailwire's tables, with --database-url (env TRAILWIRE_DATABASE_SCHEMA). Default: public",
    })
    .option('intake-log', {
      type: 'string',
      describe: 'nats:// URL: the intake log lives in NATS JetStream, with --database-url holding its index and the store (env TRAILWIRE_INTAKE_LOG)',
    })
    .option('redis-url', {
      type: 'string',
      describe: 'Redis URL: limits, live updates and key rotations shared by every process (env TRAILWIRE_REDIS_URL)',
    })
    .option('product-module', {
      type: 'string',
      array: true,
      default: [] as string[],
      describe: 'A product module to install besides the built-in products; repeatable (env TRAILWIRE_PRODUCT_MODULE)',
    });
}
