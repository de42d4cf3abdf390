/**
 * The file of a fleet import (`trailwire trailers import`, issue 40): CSV with a header row naming
 * `vin` and `unitId` (and optionally `active`), in any order, or NDJSON (one `{"vin", "unitId",
 * "active"}` object a line), told apart by the first line that is not blank (`{` starts NDJSON).
 * Reading only: each line becomes what it asks for, or a problem named by its line number; whether
 * the VINs are valid and free is the import's business (`AdminService.importTrailers`).
 *
 * An empty cell (or an absent or null field) asks for nothing: a new trailer gets no unit id and is
 * active, a known one keeps its own.
 */
import { parseCsvLine } from './csv.ts';
import { TrailwireError } from './errors.ts';

/** One data line of an import file: its number (1 = the first line of the file) and what it asks for. */
export interface TrailerImportLine {
  line: number;
  vin: string;
  unitId?: string;
  active?: boolean;
}

/** A line the import cannot take, and why. */
export interface TrailerImportProblem {
  line: number;
  message: string;
}

export interface TrailerImportFile {
  format: 'csv' | 'ndjson';
  lines: TrailerImportLine[];
  problems: TrailerImportProblem[];
}

/** The longest unit id taken: a unit or asset tag, not a document. */
export const MAX_UNIT_ID_LENGTH = 200;

const COLUMNS = ['vin', 'unitId', 'active'] as const;
type Column = (typeof COLUMNS)[number];

/**
 * Reads an import file. A header that is not `vin,unitId[,active]` in some order makes the whole file
 * unreadable (a `validation_failed` error); a bad data line is a problem, and the others are read.
 */
export function readTrailerImportFile(text: string): TrailerImportFile {
  const rows = text
    .replace(/^\uFEFF/, '')
    .split(/\r?\n/)
    .map((content, index) => ({ line: index + 1, content }))
    .filter((row) => row.content.trim() !== '');
  const first = rows[0];
  if (first === undefined) throw new TrailwireError('validation_failed', 'The import file is empty: expected a CSV header row (vin,unitId[,active]) or NDJSON lines.');
  return first.content.trimStart().startsWith('{') ? readNdjson(rows) : readCsv(first, rows.slice(1));
}

type Row = { line: number; content: string };

function readCsv(header: Row, rows: Row[]): TrailerImportFile {
  const names = parseCsvLine(header.content)?.map((name) => name.trim());
  const unknown = names?.filter((name) => !(COLUMNS as readonly string[]).includes(name)) ?? [];
  const duplicated = names?.filter((name, i) => names.indexOf(name) !== i) ?? [];
  if (!names || unknown.length > 0 || duplicated.length > 0 || !names.includes('vin') || !names.includes('unitId'))
    throw new TrailwireError(
      'validation_failed',
      `line ${header.line}: the header must name the columns vin and unitId, and optionally active (in any order, each once); got ${JSON.stringify(header.content.slice(0, 200))}`,
    );
  const at = (column: Column) => names.indexOf(column);
  const lines: TrailerImportLine[] = [];
  const problems: TrailerImportProblem[] = [];
  for (const { line, content } of rows) {
    const cells = parseCsvLine(content);
    if (cells === null) {
      problems.push({ line, message: 'is not valid CSV (a quote left open, or text after a closing quote)' });
      continue;
    }
    if (cells.length !== names.length) {
      problems.push({ line, message: `has ${cells.length} cells; the header names ${names.length}` });
      continue;
    }
    const active = at('active') < 0 ? '' : cells[at('active')]!.trim().toLowerCase();
    if (active !== '' && active !== 'true' && active !== 'false') {
      problems.push({ line, message: `active: must be true, false or empty, not ${JSON.stringify(active.slice(0, 50))}` });
      continue;
    }
    const read = lineOf(line, cells[at('vin')]!, cells[at('unitId')]!, active === '' ? undefined : active === 'true');
    if ('message' in read) problems.push(read);
    else lines.push(read);
  }
  return { format: 'csv', lines, problems };
}

function readNdjson(rows: Row[]): TrailerImportFile {
  const lines: TrailerImportLine[] = [];
  const problems: TrailerImportProblem[] = [];
  for (const { line, content } of rows) {
    let value: unknown;
    try {
      value = JSON.parse(content);
    } catch {
      problems.push({ line, message: 'is not valid JSON' });
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      problems.push({ line, message: 'must be a JSON object {"vin", "unitId", "active"}' });
      continue;
    }
    const record = value as Record<string, unknown>;
    const unknown = Object.keys(record).filter((key) => !(COLUMNS as readonly string[]).includes(key));
    const { vin, unitId, active } = record;
    const message =
      unknown.length > 0
        ? `has fields the import does not know: ${unknown.slice(0, 5).join(', ')} (it takes vin, unitId and active)`
        : typeof vin !== 'string'
          ? 'vin: must be a string'
          : unitId !== undefined && unitId !== null && typeof unitId !== 'string'
            ? 'unitId: must be a string or null'
            : active !== undefined && active !== null && typeof active !== 'boolean'
              ? 'active: must be true, false or null'
              : undefined;
    if (message !== undefined) {
      problems.push({ line, message });
      continue;
    }
    const read = lineOf(line, vin as string, (unitId as string | null | undefined) ?? '', (active as boolean | null | undefined) ?? undefined);
    if ('message' in read) problems.push(read);
    else lines.push(read);
  }
  return { format: 'ndjson', lines, problems };
}

function lineOf(line: number, vin: string, unitId: string, active: boolean | undefined): TrailerImportLine | TrailerImportProblem {
  const trimmedVin = vin.trim();
  if (trimmedVin === '') return { line, message: 'vin: is missing' };
  const trimmedUnit = unitId.trim();
  if (trimmedUnit.length > MAX_UNIT_ID_LENGTH) return { line, message: `unitId: is longer than ${MAX_UNIT_ID_LENGTH} characters` };
  return { line, vin: trimmedVin, ...(trimmedUnit === '' ? {} : { unitId: trimmedUnit }), ...(active === undefined ? {} : { active }) };
}
