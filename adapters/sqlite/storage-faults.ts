/**
 * What a failing disk looks like to the SQLite backend, and what a client is told of it. SQLite
 * reports a full disk (or a database past `max_page_count`) as SQLITE_FULL, a failing disk as one of
 * the SQLITE_IOERR_* codes, a file it may no longer write as SQLITE_READONLY_*, a file it cannot open
 * as SQLITE_CANTOPEN. None of them is the request's fault, and each passes once the operator frees
 * space or mends the disk: they become `store_unavailable` (503 with Retry-After, contract 6), never
 * a 500.
 */
import { storeUnavailable, type TrailwireError } from '../../core/errors.ts';

const SQLITE_FAULTS: ReadonlyArray<[prefix: string, says: string]> = [
  ['SQLITE_FULL', 'the database disk is full'],
  ['SQLITE_IOERR', 'the database disk failed an I/O operation'],
  ['SQLITE_READONLY', 'the database file is read-only'],
  ['SQLITE_CANTOPEN', 'the database file cannot be opened'],
  ['SQLITE_NOMEM', 'the database ran out of memory'],
];

/** Seconds a client is told to wait after a storage fault: space is freed by a person, not in a moment. */
export const STORAGE_FAULT_RETRY_AFTER_SECONDS = 5;

/** What the fault says, in the operator's words, or undefined when the error is no storage fault (a bug, a constraint). */
function describeStorageFault(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  for (const [prefix, says] of SQLITE_FAULTS) if (code.startsWith(prefix)) return says;
  return undefined;
}

/** The `store_unavailable` error of a storage fault (`what` failed: "the store", "the intake log"), or undefined when `error` is none. */
export function storageFaultError(error: unknown, what: string): TrailwireError | undefined {
  const says = describeStorageFault(error);
  if (says === undefined) return undefined;
  return storeUnavailable(`${what} cannot be written: ${says}. Nothing was stored; try again later.`, error, STORAGE_FAULT_RETRY_AFTER_SECONDS);
}
