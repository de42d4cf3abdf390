/**
 * The readable form of the list commands: an aligned text table with a header, one row per record,
 * columns two spaces apart — what an operator reads in a terminal and `grep`s or `awk`s. `--json`
 * prints the records themselves instead (`{"data": [...]}`). A cell shows control characters escaped
 * (`escapeControls`): a value can neither drive the terminal nor start a row of its own.
 */

import { escapeControls } from './output.ts';

/** A column: its header and how a row shows in it (`null` shows as `-`). */
export interface Column<T> {
  header: string;
  cell: (row: T) => string | number | null;
}

/** The table of `rows`, or `empty` when there are none. Ends without a newline. */
export function formatTable<T>(rows: readonly T[], columns: readonly Column<T>[], empty: string): string {
  if (rows.length === 0) return empty;
  const cells = [columns.map((column) => column.header), ...rows.map((row) => columns.map((column) => escapeControls(String(column.cell(row) ?? '-'))))];
  const widths = columns.map((_, index) => Math.max(...cells.map((line) => line[index]!.length)));
  return cells.map((line) => line.map((cell, index) => (index === line.length - 1 ? cell : cell.padEnd(widths[index]!))).join('  ')).join('\n');
}

/** An epoch-ms time as the JSON shows it, as the read API does: RFC 3339 UTC with milliseconds, or null. */
export function isoTime(epochMs: number | null): string | null {
  return epochMs === null ? null : new Date(epochMs).toISOString();
}

/** Such a time as a table shows it: to the second, which is what a reader compares. */
export function shortTime(iso: string | null): string | null {
  return iso === null ? null : iso.replace(/\.\d{3}Z$/, 'Z');
}
