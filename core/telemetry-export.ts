/**
 * Telemetry exports (contract 5, issue 40): a whole `from`–`to` range of a telemetry list as CSV or
 * NDJSON, read from the store in keyset pages and handed to the transport as text chunks, one page
 * each, only as fast as the transport asks for them. So an export of a million fixes holds one page
 * in memory, never the range; and it is the list's own read (the same ownership checks, the same
 * store queries, the same JSON views) that the JSON pages use.
 */
import { type CsvValue, csvRow } from './csv.ts';
import { invalidField } from './errors.ts';
import { parseTimeRange, type TimeRange } from './paging.ts';

/** The export formats, by their media types' short names. */
export type ExportFormat = 'csv' | 'ndjson';

/** Media type of each format (CSV with a header row, RFC 4180 and RFC 7111). */
export const EXPORT_MEDIA_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8; header=present',
  ndjson: 'application/x-ndjson',
};

/** The longest range one export may cover: 31 days, a month of fixes of one trailer at one a second is 2.7 million rows. */
export const EXPORT_MAX_RANGE_MS = 31 * 24 * 60 * 60 * 1000;

/** Rows per store read: large enough that the query's round trip is amortized, small enough to stay a few hundred KiB. */
export const EXPORT_PAGE_ROWS = 1000;

/**
 * The range of an export from its query parameters: `from` and `to` as on the JSON lists (the same
 * defaults), at most `EXPORT_MAX_RANGE_MS` long. `take` and `next` shape pages, and an export has
 * none: either is a 400 rather than silently ignored.
 */
export function parseExportRange(query: { from?: string; to?: string; take?: string; next?: string }, now: number): TimeRange {
  for (const name of ['take', 'next'] as const)
    if (query[name] !== undefined) throw invalidField(`/${name}`, 'does not apply to a CSV or NDJSON export, which holds the whole from–to range; omit it');
  const range = parseTimeRange(query, now);
  if (range.to - range.from > EXPORT_MAX_RANGE_MS)
    throw invalidField('/from', `must be at most 31 days before \`to\` in a CSV or NDJSON export; export a longer range in parts`);
  return range;
}

/** How one record of a list is written: its CSV columns (a header row) and its cells, from its JSON view. */
export interface ExportColumns<View> {
  names: readonly string[];
  cells: (view: View) => CsvValue[];
}

/**
 * The text of an export: the rows of `pages` rendered with `view`, as CSV (a header row first) or as
 * NDJSON (one JSON view a line). The first page is read before this answers, so a failing store or a
 * bad range is still an error the transport can answer with a status; a failure after that ends the
 * stream, which the transport must cut off rather than end cleanly.
 */
export async function openExport<Row, View>(
  format: ExportFormat,
  pages: AsyncIterator<Row[]>,
  view: (row: Row) => View,
  columns: ExportColumns<View>,
): Promise<AsyncIterable<string>> {
  const first = await pages.next();
  const render =
    format === 'csv'
      ? (rows: Row[]) => rows.map((row) => csvRow(columns.cells(view(row)))).join('')
      : (rows: Row[]) => rows.map((row) => `${JSON.stringify(view(row))}\n`).join('');
  return (async function* chunks() {
    if (format === 'csv') yield csvRow(columns.names);
    for (let page = first; !page.done; page = await pages.next()) yield render(page.value);
  })();
}

/**
 * A list read page after page by its keyset: `fetch` answers up to `limit` rows after `after`
 * (undefined: from the start); a short page is the last.
 */
export async function* keysetPages<Key, Row extends { key: Key }>(
  fetch: (after: Key | undefined, limit: number) => Promise<Row[]>,
  limit: number = EXPORT_PAGE_ROWS,
): AsyncGenerator<Row[]> {
  for (let after: Key | undefined; ; ) {
    const page = await fetch(after, limit);
    if (page.length > 0) yield page;
    if (page.length < limit) return;
    after = page[page.length - 1]!.key;
  }
}
