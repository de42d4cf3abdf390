/**
 * The server's defaults that the command line shows in `--help`, in a module of their own so that
 * showing them does not load the stores.
 */

/** The embedded store's SQLite file when none is named (contract 9). */
export const DEFAULT_DB_FILE = './data/trailwire.db';
