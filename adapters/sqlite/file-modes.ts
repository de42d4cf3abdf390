/**
 * Owner-only permissions for the embedded database (issue 17). The file holds API-key hashes, the
 * paging secret and, unless `--signing-key-file` keeps it elsewhere, the token-signing private key:
 * anyone who can read it can mint a token for any customer. So the folder Trailwire creates is
 * `0700`, the file it creates `0600`, and the `-wal`/`-shm` files beside it `0600` too (SQLite gives
 * them the database file's mode, and we set it again in case they were made by an older version).
 * An existing file is never chmod-ed behind the operator's back: `serve` warns instead
 * (`readableByOthers`), saying how to fix it.
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

export const OWNER_ONLY_FILE = 0o600;
export const OWNER_ONLY_FOLDER = 0o700;

/** The files SQLite keeps beside the database in WAL mode. */
export function sidecarFiles(file: string): string[] {
  return [`${file}-wal`, `${file}-shm`];
}

/** The intake log's own file beside the store's (`intake-queue.ts`); an in-memory store's log is in memory too. */
export function intakeLogFile(storeFile: string): string {
  return storeFile === ':memory:' ? ':memory:' : `${storeFile}-intake-log`;
}

/**
 * Creates the database's folder (`0700`, only the levels that do not exist) and an empty file
 * (`0600`) when there is none yet, before SQLite opens it: SQLite would create it with the umask's
 * mode (usually `0644`).
 */
export function createOwnerOnly(file: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: OWNER_ONLY_FOLDER });
  if (!existsSync(file)) closeSync(openSync(file, 'a', OWNER_ONLY_FILE));
}

/** Sets `0600` on the `-wal`/`-shm` files of a database this process created. */
export function restrictSidecars(file: string): void {
  for (const sidecar of sidecarFiles(file)) if (existsSync(sidecar)) chmodSync(sidecar, OWNER_ONLY_FILE);
}

/** The database file, its intake log's and their sidecars that users other than the owner can read or write, with their modes (e.g. `0644`). */
export function readableByOthers(file: string): { file: string; mode: string }[] {
  const found: { file: string; mode: string }[] = [];
  const logFile = intakeLogFile(file);
  for (const candidate of [file, ...sidecarFiles(file), logFile, ...sidecarFiles(logFile)]) {
    if (!existsSync(candidate)) continue;
    const mode = statSync(candidate).mode & 0o777;
    if ((mode & 0o077) !== 0) found.push({ file: candidate, mode: `0${mode.toString(8)}` });
  }
  return found;
}
