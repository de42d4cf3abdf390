/**
 * Opens the store named by the global options and assembles the core around it, for the length of
 * one CLI command. Commands work while `serve` runs on the same store: SQLite in WAL mode lets
 * several processes share the file.
 */
import { createTrailwire, type Trailwire } from '../../core/trailwire.ts';
import { openSqliteStore } from '../sqlite/index.ts';

export interface StoreArguments {
  db: string;
}

/** Runs `work` with a core over the configured store, closing the store afterwards. */
export async function withCore<T>(args: StoreArguments, work: (trailwire: Trailwire) => Promise<T>): Promise<T> {
  const store = await openSqliteStore({ file: args.db });
  const trailwire = await createTrailwire({ store });
  try {
    return await work(trailwire);
  } finally {
    await trailwire.close();
  }
}
