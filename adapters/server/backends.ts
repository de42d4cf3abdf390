/**
 * Where a Trailwire process keeps its state, chosen by configuration: the embedded SQLite file (the
 * default: one process, one file), or PostgreSQL for the store and the durable queue, so that many
 * processes share one fleet (contract 11). `openStoreBackend` opens the one the options name and
 * answers what the core is assembled from; the server (`index.ts`) and every CLI command use it, so
 * a `--database-url` means the same thing everywhere. What processes must agree on besides the
 * database — limits, live updates, key rotations — is Redis's (`shared-state.ts`).
 */
import type { IntakeQueue } from '../../core/intake-queue.ts';
import type { TrailwireStore } from '../../core/store.ts';
import { openPostgresIntakeQueue } from '../postgres/intake-queue.ts';
import { openPostgresStore } from '../postgres/index.ts';
import { openSqliteIntakeQueue, type SqliteIntakeQueue } from '../sqlite/intake-queue.ts';
import { openSqliteStore, type SqliteDurability, type SqliteStore } from '../sqlite/index.ts';
import { DEFAULT_DB_FILE } from './defaults.ts';

export { DEFAULT_DB_FILE };


export interface StoreBackendOptions {
  /** The SQLite file of the embedded store, used when no `databaseUrl` is given. Default `./data/trailwire.db`. */
  db?: string;
  /** SQLite durability: `process` survives kill -9, `power` also power loss. Default `process`. */
  durability?: SqliteDurability;
  /** A `postgres://` URL: the store and the intake queue live in that database instead of the SQLite file. */
  databaseUrl?: string;
  /** The PostgreSQL schema holding Trailwire's tables. Default `public`. */
  databaseSchema?: string;
}

/** The store and intake queue of one process, opened. */
export interface StoreBackend {
  readonly store: TrailwireStore;
  readonly queue: IntakeQueue;
  /** The embedded file's handles, when the backend is SQLite (the server's processing thread needs them). */
  readonly sqlite?: { store: SqliteStore; queue: SqliteIntakeQueue; file: string; durability: SqliteDurability };
  /** Says where the state lives, for the banner and logs (a database URL without its password). */
  readonly description: string;
  /** Sets what an enqueue wakes (the intake worker's `notify`); with PostgreSQL, enqueues by any process sharing the database. */
  onEnqueued(listener: () => void): void;
  /** Releases what the queue holds besides the store (PostgreSQL: its own session); after the core is closed. */
  releaseQueue(): Promise<void>;
}

/** Opens the store and queue the options name: PostgreSQL with a `databaseUrl`, else the SQLite file. */
export async function openStoreBackend(options: StoreBackendOptions = {}): Promise<StoreBackend> {
  let wake: () => void = () => {};
  if (options.databaseUrl) {
    const store = await openPostgresStore({ connectionString: options.databaseUrl, schema: options.databaseSchema });
    try {
      const queue = await openPostgresIntakeQueue(store, { onEnqueued: () => wake() });
      return {
        store,
        queue,
        description: `postgres ${redactUrl(options.databaseUrl)}`,
        onEnqueued: (listener) => (wake = listener),
        releaseQueue: () => queue.close(),
      };
    } catch (error) {
      await store.close();
      throw error;
    }
  }
  const file = options.db ?? DEFAULT_DB_FILE;
  const durability = options.durability ?? 'process';
  const store = await openSqliteStore({ file, durability });
  const queue = openSqliteIntakeQueue(store.db, { onEnqueued: () => wake() });
  return {
    store,
    queue,
    sqlite: { store, queue, file, durability },
    description: `sqlite ${file}`,
    onEnqueued: (listener) => (wake = listener),
    releaseQueue: async () => {},
  };
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
