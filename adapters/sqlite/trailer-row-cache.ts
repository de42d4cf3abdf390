/**
 * The trailer rows an SQLite store's batch writes have seen, so that moving a trailer's latest fix
 * need not read its row back: the new row is the row seen before with the new fix in it. Reading it
 * back (then an `UPDATE … RETURNING`, which SQLite answers through a temporary table) took a third of
 * processing a fix (issue 13, `npm run bench -- intake-processing`).
 *
 * What the cache keeps is trusted for every column but the latest fix's, which the caller always
 * takes from the fix it has just moved in (or reads again when the stored fix was newer). The other
 * columns change only when a trailer is assigned, switched on or off, or its devices' status is
 * recounted; so a row is forgotten
 *
 * - by this connection's own changes of that kind: the store calls `forget` or `clear`, and never
 *   keeps the row of a trailer a batch created (a rolled-back batch takes it, and its key, back);
 * - by another connection's commits (the server's main thread assigns trailers while its
 *   processing thread writes): SQLite's `data_version` moves, and `validate`, called as a batch
 *   starts, forgets every row.
 */
import type { TrailerRow } from '../sql/rows.ts';

/** Rows kept at most; past it, all are forgotten at once (as a fleet's worth is read again). */
export const MAX_CACHED_TRAILER_ROWS = 100_000;

export class TrailerRowCache {
  private readonly rows = new Map<number, TrailerRow>();
  private seenVersion: number | undefined;

  /** @param dataVersion the connection's `PRAGMA data_version`: it moves when another connection commits */
  constructor(private readonly dataVersion: () => number) {}

  /** Forgets every row when another connection has committed since the last look. */
  validate(): void {
    const version = this.dataVersion();
    if (version !== this.seenVersion) this.rows.clear();
    this.seenVersion = version;
  }

  /** The row of the trailer with this key as last seen, its latest fix not to be trusted. */
  get(key: number): TrailerRow | undefined {
    return this.rows.get(key);
  }

  set(key: number, row: TrailerRow): void {
    if (this.rows.size >= MAX_CACHED_TRAILER_ROWS && !this.rows.has(key)) this.rows.clear();
    this.rows.set(key, row);
  }

  forget(key: number): void {
    this.rows.delete(key);
  }

  clear(): void {
    this.rows.clear();
  }
}
