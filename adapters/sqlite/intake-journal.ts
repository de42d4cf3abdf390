/**
 * The intake journal: where the HTTP thread of a server with a processing thread makes a payload
 * durable before its 202, so that the answer never waits for the SQLite write lock. The lock is the
 * processing thread's between batches (one writer per file), and a group of accepted payloads that
 * waited for the batch in hand — several milliseconds under load — held its 202s, and with them
 * their connections, just as long (issue 13: that wait, not CPU, kept intake at ~0.3 × node:http).
 *
 * Each event-loop turn's accepted payloads are appended as one record — one `write` — to an
 * append-only file beside the database; the 202s go out at once, and the thread appends the group to
 * the intake log in the database as before, without anyone waiting. Once the thread confirms a group,
 * its record is no longer needed: two files alternate, so that one is emptied for reuse as soon as
 * every group in it is confirmed while the other takes new records. What survives:
 *
 * - `process` durability: a written record is in the operating system's page cache, so it survives
 *   kill -9 of the process, as the database's own WAL commits do.
 * - `power` durability: `append` returns once `fdatasync` of the file has returned, in the turn that
 *   wrote the group, so a record also survives power loss before its 202s. The sync runs on the
 *   event loop: with a group per turn it is one sync per turn, and a slow disk makes the turns long,
 *   so more requests share the next one (a pool thread would pass each sync through the loop twice
 *   and hold its connections across those turns: 4–22 µs more per 202 where syncs take 0.2 ms,
 *   docs/performance.md).
 *
 * Faults (docs/intake-path.md). A write the disk refuses (full, failing) is undone — the file is cut
 * back to where the record began — and `append` throws `store_unavailable`; the next append tries
 * again, and `probe` tells whether the disk takes writes again. A failed fdatasync is different: the
 * kernel may have dropped the pages it could not write and a later sync can report success without
 * them (PostgreSQL's fsync lesson), so the journal is not trusted again until the server restarts
 * (`syncFailure`); the restart reads back what reached the disk.
 *
 * At the next start, the server reads back what the journal holds (`recovered`) and appends every
 * payload the log does not have yet, in order (payload ids are unique, so a group already appended is
 * skipped); only then does it take intake again. A record is framed by its length and a CRC-32, so a
 * torn write at power loss (never acknowledged) ends the replay rather than corrupting it.
 *
 * A file is emptied for reuse as SQLite empties its WAL: not by truncating or zeroing it, but by
 * giving it a new salt in its 8-byte header (one small write, where zeroing a few MB on the HTTP
 * thread stalled it for milliseconds); a record counts only with its file's current salt, so what
 * an earlier cycle left behind the new records is never read back. The blocks stay allocated, so
 * the records written over them do not change the file's size, and an fdatasync writes data alone,
 * without a filesystem journal commit for the size (half the time of a sync on ext4 here).
 *
 * One server owns a database's journal: it holds an exclusive lock (an SQLite lock on `<file>-intake.lock`,
 * which the operating system releases when the process dies) for as long as it runs, and a second
 * server that would write to it is refused at start with the reason. CLI commands beside the server
 * do not use the journal.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fdatasyncSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync, writevSync } from 'node:fs';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import Database from 'better-sqlite3';
import { storeUnavailable, TrailwireError } from '../../core/errors.ts';
import type { NewIntake } from '../../core/intake-queue.ts';
import type { SqliteIntakeQueue } from './intake-queue.ts';
import { OWNER_ONLY_FILE } from './file-modes.ts';
import type { SqliteDurability } from './sqlite-store.ts';
import { STORAGE_FAULT_RETRY_AFTER_SECONDS, storageFaultError } from './storage-faults.ts';

/** A file is emptied for reuse once every group in it is confirmed and it has grown past this size. */
export const JOURNAL_FILE_SWITCH_BYTES = 4 * 1024 * 1024;

/** Each file opens with its magic and its current salt (two little-endian u32). */
const FILE_MAGIC = 0x314a5754; // "TWJ1"
const FILE_HEADER_BYTES = 8;

/**
 * Each record: a header — the group's length, a CRC-32 of the rest of the header and the group, the
 * file's salt (little-endian u32 each), and the group number (a little-endian f64: exact to 2^53,
 * so a server taking a thousand groups a second never runs out; records of both files are replayed
 * in its order) — then the group's bytes (`intake-group-codec.ts`).
 */
const RECORD_HEADER_BYTES = 20;

/** The files of a database's journal: the two that alternate, and the lock. */
export function journalFiles(databaseFile: string): { segments: [string, string]; lock: string } {
  return { segments: [`${databaseFile}-intake-0`, `${databaseFile}-intake-1`], lock: `${databaseFile}-intake.lock` };
}

/** A group appended to the journal, to be confirmed once the intake log holds it. */
export interface JournalGroup {
  readonly number: number;
  readonly segment: 0 | 1;
}

/** A record as read back. */
interface JournalRecord {
  number: number;
  group: Buffer;
}

interface Segment {
  readonly file: string;
  readonly fd: number;
  /** Bytes written, its file header included (the position of the next record). */
  size: number;
  /** The salt of the records of this file's current cycle. */
  salt: number;
  /** Groups in this file not confirmed yet. */
  unconfirmed: number;
  /** Written since its last fdatasync (power durability). */
  dirty: boolean;
}

/** The file calls through which the journal writes and syncs: Node's, unless a test injects faults. */
export interface JournalFileCalls {
  writev: typeof writevSync;
  fdatasync: typeof fdatasyncSync;
}

const NODE_FILE_CALLS: JournalFileCalls = { writev: writevSync, fdatasync: fdatasyncSync };

/** Bytes `probe` writes past the end of the active file (and takes back): room for a typical group. */
const PROBE_BYTES = 64 * 1024;

export interface IntakeJournalOptions {
  /** As the store's: `power` makes each append wait for fdatasync. Default `process`. */
  durability?: SqliteDurability;
  /** Default: Node's `writevSync` and `fdatasyncSync`. Tests pass calls that fail, as a failing disk's would. */
  fileCalls?: Partial<JournalFileCalls>;
}

export class IntakeJournal {
  private active: 0 | 1 = 0;
  private nextGroupNumber: number;
  private closed = false;
  private cleared = false;
  /** A failed write left part of a record behind. */
  private damaged = false;
  /** The last write the disk refused, until a write (or a probe) succeeds. */
  private lastWriteFault: TrailwireError | undefined;
  /** A failed fdatasync: the files are not trusted until a restart (see the top). */
  private failedSync: TrailwireError | undefined;
  private readonly calls: JournalFileCalls;

  private constructor(
    private readonly lock: Database.Database,
    private readonly segments: [Segment, Segment],
    private readonly durability: SqliteDurability,
    private recoveredGroups: readonly NewIntake[][],
    lastGroupNumber: number,
    fileCalls: Partial<JournalFileCalls>,
  ) {
    this.nextGroupNumber = lastGroupNumber + 1;
    this.calls = { ...NODE_FILE_CALLS, ...fileCalls };
  }

  /** What the files held when opened, in group order: to be appended to the log before `clear` (which lets it go). */
  get recovered(): readonly NewIntake[][] {
    return this.recoveredGroups;
  }

  /**
   * Takes the database's journal: locks it (throwing when another server holds it) and reads back
   * what it holds (`recovered`). Call `clear` once the recovered payloads are in the log; `append`
   * works from then on.
   */
  static open(databaseFile: string, options: IntakeJournalOptions = {}): IntakeJournal {
    const durability = options.durability ?? 'process';
    const files = journalFiles(databaseFile);
    const lock = takeLock(files.lock, databaseFile);
    const opened: Segment[] = [];
    try {
      const records: JournalRecord[] = [];
      for (const file of files.segments) {
        const created = !existsSync(file);
        if (created) closeSync(openSync(file, 'a', OWNER_ONLY_FILE));
        if (created && durability === 'power') syncFolderOf(file);
        // Not opened for appending: the writes give their positions, which appending would ignore.
        const fd = openSync(file, 'r+');
        const bytes = readFileSync(fd);
        opened.push({ file, fd, size: bytes.length, salt: 0, unconfirmed: 0, dirty: false });
        records.push(...readRecords(bytes));
      }
      records.sort((a, b) => a.number - b.number);
      const recovered = records.map((record) => decodeIntakeGroup(record.group));
      return new IntakeJournal(lock, opened as [Segment, Segment], durability, recovered, records.at(-1)?.number ?? 0, options.fileCalls ?? {});
    } catch (error) {
      for (const segment of opened) closeSync(segment.fd);
      lock.close();
      throw error;
    }
  }

  /** Empties both files: what they held (`recovered`) is in the intake log now. */
  clear(): void {
    if (this.unconfirmedGroups > 0) throw new Error('IntakeJournal: clear() with groups not confirmed');
    for (const segment of this.segments) this.empty(segment);
    this.recoveredGroups = [];
    this.cleared = true;
  }

  /**
   * Appends a group (`encodeIntakeGroup`) as one record (one write) and answers it, to be confirmed
   * later; in `power` durability, only once the files are synced. Throws `store_unavailable` when the
   * disk refuses the write or the sync (the group then does not count as journaled).
   */
  append(group: Buffer): JournalGroup {
    if (this.closed) throw new TrailwireError('unavailable', 'the intake journal is closed');
    if (this.damaged) throw this.damageError();
    // Before `clear`, the files still hold the recovered groups, which a new record must not follow.
    if (!this.cleared) throw new Error('IntakeJournal: append() before the recovered payloads are cleared');
    if (this.failedSync) throw this.failedSync;
    this.switchFileIfDue();
    const segment = this.segments[this.active];
    const number = this.nextGroupNumber++;
    const header = encodeRecordHeader(number, segment.salt, group);
    try {
      const written = this.calls.writev(segment.fd, [header, group], segment.size);
      // A regular file takes a whole write unless its disk is full: a short write is a failed one.
      if (written !== header.length + group.length)
        throw Object.assign(new Error(`the intake journal took ${written} of ${header.length + group.length} bytes`), { code: 'ENOSPC' });
    } catch (error) {
      this.undoWrite(segment);
      throw (this.lastWriteFault = this.faultOf(error));
    }
    segment.size += header.length + group.length;
    segment.dirty = true;
    // Counted before the sync: a record whose sync failed stays in the file, unconfirmed, for the restart to read.
    segment.unconfirmed++;
    if (this.durability === 'power') this.syncDirtyFiles();
    this.lastWriteFault = undefined;
    return { number, segment: this.active };
  }

  /**
   * Whether the disk takes the journal's writes: throws the fault that stops it (a failed sync, for
   * good; a refused write, unless a write of a typical group's size past the end of the active file
   * succeeds now — it is taken back at once). Readiness checks call it while intake is refused.
   */
  probe(): void {
    if (this.failedSync) throw this.failedSync;
    if (this.closed) throw new TrailwireError('unavailable', 'the intake journal is closed');
    if (this.damaged) throw this.damageError();
    if (!this.lastWriteFault) return;
    const segment = this.segments[this.active];
    try {
      const written = this.calls.writev(segment.fd, [Buffer.alloc(PROBE_BYTES)], segment.size);
      if (written !== PROBE_BYTES) throw Object.assign(new Error(`the disk took ${written} of ${PROBE_BYTES} bytes`), { code: 'ENOSPC' });
    } catch (error) {
      this.undoWrite(segment);
      throw (this.lastWriteFault = this.faultOf(error));
    }
    this.undoWrite(segment);
    this.lastWriteFault = undefined;
  }

  /** The failed fdatasync that stopped the journal until a restart, if one did. */
  get syncFailure(): TrailwireError | undefined {
    return this.failedSync;
  }

  /** The group is in the intake log: its record may go. A file all of whose groups are confirmed is emptied once it is large. */
  confirm(group: JournalGroup): void {
    const segment = this.segments[group.segment];
    segment.unconfirmed--;
    if (segment.unconfirmed === 0 && (group.segment !== this.active || segment.size >= JOURNAL_FILE_SWITCH_BYTES)) this.empty(segment);
  }

  /** Groups appended and not confirmed. */
  get unconfirmedGroups(): number {
    return this.segments[0].unconfirmed + this.segments[1].unconfirmed;
  }

  /**
   * Closes the files and releases the lock. What is unconfirmed stays in the files, for the next
   * start; when everything is confirmed, the files are emptied, so that the next start reads nothing.
   */
  close(): void {
    if (this.closed) return;
    if (this.cleared && !this.damaged && !this.failedSync && this.unconfirmedGroups === 0) for (const segment of this.segments) this.empty(segment);
    this.closed = true;
    for (const segment of this.segments) closeSync(segment.fd);
    this.lock.close();
  }

  /** New records go to the other file once this one is large and the other one is empty. */
  private switchFileIfDue(): void {
    const current = this.segments[this.active];
    const other = this.segments[this.active === 0 ? 1 : 0];
    if (current.size >= JOURNAL_FILE_SWITCH_BYTES && other.unconfirmed === 0) {
      if (other.size > FILE_HEADER_BYTES) this.empty(other);
      this.active = this.active === 0 ? 1 : 0;
    }
  }

  /** Empties a file for reuse: a new salt in its header, so that nothing it held is read back (see the top). */
  private empty(segment: Segment): void {
    let salt: number;
    do salt = randomBytes(4).readUInt32LE(0);
    while (salt === segment.salt);
    const header = Buffer.allocUnsafe(FILE_HEADER_BYTES);
    header.writeUInt32LE(FILE_MAGIC, 0);
    header.writeUInt32LE(salt, 4);
    writeFully(segment.fd, header, FILE_HEADER_BYTES, 0);
    segment.salt = salt;
    segment.size = FILE_HEADER_BYTES;
    segment.dirty = true;
  }

  /** Cuts a file back to its last whole record: part of a refused one must not stand in front of the next (replay stops at a damaged record). */
  private undoWrite(segment: Segment): void {
    try {
      ftruncateSync(segment.fd, segment.size);
    } catch {
      // Records written after the damaged one would never be replayed: this journal takes no more.
      this.damaged = true;
    }
  }

  /**
   * Syncs the files written since their last sync. A failure fails every append from now on: Linux
   * may have dropped the pages the failed sync was writing, and a later sync that succeeds does not
   * bring them back.
   */
  private syncDirtyFiles(): void {
    for (const segment of this.segments) {
      if (!segment.dirty) continue;
      try {
        this.calls.fdatasync(segment.fd);
      } catch (error) {
        this.failedSync = storeUnavailable(
          `the intake journal could not be synced to disk (${describeError(error)}); intake is refused until the server is restarted`,
          error,
          STORAGE_FAULT_RETRY_AFTER_SECONDS,
        );
        throw this.failedSync;
      }
      segment.dirty = false;
    }
  }

  /** A refused write could not be taken back: records after it would never be read back, so none is written. */
  private damageError(): TrailwireError {
    return storeUnavailable('the intake journal could not take back a refused write; intake is refused until the server is restarted', undefined, STORAGE_FAULT_RETRY_AFTER_SECONDS);
  }

  private faultOf(error: unknown): TrailwireError {
    return (
      storageFaultError(error, 'the intake journal') ??
      storeUnavailable(`the intake journal cannot be written (${describeError(error)}). Nothing was stored; try again later.`, error, STORAGE_FAULT_RETRY_AFTER_SECONDS)
    );
  }
}

function describeError(error: unknown): string {
  return (error as { code?: string })?.code ?? (error instanceof Error ? error.message : String(error));
}

function takeLock(lockFile: string, databaseFile: string): Database.Database {
  if (!existsSync(lockFile)) closeSync(openSync(lockFile, 'a', OWNER_ONLY_FILE));
  const lock = new Database(lockFile, { timeout: 0 });
  try {
    // No rollback journal beside the lock file: it holds no data, and its lock is all that is wanted.
    lock.pragma('journal_mode = MEMORY');
    lock.pragma('locking_mode = EXCLUSIVE');
    // The first write takes the exclusive lock; in this locking mode it is kept until the connection closes.
    lock.exec('BEGIN EXCLUSIVE; COMMIT');
    return lock;
  } catch (error) {
    lock.close();
    if ((error as { code?: string }).code === 'SQLITE_BUSY')
      throw new TrailwireError(
        'conflict',
        `another Trailwire server is using ${databaseFile} (its intake journal ${lockFile} is locked): an SQLite file serves one server process; for several, use PostgreSQL and Redis`,
        { cause: error },
      );
    throw error;
  }
}

function writeFully(fd: number, bytes: Buffer, length: number, position: number): void {
  let written = 0;
  while (written < length) written += writeSync(fd, bytes, written, length - written, position + written);
}

function encodeRecordHeader(number: number, salt: number, group: Buffer): Buffer {
  const header = Buffer.allocUnsafe(RECORD_HEADER_BYTES);
  header.writeUInt32LE(group.length, 0);
  header.writeUInt32LE(salt, 8);
  header.writeDoubleLE(number, 12);
  header.writeUInt32LE(crc32(group, crc32(header.subarray(8))), 4);
  return header;
}

/**
 * The records of a file's current cycle, in file order: reading stops at the first that is torn or
 * damaged, or that carries another salt (left by an earlier cycle). A file without a header holds none.
 */
export function readRecords(bytes: Buffer): JournalRecord[] {
  if (bytes.length < FILE_HEADER_BYTES || bytes.readUInt32LE(0) !== FILE_MAGIC) return [];
  const salt = bytes.readUInt32LE(4);
  const records: JournalRecord[] = [];
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

/** A new file's directory entry survives power loss only once its folder is synced. */
function syncFolderOf(file: string): void {
  const fd = openSync(dirname(file), 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Appends what the journal held when it was opened to the intake log, skipping the payloads the log
 * already has (`skipExisting`), then empties the journal: a server does this before it takes intake.
 * Answers how many payloads the journal held. Throws, leaving the journal as it was, when a payload
 * cannot be stored.
 */
export function replayIntoLog(journal: IntakeJournal, log: Pick<SqliteIntakeQueue, 'enqueueNow'>): { read: number } {
  let read = 0;
  for (const group of journal.recovered) {
    read += group.length;
    for (const outcome of log.enqueueNow(group, { skipExisting: true })) {
      if (outcome.kind === 'refused') throw new TrailwireError(outcome.code, `the intake journal could not be replayed into the log: ${outcome.message}`);
    }
  }
  journal.clear();
  return { read };
}

/**
 * The bytes of a group of accepted payloads: what the journal writes and what the HTTP thread sends
 * to the processing thread — encoded once, on the HTTP thread. (Sending the items themselves made the
 * HTTP thread structured-clone them besides encoding them for the journal: about 0.6 µs a payload
 * more.) JSON, so that an operator can read a journal file: an array with one array per payload,
 * `[id, partnerId, product, vin, receivedAt, idempotencyKey, payload]`, field names not repeated.
 */
export function encodeIntakeGroup(items: readonly NewIntake[]): Buffer {
  return Buffer.from(JSON.stringify(items.map((item): EncodedItem => [item.id, item.partnerId, item.product, item.vin, item.receivedAt, item.idempotencyKey, item.payload])));
}

/** Decodes what `encodeIntakeGroup` encoded. */
export function decodeIntakeGroup(bytes: Uint8Array): NewIntake[] {
  const encoded = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')) as EncodedItem[];
  return encoded.map(([id, partnerId, product, vin, receivedAt, idempotencyKey, payload]) => ({ id, partnerId, product, vin, receivedAt, idempotencyKey, payload }));
}

type EncodedItem = [id: string, partnerId: string, product: string, vin: string, receivedAt: number, idempotencyKey: string | null, payload: string];
