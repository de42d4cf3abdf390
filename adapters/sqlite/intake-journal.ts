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
 * - `power` durability: the 202s of a group wait for `fdatasync` of the file, so a record also
 *   survives power loss: in the turn that wrote it while the disk's syncs are quick, else on libuv's
 *   pool, where groups that come while one sync runs share the next (`sync-placement.ts`).
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
import { closeSync, existsSync, fdatasync, fdatasyncSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync, writevSync } from 'node:fs';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import Database from 'better-sqlite3';
import { TrailwireError } from '../../core/errors.ts';
import type { NewIntake } from '../../core/intake-queue.ts';
import { decodeIntakeGroup } from './intake-group-codec.ts';
import type { SqliteIntakeQueue } from './intake-queue.ts';
import { OWNER_ONLY_FILE } from './file-modes.ts';
import type { SqliteDurability } from './sqlite-store.ts';
import { SyncPlacement } from './sync-placement.ts';

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

interface DurableWaiter {
  /** Resolved once this many groups are on the disk. */
  groups: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export interface IntakeJournalOptions {
  /** As the store's: `power` makes each group wait for fdatasync. Default `process`. */
  durability?: SqliteDurability;
  /** Where power's syncs run. Default: a new `SyncPlacement`, which decides by the syncs' measured times (tests pass their own). */
  syncPlacement?: SyncPlacement;
}

export class IntakeJournal {
  private active: 0 | 1 = 0;
  private nextGroupNumber: number;
  private groupsWritten = 0;
  private groupsSynced = 0;
  private syncRunning = false;
  private durableWaiters: DurableWaiter[] = [];
  private closed = false;
  private cleared = false;
  /** A failed write left part of a record behind. */
  private damaged = false;

  private constructor(
    private readonly lock: Database.Database,
    private readonly segments: [Segment, Segment],
    private readonly durability: SqliteDurability,
    private recoveredGroups: readonly NewIntake[][],
    lastGroupNumber: number,
    private readonly syncPlacement: SyncPlacement,
  ) {
    this.nextGroupNumber = lastGroupNumber + 1;
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
      return new IntakeJournal(lock, opened as [Segment, Segment], durability, recovered, records.at(-1)?.number ?? 0, options.syncPlacement ?? new SyncPlacement());
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

  /** Appends a group (`encodeIntakeGroup`) as one record (one write) and answers it, to be confirmed later. Power: see `whenDurable`. */
  append(group: Buffer): JournalGroup {
    if (this.closed || this.damaged) throw new Error(`IntakeJournal: ${this.closed ? 'closed' : 'damaged by a failed write'}`);
    // Before `clear`, the files still hold the recovered groups, which a new record must not follow.
    if (!this.cleared) throw new Error('IntakeJournal: append() before the recovered payloads are cleared');
    this.switchFileIfDue();
    const segment = this.segments[this.active];
    const number = this.nextGroupNumber++;
    const header = encodeRecordHeader(number, segment.salt, group);
    try {
      const written = writevSync(segment.fd, [header, group], segment.size);
      // A regular file takes a whole write unless its disk is full: a short write is a failed one.
      if (written !== header.length + group.length) throw new Error(`the intake journal took ${written} of ${header.length + group.length} bytes (is the disk full?)`);
    } catch (error) {
      // A part of the record (a full disk) must not stay in front of the next ones: replay stops at a damaged record.
      try {
        ftruncateSync(segment.fd, segment.size);
      } catch {
        // Records written after the damaged one would never be replayed: this journal takes no more.
        this.damaged = true;
      }
      throw error;
    }
    segment.size += header.length + group.length;
    segment.unconfirmed++;
    segment.dirty = true;
    this.groupsWritten++;
    return { number, segment: this.active };
  }

  /**
   * Resolves once every group appended so far survives power loss: at once in `process` durability
   * (a written record already survives the process), after an fdatasync of the files in `power` —
   * done before this returns while syncs are quick, else on libuv's pool, where groups appended
   * while one sync runs share the next (`sync-placement.ts`).
   */
  whenDurable(): Promise<void> {
    if (this.durability !== 'power' || this.groupsSynced >= this.groupsWritten) return Promise.resolve();
    // Not beside a sync on the pool: that one answers for files whose dirty marks it took.
    if (!this.syncRunning && this.syncPlacement.nextOnLoop()) {
      try {
        this.syncDirtyFilesNow();
        return Promise.resolve();
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return new Promise((resolve, reject) => {
      this.durableWaiters.push({ groups: this.groupsWritten, resolve, reject });
      this.syncDirtyFiles();
    });
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
    if (this.cleared && !this.damaged && this.unconfirmedGroups === 0) for (const segment of this.segments) this.empty(segment);
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

  /** Syncs the files written since their last sync, here and now, on the event loop; throws when a sync fails. */
  private syncDirtyFilesNow(): void {
    const upTo = this.groupsWritten;
    const started = performance.now();
    try {
      for (const segment of this.takeDirtySegments()) fdatasyncSync(segment.fd);
    } catch (error) {
      this.synced(upTo, error);
      throw error;
    }
    this.syncPlacement.measured(performance.now() - started);
    this.synced(upTo);
  }

  /** The files written since their last sync, marked clean: the sync about to start answers for them. */
  private takeDirtySegments(): Segment[] {
    const dirty = this.segments.filter((segment) => segment.dirty);
    for (const segment of dirty) segment.dirty = false;
    return dirty;
  }

  /**
   * A sync covering the first `upTo` groups ended: answers the waiters it covers. A failed one fails
   * every waiter up to there, whatever another sync said of them: Linux may have dropped the pages
   * the failed sync was writing, and a later sync that succeeds does not bring them back.
   */
  private synced(upTo: number, failure?: unknown): void {
    if (failure === undefined) this.groupsSynced = Math.max(this.groupsSynced, upTo);
    const waiting = this.durableWaiters;
    this.durableWaiters = [];
    for (const waiter of waiting) {
      if (failure !== undefined && waiter.groups <= upTo) waiter.reject(failure);
      else if (waiter.groups <= this.groupsSynced) waiter.resolve();
      else this.durableWaiters.push(waiter);
    }
  }

  /** Syncs the files written since their last sync on libuv's pool, one sync at a time; the waiters' groups written meanwhile share the next. */
  private syncDirtyFiles(): void {
    if (this.syncRunning) return;
    this.syncRunning = true;
    const upTo = this.groupsWritten;
    const dirty = this.takeDirtySegments();
    let remaining = dirty.length;
    let failure: unknown;
    const done = (error: NodeJS.ErrnoException | null) => {
      failure ??= error ?? undefined;
      if (--remaining > 0) return;
      this.syncRunning = false;
      this.synced(upTo, failure);
      if (this.durableWaiters.length > 0) this.syncDirtyFiles();
    };
    if (dirty.length === 0) {
      remaining = 1;
      return done(null);
    }
    for (const segment of dirty) fdatasync(segment.fd, done);
  }
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
 * already has, then empties the journal: a server does this before it takes intake. Answers how many
 * payloads the journal held and how many of them the log did not have yet (appended now). Throws,
 * leaving the journal as it was, when a payload cannot be stored.
 */
export function replayIntoLog(journal: IntakeJournal, log: Pick<SqliteIntakeQueue, 'enqueueNow' | 'holdsPayload'>): { read: number; appended: number } {
  let read = 0;
  let appended = 0;
  for (const group of journal.recovered) {
    read += group.length;
    // The journal's holder is the only writer of its payloads, so what the log lacks now it lacks when appended.
    const absent = group.filter((item) => !log.holdsPayload(item.id));
    if (absent.length === 0) continue;
    for (const outcome of log.enqueueNow(absent)) {
      if ('error' in outcome) throw new Error(`the intake journal could not be replayed into the log: ${String(outcome.error)}`, { cause: outcome.error });
    }
    appended += absent.length;
  }
  journal.clear();
  return { read, appended };
}
