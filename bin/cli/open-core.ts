/**
 * Opens the backend named by the global options (the SQLite file, or PostgreSQL with
 * `--database-url`) and assembles the core around it, for the length of one CLI command. Commands
 * work while `serve` runs on the same backend: SQLite in WAL mode lets several processes share the
 * file, and PostgreSQL is made for it.
 */
import type { IntakeQueue } from '../../core/intake-queue.ts';
import type { TrailwireStore } from '../../core/store.ts';
import type { Trailwire, TrailwireOptions } from '../../core/trailwire.ts';
import type { StoreBackend } from '../../adapters/server/backends.ts';
import { printFailure } from './output.ts';

/** The global options every command shares, as yargs parses them. */
export interface StoreArguments {
  db: string;
  'database-url'?: string;
  'database-schema'?: string;
  'intake-log'?: string;
  'redis-url'?: string;
  'product-module': string[];
}

/** The backend options of the global options. */
export function backendOptionsOf(args: StoreArguments): { db: string; databaseUrl?: string; databaseSchema?: string; intakeLog?: string } {
  return {
    db: args.db,
    databaseUrl: args['database-url'] || undefined,
    databaseSchema: args['database-schema'] || undefined,
    intakeLog: args['intake-log'] || undefined,
  };
}

/** Runs `work` with a core over the configured backend (and `core` options, e.g. the grants rule), closing it afterwards. */
export async function withCore<T>(
  args: StoreArguments,
  work: (trailwire: Trailwire, backend: StoreBackend) => Promise<T>,
  core: Pick<TrailwireOptions, 'partnerIntake'> = {},
): Promise<T> {
  // Loaded on use, so that `--help` and argument errors answer without loading the stores and products.
  const [{ openStoreBackend }, { loadProductModule }, { createTrailwire }, { builtInProducts }] = await Promise.all([
    import('../../adapters/server/backends.ts'),
    import('../../core/products.ts'),
    import('../../core/trailwire.ts'),
    import('../../products/index.ts'),
  ]);
  const backend = await openStoreBackend({ ...backendOptionsOf(args), intake: { process: false } });
  try {
    const modules = await Promise.all(args['product-module'].map((specifier) => loadProductModule(specifier)));
    // The signing keys opened as they are: no command signs, and `keys list` must not make a key (issue 37).
    const trailwire = await createTrailwire({
      ...core,
      store: backend.store,
      products: [...builtInProducts, ...modules],
      worker: false,
      signingKeys: { writes: false },
    });
    try {
      return await work(trailwire, backend);
    } finally {
      await trailwire.close();
    }
  } catch (error) {
    await backend.store.close().catch(() => {});
    throw error;
  } finally {
    await backend.intake.stop();
  }
}

/**
 * Runs `work` with the configured backend's store alone, closing it afterwards: for reads, which need
 * neither the products nor the signing keys the core sets up.
 */
export async function withStore<T>(args: StoreArguments, work: (store: TrailwireStore) => Promise<T>): Promise<T> {
  const { openStoreBackend } = await import('../../adapters/server/backends.ts');
  const backend = await openStoreBackend({ ...backendOptionsOf(args), intake: { process: false } });
  try {
    return await work(backend.store);
  } finally {
    await backend.intake.stop();
    await backend.store.close();
  }
}

/** Runs `work` with the configured backend's intake queue. */
export function withQueue<T>(args: StoreArguments, work: (queue: IntakeQueue) => Promise<T>): Promise<T> {
  return withCore(args, (_trailwire, backend) => work(backend.intake.queue));
}

/** Runs a command's `work` with a core (`withCore`), reporting a failure as every command does. */
export async function runWithCore(
  args: StoreArguments & { json: boolean },
  work: Parameters<typeof withCore>[1],
  core?: Parameters<typeof withCore>[2],
): Promise<void> {
  try {
    await withCore(args, work, core);
  } catch (error) {
    printFailure(args, error);
  }
}
