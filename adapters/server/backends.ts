/**
 * Where a Trailwire process keeps its state, chosen by configuration from a table keyed by URL
 * scheme: the embedded SQLite file (the default: one process, one file; `--db ./x.db` is
 * `sqlite:./x.db`), or PostgreSQL (`postgres://`) for the store and the durable intake log, so that
 * many processes share one fleet (contract 11). `openStoreBackend` opens the one the options name
 * through that adapter's front door (its `index.ts`) and answers what the core is assembled from;
 * the server (`index.ts`) and every CLI command use it, so a `--database-url` means the same thing
 * everywhere. What processes must agree on besides the database — limits, live updates, key
 * rotations — is Redis's (`shared-state.ts`).
 */
import { TrailwireError } from '../../core/errors.ts';
import type { Clock } from '../../core/clock.ts';
import type { IntakeBackend } from '../../core/intake-queue.ts';
import type { TrailwireStore } from '../../core/store.ts';
import type { IntakeLog } from '../../core/intake-log.ts';
import { jetStreamOptionsOfUrl, openJetStreamIntakeLog } from '../nats/index.ts';
import { openPostgresIntake, openPostgresStore, type PostgresIntakeOptions } from '../postgres/index.ts';
import { openSqliteIntake, openSqliteStore, type SqliteDurability, type SqliteIntakeOptions } from '../sqlite/index.ts';
import { DEFAULT_DB_FILE } from './defaults.ts';

export { DEFAULT_DB_FILE };

export interface StoreBackendOptions {
  /** The SQLite file of the embedded store, used when no `databaseUrl` is given. Default `./data/trailwire.db`. */
  db?: string;
  /** SQLite durability: `process` survives kill -9, `power` also power loss. Default `process`. */
  durability?: SqliteDurability;
  /** A `postgres://` URL (or `sqlite:<file>`): where the store and the intake log live instead of `db`. */
  databaseUrl?: string;
  /** The PostgreSQL schema holding Trailwire's tables. Default `public`. */
  databaseSchema?: string;
  /**
   * A `nats://` URL: the intake log lives in NATS JetStream (stream `TRAILWIRE_INTAKE`), beside the
   * PostgreSQL of `databaseUrl`, which keeps its index and the store. Default: none (the log in the database).
   */
  intakeLog?: string;
  /** How this process takes part in intake. Default: it processes (a CLI command passes `{ process: false }`). */
  intake?: BackendIntakeOptions;
  /** The clock of the store's own timing (PostgreSQL's webhook-endpoint probe), the core's. Default: the system's. */
  clock?: Clock;
}

/**
 * How this process takes part in intake, for whichever front door the backend is: SQLite's
 * (`SqliteIntakeOptions`: processing, its thread, product modules, worker tuning, live updates and
 * round counts, the log) or PostgreSQL's (`PostgresIntakeOptions`: `process`).
 */
export type BackendIntakeOptions = Omit<SqliteIntakeOptions, 'store'> & Omit<PostgresIntakeOptions, 'store' | 'log'>;

/** The intake of a backend, as the server uses it. */
export interface BackendIntake extends IntakeBackend {
  /** Sets what an enqueue by another process sharing the queue wakes (PostgreSQL); nothing for SQLite. */
  onEnqueuedElsewhere(listener: () => void): void;
}

/** The store and intake of one process, opened. */
export interface StoreBackend {
  readonly store: TrailwireStore;
  readonly intake: BackendIntake;
  /** Says where the state lives, for the banner and logs (a database URL without its password). */
  readonly description: string;
  /** The SQLite file, when the backend is SQLite (for the server's file-mode warning). */
  readonly sqliteFile?: string;
}

type BackendOpener = (location: string, options: StoreBackendOptions) => Promise<StoreBackend>;

/** The backends by URL scheme. */
const BACKENDS: Readonly<Record<string, BackendOpener>> = {
  sqlite: openSqliteBackend,
  postgres: openPostgresBackend,
  postgresql: openPostgresBackend,
};

/** Opens the store and intake the options name: `databaseUrl`'s scheme picks the backend; without one, the SQLite file `db`. */
export async function openStoreBackend(options: StoreBackendOptions = {}): Promise<StoreBackend> {
  const url = options.databaseUrl || `sqlite:${options.db ?? DEFAULT_DB_FILE}`;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase() ?? '';
  const open = BACKENDS[scheme];
  if (options.intakeLog !== undefined && !/^postgres(ql)?$/.test(scheme))
    throw new TrailwireError('validation_failed', `an intake log (${redactUrl(options.intakeLog)}) needs a PostgreSQL --database-url, which keeps its index and the store`);
  if (!open)
    throw new TrailwireError(
      'validation_failed',
      `the database URL ${redactUrl(url)} names no known backend; use one of ${Object.keys(BACKENDS).map((known) => `${known}:`).join(', ')}`,
    );
  return open(url, options);
}

async function openSqliteBackend(url: string, options: StoreBackendOptions): Promise<StoreBackend> {
  const file = url.slice('sqlite:'.length);
  const store = await openSqliteStore({ file, durability: options.durability });
  try {
    // The file's one intake writer is this process: no other process enqueues for it to hear of.
    const intake = Object.assign(openSqliteIntake({ store, ...options.intake }), { onEnqueuedElsewhere: () => {} });
    return {
      store,
      intake,
      description: `sqlite ${file}`,
      sqliteFile: file,
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/** The intake logs that live outside the database, by URL scheme: the log of `--intake-log`. */
const INTAKE_LOGS: Readonly<Record<string, (url: string) => Promise<IntakeLog & { probe(): Promise<void> }>>> = {
  nats: (url) => openJetStreamIntakeLog(jetStreamOptionsOfUrl(url)),
  tls: (url) => openJetStreamIntakeLog(jetStreamOptionsOfUrl(url)),
};

async function openPostgresBackend(url: string, options: StoreBackendOptions): Promise<StoreBackend> {
  const store = await openPostgresStore({ connectionString: url, schema: options.databaseSchema, clock: options.clock });
  let log: (IntakeLog & { probe(): Promise<void> }) | undefined;
  try {
    if (options.intakeLog !== undefined) log = await openIntakeLog(options.intakeLog);
    const intake = await openPostgresIntake({ store, process: options.intake?.process, log });
    const description = `postgres ${redactUrl(url)}${options.intakeLog === undefined ? '' : ` + intake log ${redactUrl(options.intakeLog)}`}`;
    return { store, intake, description };
  } catch (error) {
    await log?.close();
    await store.close();
    throw error;
  }
}

/** The log of `--intake-log` (issue 30), by its URL's scheme: PostgreSQL keeps its index and the store beside it. */
function openIntakeLog(logUrl: string): Promise<IntakeLog & { probe(): Promise<void> }> {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(logUrl)?.[1]?.toLowerCase() ?? '';
  const openLog = INTAKE_LOGS[scheme];
  if (!openLog)
    throw new TrailwireError(
      'validation_failed',
      `the intake log URL ${redactUrl(logUrl)} names no known log; use one of ${Object.keys(INTAKE_LOGS).map((known) => `${known}:`).join(', ')}`,
    );
  return openLog(logUrl);
}

/** A URL as it may be printed: without its password. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an unparsable URL)';
  }
}
