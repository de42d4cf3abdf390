/**
 * The read-back of an intake journal an earlier version left (`journal-read-back.ts`): a server's
 * first start after the upgrade appends to the log, in group order across both files, every payload
 * the journal acknowledged and the log does not hold, keeps idempotency keys, stops at a torn or
 * damaged record, removes the files, and refuses to start beside a server that holds the lock.
 * The journal files here are written byte for byte in the earlier version's format.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { after, describe, it } from 'node:test';
import { openSqliteIntake, openSqliteIntakeQueue, openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { journalFiles, takeServerLock } from '../../../adapters/sqlite/journal-read-back.ts';
import type { NewIntake } from '../../../core/intake-queue.ts';
import { newIntake } from '../../support/fixtures.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-journal-read-back-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;
const freshFile = (): string => join(directory, `read-back-${++files}.db`);

let receipts = 0;
const item = (overrides: Partial<NewIntake> = {}): NewIntake =>
  newIntake({ partnerId: 'partner-1', payload: JSON.stringify({ n: ++receipts, note: 'Zürich → Köln "quoted"' }), receivedAt: 1780315200000 + receipts, ...overrides });

/** A journal file as the earlier version wrote it: its header (magic, salt), then each group's record. */
function journalFile(salt: number, groups: Array<{ number: number; items: NewIntake[] }>): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt32LE(0x314a5754, 0);
  header.writeUInt32LE(salt, 4);
  const records = groups.map(({ number, items }) => {
    const group = Buffer.from(JSON.stringify(items.map((i) => [i.id, i.partnerId, i.product, i.vin, i.receivedAt, i.idempotencyKey, i.payload])));
    const recordHeader = Buffer.alloc(20);
    recordHeader.writeUInt32LE(group.length, 0);
    recordHeader.writeUInt32LE(salt, 8);
    recordHeader.writeDoubleLE(number, 12);
    recordHeader.writeUInt32LE(crc32(group, crc32(recordHeader.subarray(8))), 4);
    return Buffer.concat([recordHeader, group]);
  });
  return Buffer.concat([header, ...records]);
}

describe('an intake journal left by an earlier version', () => {
  it('is appended to the log in group order across both files, keys kept, what the log holds skipped; its files go', async () => {
    const file = freshFile();
    const [a, b, c, d] = [item(), item({ idempotencyKey: 'key-1' }), item(), item()];
    const { segments } = journalFiles(file);
    // Group 2 in the second file, groups 1 and 3 in the first: the read-back orders by group number.
    writeFileSync(segments[0], journalFile(7, [{ number: 1, items: [a!] }, { number: 3, items: [d!] }]));
    writeFileSync(segments[1], journalFile(9, [{ number: 2, items: [b!, c!] }]));
    const store = await openSqliteStore({ file });
    // `c` reached the log before the earlier version ended: it is not appended twice.
    assert.equal(openSqliteIntakeQueue(store.db).enqueueNow([c!])[0]!.kind, 'appended');
    const said: string[] = [];
    const intake = openSqliteIntake({ store, log: (entry) => said.push(entry.message) });
    try {
      const order = store.db.prepare('SELECT id FROM intake_log ORDER BY seq').all() as Array<{ id: string }>;
      assert.deepEqual(order.map((row) => row.id), [c!.id, a!.id, b!.id, d!.id]);
      const replayed = await intake.queue.findByIdempotencyKey('partner-1', 'key-1', 0);
      assert.equal(replayed?.id, b!.id, 'the idempotency key answers the original record');
      assert.ok(said.some((line) => /4 acknowledged payloads read back/.test(line)), said.join('\n'));
      assert.ok(!existsSync(segments[0]) && !existsSync(segments[1]), 'the journal files are removed');
    } finally {
      await intake.stop();
      await store.close();
    }
  });

  it('stops at a torn or damaged record: what follows it was never acknowledged', async () => {
    const file = freshFile();
    const [a, b, c] = [item(), item(), item()];
    const bytes = journalFile(5, [{ number: 1, items: [a!] }, { number: 2, items: [b!] }, { number: 3, items: [c!] }]);
    // The second record's last byte damaged: its CRC fails, and the third, after it, is not read either.
    const firstEnd = 8 + 20 + bytes.readUInt32LE(8);
    const secondEnd = firstEnd + 20 + bytes.readUInt32LE(firstEnd);
    bytes[secondEnd - 1] = bytes[secondEnd - 1]! ^ 0xff;
    writeFileSync(journalFiles(file).segments[0], bytes);
    const store = await openSqliteStore({ file });
    const intake = openSqliteIntake({ store });
    try {
      const ids = (store.db.prepare('SELECT id FROM intake_log ORDER BY seq').all() as Array<{ id: string }>).map((row) => row.id);
      assert.deepEqual(ids, [a!.id]);
    } finally {
      await intake.stop();
      await store.close();
    }
  });

  it('is left alone, and the start refused, while another server holds the file', async () => {
    const file = freshFile();
    const x = item();
    writeFileSync(journalFiles(file).segments[0], journalFile(3, [{ number: 1, items: [x] }]));
    const held = takeServerLock(file);
    const store = await openSqliteStore({ file });
    try {
      assert.throws(() => openSqliteIntake({ store }), /another Trailwire server is using .*: an SQLite file serves one server process/);
      assert.ok(existsSync(journalFiles(file).segments[0]), 'the journal stays for its server');
      held.close();
      const intake = openSqliteIntake({ store });
      assert.equal((await intake.queue.get(x.id))?.status, 'queued');
      await intake.stop();
    } finally {
      await store.close();
    }
  });
});
