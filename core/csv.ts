/**
 * CSV as RFC 4180 spells it, both ways: the rows of the read API's exports (issue 40) and the lines of
 * a fleet import file. A cell holding a comma, a double quote, CR or LF is quoted, quotes doubled;
 * rows end with CRLF.
 *
 * Spreadsheets run a cell that starts with `=`, `+`, `-`, `@`, a tab or CR as a formula (CSV
 * injection, OWASP). Exported text can come from an operator or a partner (a unit id, a device's
 * metrics), so a text cell starting with one of those is prefixed with an apostrophe and quoted:
 * `-1+2` is written `"'-1+2"`. Numbers are written as numbers (a negative longitude stays `-122.6`):
 * they are data the service produced, never text someone typed.
 */

/** A value of a CSV cell: text, a number, a boolean, or nothing (an empty cell). */
export type CsvValue = string | number | boolean | null;

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

/** One cell as CSV text. */
export function csvCell(value: CsvValue): string {
  if (value === null) return '';
  if (typeof value !== 'string') return String(value);
  if (FORMULA_START.test(value)) return `"'${value.replaceAll('"', '""')}"`;
  return NEEDS_QUOTES.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

/** One row: its cells joined by commas, ended by CRLF. */
export function csvRow(values: readonly CsvValue[]): string {
  return `${values.map(csvCell).join(',')}\r\n`;
}

/**
 * The cells of one line of a CSV file (without its line end), quotes undone. A quoted cell may hold
 * commas and doubled quotes; it cannot span lines here, since an import names each line by its
 * number. Answers null for a line that is not valid CSV (an unclosed quote, text after a closing one).
 */
export function parseCsvLine(line: string): string[] | null {
  const cells: string[] = [];
  let at = 0;
  for (;;) {
    if (line[at] === '"') {
      let cell = '';
      let i = at + 1;
      for (;;) {
        const close = line.indexOf('"', i);
        if (close < 0) return null;
        cell += line.slice(i, close);
        if (line[close + 1] === '"') {
          cell += '"';
          i = close + 2;
          continue;
        }
        at = close + 1;
        break;
      }
      cells.push(cell);
      if (at === line.length) return cells;
      if (line[at] !== ',') return null;
      at += 1;
    } else {
      const comma = line.indexOf(',', at);
      const cell = line.slice(at, comma < 0 ? undefined : comma);
      if (cell.includes('"')) return null;
      cells.push(cell);
      if (comma < 0) return cells;
      at = comma + 1;
    }
  }
}
