/**
 * The SQLite file's intake index: the index conformance suite on a fresh temporary file per case.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { openSqliteIntakeIndex, openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { runIntakeIndexConformance } from '../../conformance/intake-index.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-index-'));
after(() => rmSync(directory, { recursive: true, force: true }));
let files = 0;

runIntakeIndexConformance({
  name: 'sqlite (a temporary file per case)',
  async openIndex() {
    const store = await openSqliteStore({ file: join(directory, `index-${++files}.db`) });
    const index = openSqliteIntakeIndex(store.db);
    return { index, close: async () => (await index.close(), await store.close()) };
  },
});
