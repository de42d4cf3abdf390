/**
 * The read-back of an intake journal an earlier version left beside the database. Until issue 38's
 * fourth session a server answered 202 once a turn's payloads were in that journal (two files,
 * `<file>-intake-0` and `<file>-intake-1`, locked through `<file>-intake.lock`), and a processing
 * thread appended them to the log later; a server that ended before it did left them there. A
 * server now appends to the log before its 202s, so it writes no journal, but on its first start
 * after such an upgrade it appends, in order, what the journal holds and the log does not (payload
 * ids are unique: a group already appended is skipped), then removes the files. Nothing answered 202
 * by the earlier version is lost. The journal's lock stays: it is the file's server lock.
 *
 * The format, as the earlier version wrote it: each file opens with a magic ("TWJ1") and the salt of
 * its current cycle (two little-endian u32); each record is a header — the group's length, a CRC-32
 * of the rest of the header and the group, the file's salt (u32 each), the group number (f64) — and
 * the group: JSON, one array `[id, partnerId, product, vin, receivedAt, idempotencyKey, payload]` per
 * payload. Reading a file stops at a torn or damaged record, or one with another salt (left by an
 * earlier cycle): it was never acknowledged.
 */
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import Database from 'better-sqlite3';
import { TrailwireError } from '../../core/errors.ts';
import type { NewIntake } from '../../core/intake-queue.ts';
import { OWNER_ONLY_FILE } from './file-modes.ts';
import type { SqliteIntakeQueue } from './intake-queue.ts';

const FILE_MAGIC = 0x314a5754; // "TWJ1"
const FILE_HEADER_BYTES = 8;
const RECORD_HEADER_BYTES = 20;

/** The files of a database's journal as an earlier version named them: the two that alternate, and the lock. */
export function journalFiles(databaseFile: string): { segments: [string, string]; lock: string } {
  return { segments: [`${databaseFile}-intake-0`, `${databaseFile}-intake-1`], lock: `${databaseFile}-intake.lock` };
}

/**
 * Appends to the log what a journal left beside `databaseFile` holds and the log does not, in group
 * order, then removes the journal's files; answers how many payloads it held (0 when there is no
 * journal). Call it holding the file's server lock (`takeServerLock`). Throws, leaving the files as
 * they were, when a payload cannot be stored.
 */
export function readBackJournal(databaseFile: string, log: Pick<SqliteIntakeQueue, 'enqueueNow'>): number {
  const present = journalFiles(databaseFile).segments.filter((file) => existsSync(file));
  const records = present.flatMap((file) => readRecords(readFileSync(file)));
  records.sort((a, b) => a.number - b.number);
  let read = 0;
  for (const { group } of records) {
    const items = decodeGroup(group);
    read += items.length;
    for (const outcome of log.enqueueNow(items, { skipExisting: true }))
      if (outcome.kind === 'refused') throw new TrailwireError(outcome.code, `the intake journal could not be read back into the log: ${outcome.message}`);
  }
  for (const file of present) rmSync(file);
  return read;
}

/** The records of a file's current cycle, in file order (see the top). */
function readRecords(bytes: Buffer): Array<{ number: number; group: Buffer }> {
  if (bytes.length < FILE_HEADER_BYTES || bytes.readUInt32LE(0) !== FILE_MAGIC) return [];
  const salt = bytes.readUInt32LE(4);
  const records: Array<{ number: number; group: Buffer }> = [];
  let at = FILE_HEADER_BYTES;
  while (at + RECORD_HEADER_BYTES <= bytes.length) {
    const length = bytes.readUInt32LE(at);
    const end = at + RECORD_HEADER_BYTES + length;
    if (length === 0 || end > bytes.length || bytes.readUInt32LE(at + 8) !== salt) break;
    const group = bytes.subarray(at + RECORD_HEADER_BYTES, end);
    if (crc32(group, crc32(bytes.subarray(at + 8, at + RECORD_HEADER_BYTES))) !== bytes.readUInt32LE(at + 4)) break;
    records.push({ number: bytes.readDoubleLE(at + 12), group });
    at = end;
  }
  return records;
}

type EncodedItem = [id: string, partnerId: string, product: string, vin: string, receivedAt: number, idempotencyKey: string | null, payload: string];

function decodeGroup(bytes: Buffer): NewIntake[] {
  const encoded = JSON.parse(bytes.toString('utf8')) as EncodedItem[];
  return encoded.map(([id, partnerId, product, vin, receivedAt, idempotencyKey, payload]) => ({ id, partnerId, product, vin, receivedAt, idempotencyKey, payload }));
}

/**
 * Takes the file's server lock, the one the earlier version's journal held (so that a server of
 * either version refuses to start beside another): an exclusive SQLite lock on `<file>-intake.lock`,
 * which the operating system drops when the process dies. A processing server holds it while it
 * runs (`close()` lets it go): an SQLite file serves one server process, whose live hub hears every
 * update it processes. Throws `conflict` naming the file when another server holds it.
 */
export function takeServerLock(databaseFile: string): Database.Database {
  const lockFile = journalFiles(databaseFile).lock;
  if (!existsSync(lockFile)) closeSync(openSync(lockFile, 'a', OWNER_ONLY_FILE));
  const lock = new Database(lockFile, { timeout: 0 });
  try {
    lock.pragma('journal_mode = MEMORY');
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE; COMMIT');
    return lock;
  } catch (error) {
    lock.close();
    if ((error as { code?: string }).code === 'SQLITE_BUSY')
      throw new TrailwireError(
        'conflict',
        `another Trailwire server is using ${databaseFile} (${lockFile} is locked): an SQLite file serves one server process; for several, use PostgreSQL and Redis`,
        { cause: error },
      );
    throw error;
  }
}
