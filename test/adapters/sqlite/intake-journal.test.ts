/**
 * The intake journal: what it acknowledged is read back after the process ends (in order, across its
 * two files), a torn or damaged tail ends the read instead of corrupting it, confirmed records go once
 * their file has been switched, one server owns a database's journal, a replay appends to the log
 * only what the log does not have, and a failing disk is answered honestly: a refused write is taken
 * back and refused as `store_unavailable` until the disk takes writes again, a failed sync stops
 * the journal until a restart.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fdatasyncSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writevSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { encodeIntakeGroup, IntakeJournal, JOURNAL_FILE_SWITCH_BYTES, journalFiles, readRecords, replayIntoLog } from '../../../adapters/sqlite/intake-journal.ts';
import { openSqliteIntakeQueue } from '../../../adapters/sqlite/intake-queue.ts';
import { openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { isTrailwireError } from '../../../core/errors.ts';
import type { NewIntake } from '../../../core/intake-queue.ts';
import { newIntake } from '../../support/fixtures.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-journal-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;
const freshFile = (): string => join(directory, `journal-${++files}.db`);

// Each payload a different receipt time and a payload with characters JSON must escape.
let receipts = 0;
const item = (overrides: Partial<NewIntake> = {}): NewIntake =>
  newIntake({ partnerId: 'partner-1', payload: JSON.stringify({ n: ++receipts, note: 'Zürich → Köln "quoted"' }), receivedAt: 1780315200000 + receipts, ...overrides });

/** Appends a group of payloads as the server does: encoded once. */
const append = (journal: IntakeJournal, group: NewIntake[]) => journal.append(encodeIntakeGroup(group));

/** Opens the journal as a server does: reads it back, then clears it for new records. */
function openCleared(file: string, durability: 'process' | 'power' = 'process'): IntakeJournal {
  const journal = IntakeJournal.open(file, { durability });
  journal.clear();
  return journal;
}

/** File calls of which the one named by `failing` fails with `code`, counting the syncs. */
function faultyDisk(code: string) {
  const disk = {
    failing: null as 'writev' | 'fdatasync' | null,
    syncs: 0,
    calls: {
      writev: (fd: number, buffers: readonly NodeJS.ArrayBufferView[], position?: number) => {
        if (disk.failing === 'writev') {
          // A full disk may take part of a write before it refuses the rest: a torn tail is left behind.
          writevSync(fd, [Buffer.from('torn')], position);
          throw Object.assign(new Error(`${code}: injected`), { code });
        }
        return writevSync(fd, buffers, position);
      },
      fdatasync: (fd: number) => {
        disk.syncs++;
        if (disk.failing === 'fdatasync') throw Object.assign(new Error(`${code}: injected`), { code });
        fdatasyncSync(fd);
      },
    },
  };
  return disk;
}

describe('IntakeJournal', () => {
  it('reads back every group it was given and not told was confirmed, in order, fields intact', () => {
    const file = freshFile();
    const journal = openCleared(file);
    const groups = [[item(), item({ idempotencyKey: 'key-1' })], [item()], [item(), item(), item()]];
    const appended = groups.map((group) => append(journal, group));
    assert.equal(journal.unconfirmedGroups, 3);
    journal.close();
    const reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered, groups);
    assert.ok(appended[0]!.number < appended[1]!.number && appended[1]!.number < appended[2]!.number);
    reopened.close();
  });

  it('leaves nothing to read back after a close with every group confirmed', () => {
    const file = freshFile();
    const journal = openCleared(file);
    journal.confirm(append(journal, [item()]));
    journal.close();
    const reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered, []);
    reopened.close();
  });

  it('refuses new records until what it read back is cleared', () => {
    const file = freshFile();
    const journal = IntakeJournal.open(file);
    assert.throws(() => append(journal, [item()]), /before the recovered payloads are cleared/);
    journal.close();
  });

  it('stops reading at a torn or damaged record: what follows it was never acknowledged', () => {
    const file = freshFile();
    const [segment] = journalFiles(file).segments;
    const journal = openCleared(file);
    const first = [item()];
    append(journal, first);
    const sizeAfterFirst = statSync(segment).size;
    append(journal, [item()]);
    journal.close();

    truncateSync(segment, statSync(segment).size - 5);
    let reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered, [first], 'a torn last record is left out');
    reopened.close();

    const bytes = readFileSync(segment);
    bytes[sizeAfterFirst + 20] = bytes[sizeAfterFirst + 20]! ^ 0xff;
    writeFileSync(segment, bytes);
    reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered, [first], 'a record whose checksum fails is left out');
    reopened.close();
  });

  it('switches files once one is large, truncates a file all of whose groups are confirmed, and replays both files in group order', () => {
    const file = freshFile();
    const [first, second] = journalFiles(file).segments;
    const big = () => [item({ payload: JSON.stringify({ filler: 'x'.repeat(JOURNAL_FILE_SWITCH_BYTES) }) })];
    let journal = openCleared(file);
    const a = big();
    const groupA = append(journal, a);
    const b = [item()];
    append(journal, b);
    assert.ok(statSync(second).size > 0, 'the group after a large file goes to the other file');
    journal.close();
    journal = IntakeJournal.open(file);
    assert.deepEqual(journal.recovered, [a, b], 'both files, older group first');
    journal.close();

    journal = openCleared(file);
    const c = big();
    const groupC = append(journal, c);
    const d = [item()];
    const groupD = append(journal, d);
    assert.equal(groupA.segment, groupC.segment);
    assert.notEqual(groupC.segment, groupD.segment);
    journal.confirm(groupC);
    assert.deepEqual(readRecords(readFileSync(first)), [], 'a file behind the active one is emptied once all its groups are confirmed');
    journal.close();
    journal = IntakeJournal.open(file);
    assert.deepEqual(journal.recovered, [d]);
    journal.clear();
    journal.confirm(append(journal, big()));
    assert.deepEqual([...readRecords(readFileSync(first)), ...readRecords(readFileSync(second))], [], 'the active file too, once it is large and all confirmed');
    journal.close();
    assert.ok(statSync(first).size >= JOURNAL_FILE_SWITCH_BYTES, 'emptied by a new salt, not by truncating: its blocks stay allocated for the next records');
  });

  it('never reads back what an earlier cycle of a reused file left behind its new records', () => {
    const file = freshFile();
    const journal = openCleared(file);
    const sized = (id: string) => [item({ id, payload: JSON.stringify({ n: 1 }) })];
    const old1 = journal.append(encodeIntakeGroup(sized('old-1')));
    const old2 = append(journal, [item({ payload: JSON.stringify({ filler: 'x'.repeat(JOURNAL_FILE_SWITCH_BYTES) }) })]);
    journal.confirm(old1);
    journal.confirm(old2); // the file is large and all confirmed: emptied for reuse
    // A record of exactly the first one's length ends where the old second record begins, whose
    // frame and checksum are intact: only its salt tells that it is not of this cycle.
    const fresh = sized('new-1');
    append(journal, fresh);
    journal.close();
    const reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered, [fresh]);
    reopened.close();
  });

  it('in power mode, syncs each group before append returns; in process mode, never', () => {
    const processDisk = faultyDisk('EIO');
    const processJournal = IntakeJournal.open(freshFile(), { fileCalls: processDisk.calls });
    processJournal.clear();
    append(processJournal, [item()]);
    assert.equal(processDisk.syncs, 0);
    processJournal.close();
    const powerDisk = faultyDisk('EIO');
    const file = freshFile();
    const powerJournal = IntakeJournal.open(file, { durability: 'power', fileCalls: powerDisk.calls });
    powerJournal.clear();
    const groups = [[item()], [item(), item()]];
    for (const group of groups) append(powerJournal, group);
    assert.equal(powerDisk.syncs, 3, 'the emptied header once, then one sync per group');
    powerJournal.close();
    const reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered, groups);
    reopened.close();
  });

  it('refuses a group the disk will not take with store_unavailable, leaves nothing of it, and takes groups again once the disk does', () => {
    const disk = faultyDisk('ENOSPC');
    const file = freshFile();
    const journal = IntakeJournal.open(file, { fileCalls: disk.calls });
    journal.clear();
    const before = [item()];
    append(journal, before);
    disk.failing = 'writev';
    assert.throws(() => append(journal, [item()]), (error: unknown) => isTrailwireError(error) && error.code === 'store_unavailable' && /disk is full/.test(error.message));
    assert.throws(() => journal.probe(), { code: 'store_unavailable' }, 'the probe finds the disk still full');
    disk.failing = null;
    journal.probe();
    const after = [item()];
    append(journal, after);
    journal.close();
    const reopened = IntakeJournal.open(file);
    assert.deepEqual(reopened.recovered, [before, after], 'the refused group left nothing in between');
    reopened.close();
  });

  it('after a failed fdatasync trusts its files no more: every append is refused until a restart, which reads back what reached the disk', () => {
    const disk = faultyDisk('EIO');
    const file = freshFile();
    const journal = IntakeJournal.open(file, { durability: 'power', fileCalls: disk.calls });
    journal.clear();
    const synced = [item()];
    append(journal, synced);
    disk.failing = 'fdatasync';
    assert.throws(() => append(journal, [item()]), { code: 'store_unavailable' });
    disk.failing = null;
    assert.throws(() => append(journal, [item()]), /until the server is restarted/, 'a sync that succeeds now proves nothing of the pages dropped before');
    assert.throws(() => journal.probe(), /until the server is restarted/);
    assert.ok(journal.syncFailure);
    journal.close();
    const reopened = IntakeJournal.open(file, { durability: 'power' });
    assert.equal(reopened.recovered[0]![0]!.id, synced[0]!.id, 'what was synced is read back');
    reopened.close();
  });

  it('belongs to one server at a time, in this process and in another', () => {
    const file = freshFile();
    const journal = openCleared(file);
    assert.throws(() => IntakeJournal.open(file), /another Trailwire server is using .*: an SQLite file serves one server process/);
    const script = `import('better-sqlite3').then(({ default: Database }) => {
      const lock = new Database(${JSON.stringify(journalFiles(file).lock)}, { timeout: 0 });
      try { lock.pragma('locking_mode = EXCLUSIVE'); lock.exec('BEGIN EXCLUSIVE; COMMIT'); console.log('taken'); } catch (error) { console.log(error.code); }
    })`;
    const other = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: process.cwd() });
    assert.equal(other.stdout.trim(), 'SQLITE_BUSY', other.stderr);
    journal.close();
    IntakeJournal.open(file).close();
  });
});

describe('replayIntoLog', () => {
  it('appends in order what the log does not hold yet, skips what it does, keeps idempotency keys, and empties the journal', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const queue = openSqliteIntakeQueue(store.db);
    const alreadyStored = item();
    await queue.enqueue(alreadyStored);
    let journal = openCleared(file);
    const keyed = item({ idempotencyKey: 'key-7' });
    const groups = [[alreadyStored, item()], [keyed, item()]];
    for (const group of groups) append(journal, group);
    journal.close();

    journal = IntakeJournal.open(file);
    assert.deepEqual(replayIntoLog(journal, queue), { read: 4 });
    const logged = store.db.prepare('SELECT id FROM intake_log ORDER BY seq').all() as { id: string }[];
    assert.deepEqual(logged.map((row) => row.id), groups.flat().map((entry) => entry.id));
    assert.equal((await queue.findByIdempotencyKey('partner-1', 'key-7', 0))?.id, keyed.id);
    assert.equal(journal.unconfirmedGroups, 0);
    journal.close();
    const again = IntakeJournal.open(file);
    assert.deepEqual(again.recovered, [], 'nothing to read back twice');
    again.close();
    await store.close();
    const reader = new Database(file, { readonly: true });
    assert.equal((reader.prepare('SELECT count(*) AS n FROM intake_log').get() as { n: number }).n, 4);
    reader.close();
  });
});
