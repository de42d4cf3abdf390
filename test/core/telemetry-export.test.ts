/**
 * Telemetry exports in the core (core/telemetry-export.ts): the first page is read before the export
 * answers (so a failing store is still a status), later pages only as the reader asks for them (so a
 * slow client holds the store's reads back, and memory stays a page or two), and keyset pages follow
 * each other's last key until a short page.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { keysetPages, openExport } from '../../core/telemetry-export.ts';

type Row = { key: number; record: { n: number } };

/** A list of `total` rows read in pages, counting the reads. */
function countingList(total: number) {
  const reads: (number | undefined)[] = [];
  const fetch = async (after: number | undefined, limit: number): Promise<Row[]> => {
    reads.push(after);
    const start = after === undefined ? 0 : after + 1;
    return Array.from({ length: Math.max(0, Math.min(limit, total - start)) }, (_, i) => ({ key: start + i, record: { n: start + i } }));
  };
  return { reads, fetch };
}

const columns = { names: ['n'], cells: (view: { n: number }) => [view.n] };

describe('telemetry exports', () => {
  it('keyset pages continue after the last key and stop at a short page', async () => {
    const list = countingList(25);
    const pages = [];
    for await (const page of keysetPages(list.fetch, 10)) pages.push(page.map((row) => row.key));
    assert.deepEqual(pages.map((page) => page.length), [10, 10, 5]);
    assert.deepEqual(list.reads, [undefined, 9, 19]);
    const exact = countingList(20);
    for await (const _ of keysetPages(exact.fetch, 10));
    assert.deepEqual(exact.reads, [undefined, 9, 19], 'a full last page costs one empty read');
  });

  it('reads the first page before answering, then a page only when the reader wants more', async () => {
    const list = countingList(100_000);
    const chunks = await openExport('csv', keysetPages(list.fetch, 100), (row: Row) => row.record, columns);
    assert.equal(list.reads.length, 1, 'the first page, read up front');
    // As the Koa route streams it: a high-water mark of one chunk.
    const stream = Readable.from(chunks, { highWaterMark: 1 });
    const first = [];
    for await (const chunk of stream) {
      first.push(chunk);
      if (first.length === 3) break;
    }
    assert.equal(first[0], 'n\r\n', 'the header row first');
    assert.ok(list.reads.length <= 4, `a reader that took three chunks caused ${list.reads.length} store reads, not the range's 1,000`);
  });

  it('a store failing on the first page fails the export itself; NDJSON is a JSON record a line', async () => {
    const failing = async (): Promise<Row[]> => {
      throw new Error('disk full');
    };
    await assert.rejects(openExport('ndjson', keysetPages(failing), (row: Row) => row.record, columns), /disk full/);
    const chunks = await openExport('ndjson', keysetPages(countingList(3).fetch), (row: Row) => row.record, columns);
    let text = '';
    for await (const chunk of chunks) text += chunk;
    assert.equal(text, '{"n":0}\n{"n":1}\n{"n":2}\n');
  });
});
