/**
 * The benchmarks' baseline of a durable write: payloads in one SQLite table with nothing but a row
 * id, in WAL with synchronous=NORMAL (what Trailwire's `process` durability promises), a group of
 * payloads per commit. Whatever Trailwire spends beyond it is its own.
 */
import Database from 'better-sqlite3';

export interface BarePayload {
  vin: string;
  payload: string;
  receivedAt: number;
}

export interface BarePayloadTable {
  /** Stores a group in one commit; answers each payload's row id. */
  insertGroup(payloads: readonly BarePayload[]): number[];
  close(): void;
}

export function openBarePayloadTable(file: string): BarePayloadTable {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE payloads (seq INTEGER PRIMARY KEY, vin TEXT NOT NULL, payload TEXT NOT NULL, received_at INTEGER NOT NULL) STRICT');
  const insert = db.prepare<[string, string, number]>('INSERT INTO payloads (vin, payload, received_at) VALUES (?, ?, ?)');
  const insertGroup = db.transaction((payloads: readonly BarePayload[]) =>
    payloads.map((entry) => Number(insert.run(entry.vin, entry.payload, entry.receivedAt).lastInsertRowid)),
  );
  return {
    insertGroup: (payloads) => insertGroup.immediate(payloads),
    close: () => db.close(),
  };
}
